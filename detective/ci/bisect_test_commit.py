"""The test ``git bisect run`` calls at each commit: exit 0 good, 1 bad, 125 skip.

Any unexpected error is a skip, never an exit code above 127, which would abort the
whole bisection.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="detective.ci.bisect_test_commit")
    parser.add_argument("--out-root", required=True)
    parser.add_argument("--mode", default="count")
    parser.add_argument("--budget", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        from detective.ci.bisect import git, test_commit
        from detective.ci.gate import Budget

        result, run_dir = test_commit(git(".", "rev-parse", "--show-toplevel"), command,
                                      Budget(**json.loads(args.budget)), args.mode, args.out_root)
        print(f"detective bisect: {run_dir}: {'good' if result == 0 else 'bad' if result == 1 else 'skip'}")
        return result
    except Exception as exc:  # noqa: BLE001 - a crash here must read as "skip", not abort
        print(f"detective bisect: skipping this commit: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 125


if __name__ == "__main__":
    sys.exit(main())

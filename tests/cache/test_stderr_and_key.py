"""The stderr pass-through of `detective run`, and how the cache key's environment is compared.

The pass-through runs a real child (no torch_xla needed: nothing is traced) under a real
pseudo-terminal; the key functions follow torch_xla's env_hash.cc.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from detective.runtime.cache_record import key_differences, key_flags

CHILD = r"""
import os, sys
sys.stderr.write("isatty=%s\n" % sys.stderr.isatty())
sys.stderr.write("2026-11-23 01:17:20.072263: W torch_xla/csrc/runtime/pjrt_computation_client.cpp:694] "
                 "Failed to deserialize executable: UNIMPLEMENTED: not here\n")
sys.stderr.write("last words\n")
sys.stderr.flush()
os._exit(7)
"""


def _run_under_pty(tmp_path) -> tuple[subprocess.CompletedProcess, str]:
    master, slave = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "detective", "run", "--quiet", "--out", str(tmp_path / "run"),
                           "--", sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=slave, timeout=120)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc, b"".join(chunks).decode()


def test_stderr_passes_through_unchanged_and_stays_a_terminal(tmp_path):
    import json

    proc, err = _run_under_pty(tmp_path)
    assert proc.returncode == 7  # the command's own exit code, after its last words
    assert "isatty=True" in err  # the child still writes to a terminal
    assert "last words\n" in err.replace("\r\n", "\n") and "not here" in err
    cache = json.loads((tmp_path / "run" / "run.json").read_text())["cache"]
    assert cache is None  # no process set a cache up: the warning alone does not make one


def test_key_flags_follow_torch_xla():
    assert key_flags("--xla_b=1 --xla_a=2 --xla_dump_to=/tmp/d notaflag") == ["--xla_a=2", "--xla_b=1"]
    assert key_flags(None) == key_flags("") == []
    same_key = {"XLA_FLAGS": "--xla_b=1 --xla_a=2"}
    assert key_differences(same_key, {"XLA_FLAGS": "--xla_a=2 --xla_b=1 --xla_dump_to=/x"}) == []
    assert key_differences({"XLA_IR_DEBUG": None}, {"XLA_IR_DEBUG": ""}) == []
    assert key_differences({"XLA_IR_DEBUG": None, "torch_xla_gitrev": "a"},
                           {"XLA_IR_DEBUG": "1", "torch_xla_gitrev": "b"}) == [
        ("XLA_IR_DEBUG", None, "1"), ("torch_xla_gitrev", "a", "b")]
    assert key_differences({"devices": 4}, {"devices": None}) == []  # one run never started the runtime

"""Command-line entry point.

Subcommands live next to the code they drive and are imported only when invoked, so
``detective lint`` never pays for pandas or torch.
"""

from __future__ import annotations

import importlib

import click

from detective import __version__

# name -> "module:attribute" of a click command
COMMANDS: dict[str, str] = {
    "lint": "detective.lint.cli:lint",
    "rules": "detective.lint.cli:rules",
    "gate": "detective.ci.cli:gate",
    "bisect": "detective.ci.cli:bisect",
    "bisect-steps": "detective.ci.cli:bisect_steps",
    "run": "detective.runtime.cli:run",
    "merge": "detective.runtime.merge:merge_command",
    "report": "detective.report.cli:report",
    "cache-check": "detective.cache_check.cli:cache_check",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="detective")
def cli():
    """Find what makes torch_xla compile new programs, and where."""


def main():
    # click exits 2 on usage errors already; keep that as our documented code.
    cli(prog_name="detective")

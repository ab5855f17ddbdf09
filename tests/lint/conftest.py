import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from detective.cli import cli



@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """CLI runs cache by default: keep each test's cache out of the repository."""
    monkeypatch.setenv("DETECTIVE_CACHE_DIR", str(tmp_path_factory.mktemp("detective-cache")))


@pytest.fixture
def run_cli():
    def run(*args, cwd=None):
        runner = CliRunner()
        if cwd is None:
            return runner.invoke(cli, list(args), catch_exceptions=False)
        with runner.isolated_filesystem(temp_dir=cwd):
            return runner.invoke(cli, list(args), catch_exceptions=False)

    return run


@pytest.fixture
def write(tmp_path):
    """write({"pkg/a.py": "..."}) -> tmp_path, with sources dedented."""

    def write_files(files: dict[str, str | bytes]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content))
        return tmp_path

    return write_files

"""Ctrl-C while the command line is still importing ends with one line, not a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests import processes
from tests.mcp_support import REPO_ROOT

# A Ctrl-C arriving while kbmcp.cli imports its commands, made deterministic: an import hook
# raises KeyboardInterrupt (what Python's SIGINT handler raises) at one of those imports.
INTERRUPTED_IMPORT = """
import sys

class InterruptAnImport:
    def find_spec(self, name, path=None, target=None):
        if name == "kbmcp.cli.search":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, InterruptAnImport())
{entry}
"""


def _run(entry: str) -> subprocess.CompletedProcess[str]:
    code = INTERRUPTED_IMPORT.format(entry=entry)
    return processes.run(
        [sys.executable, "-c", code, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "entry", ["from kbmcp.entry import main; main()", "import runpy; runpy.run_module('kbmcp')"]
)
def test_ctrl_c_during_the_command_lines_imports_is_one_line(entry: str) -> None:
    run = _run(entry)
    assert (run.returncode, run.stderr) == (130, "interrupted\n")


def test_the_console_script_is_the_guarded_entry() -> None:
    """The installed `kbmcp` runs kbmcp.entry (the old kbmcp.cli entry printed a traceback)."""
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'kbmcp = "kbmcp.entry:main"' in pyproject
    unguarded = _run("from kbmcp.cli import main; main()")
    assert "Traceback" in unguarded.stderr

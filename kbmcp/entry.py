"""The `kbmcp` console script. Importing the command line takes a moment on a cold start, and a
Ctrl-C in that moment would print a traceback from deep inside an import: it ends the command
with one line and exit status 130 instead, as a Ctrl-C while a command runs does
(kbmcp/cli/__init__.py `main`)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from kbmcp.cli import main as run_command_line
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run_command_line()

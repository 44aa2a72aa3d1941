"""Running `kbmcp ARGS...` in-process through the real entry point (`kbmcp.cli.main`), with its
error handling, and checking the one-line error format. Used as the `kbmcp` fixture."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbmcp.cli import main


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def cli_runner(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*args: str | Path) -> Run:
        code = 0
        try:
            main([str(arg) for arg in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def assert_one_line_error(run: Run, *fragments: str) -> None:
    assert run.code != 0
    assert run.out == ""
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in run.err
    for fragment in fragments:
        assert fragment in lines[0]

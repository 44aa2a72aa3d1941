"""The tests' own waiting (tests/patience.py) and child processes (tests/processes.py): every
wait is for an event, bounded by a ceiling that grows with the machine's load (one setting,
KBMCP_TEST_PATIENCE, overrides it), and a child that times out or is stopped takes everything
it started with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import mcp_support, processes
from tests.mcp_support import HttpServer
from tests.patience import PATIENCE_ENV, ceiling, patience, wait_until

# A child that starts a grandchild (which outlives it unless its group is killed), writes the
# grandchild's pid to argv[1], then sleeps; SIGTERM ends the child alone (as a server ends).
PARENT = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(grandchild.pid))
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not reaped by init yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ends(pid: int) -> bool:
    """Whether `pid` ends within the ceiling of 10 s (a SIGKILL is delivered, not awaited)."""
    wait_until(lambda: not alive(pid), 10, f"the end of {pid}")
    return True


def grandchild_of(pid_file: Path) -> int:
    wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", 30, "the grandchild")
    return int(pid_file.read_text())


def test_the_setting_multiplies_every_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "2.5")
    assert patience() == 2.5 and ceiling(60) == 150
    for bad in ("soon", "0", "-1", "nan"):
        monkeypatch.setenv(PATIENCE_ENV, bad)
        with pytest.raises(ValueError, match=PATIENCE_ENV):
            patience()


def test_unset_the_ceilings_grow_with_the_load_per_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PATIENCE_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (40.0, 30.0, 20.0))  # as in the issue
    assert ceiling(60) == 1200
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.2, 0.1))  # idle: the base figure
    assert ceiling(60) == 60


def test_a_timed_out_run_kills_what_its_child_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "1")
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run([sys.executable, "-c", PARENT, str(pid_file)], timeout=3)
    assert time.monotonic() - started < 30
    assert ends(grandchild_of(pid_file))


def test_subprocess_run_alone_would_leave_the_grandchild_running(tmp_path: Path) -> None:
    """Why tests/processes.py exists: what a timed-out soak test did with its servers."""
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", PARENT, str(pid_file)], timeout=3)
    orphan = grandchild_of(pid_file)
    try:
        assert alive(orphan)
    finally:
        os.kill(orphan, 9)


def test_stop_ends_the_child_then_its_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    child = processes.popen([sys.executable, "-c", PARENT, str(pid_file)])
    grandchild = grandchild_of(pid_file)
    assert processes.stop(child) == -15  # SIGTERM was enough for the child ...
    assert ends(grandchild)  # ... and its group went with it


def test_leftovers_are_killed_at_the_end(tmp_path: Path) -> None:
    """A test that forgot its process (or was interrupted before its clean-up): the session's
    end (tests/conftest.py) kills the group."""
    pid_file = tmp_path / "pid"
    child = processes.popen([sys.executable, "-c", PARENT, str(pid_file)])
    grandchild = grandchild_of(pid_file)
    child.kill()  # the test's own clean-up: its child only
    child.wait()
    assert alive(grandchild)
    assert child.pid in processes.kill_leftovers()
    assert ends(grandchild)
    assert processes.kill_leftovers() == []


def test_a_silent_pipe_fails_within_the_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "1")
    child = processes.popen(
        [sys.executable, "-c", "print('one', flush=True); import time; time.sleep(600)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        lines = processes.Lines(child.stdout)
        assert lines.next() == "one\n"
        started = time.monotonic()
        with pytest.raises(AssertionError, match="no line in time; so far: one"):
            lines.next(1)
        assert 0.9 < time.monotonic() - started < 10
    finally:
        processes.stop(child)


# Says it listens after 2 s, then stays (a server that starts slowly).
SLOW_START = (
    "import sys, time; time.sleep(2); "
    "print('kbmcp: listening on http://127.0.0.1:9/mcp', file=sys.stderr, flush=True); "
    "time.sleep(600)"
)


def test_a_server_is_waited_for_until_it_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waiting is for the "listening on" line, bounded by the ceiling: a start slower than the
    ceiling is a failure (and the server is stopped), one within it is waited for."""
    monkeypatch.setattr(mcp_support, "SERVER_START_SECONDS", 0.5)
    monkeypatch.setenv(PATIENCE_ENV, "1")
    with pytest.raises(AssertionError, match="did not start"):
        HttpServer(tmp_path / "kb.db", launcher=("-c", SLOW_START))
    monkeypatch.setenv(PATIENCE_ENV, "20")  # a loaded machine: 10 s
    server = HttpServer(tmp_path / "kb.db", launcher=("-c", SLOW_START))
    try:
        assert server.url == "http://127.0.0.1:9/mcp"
    finally:
        server.stop()
    assert server.process.returncode is not None


def test_the_readme_names_the_setting() -> None:
    readme = (mcp_support.REPO_ROOT / "README.md").read_text()
    assert f"`{PATIENCE_ENV}=" in readme


# A test process that starts a server-like child, says its pid, then waits to be killed.
KILLED_PARENT = """
import sys
from tests import processes
child = processes.popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
import time; time.sleep(600)
"""


def test_a_test_process_killed_outright_takes_its_children_with_it() -> None:
    """No clean-up runs in a process killed with SIGKILL (or an xdist worker interrupted
    mid-test): the kernel ends its children (prctl PR_SET_PDEATHSIG)."""
    parent = subprocess.Popen(
        [sys.executable, "-c", KILLED_PARENT],
        cwd=mcp_support.REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = int(processes.Lines(parent.stdout).next())
        assert alive(child)
    finally:
        parent.kill()
        parent.wait()
    assert ends(child)

"""Processes the tests start, each in a process group of its own, so that nothing they start
outlives the test: `kbmcp serve`, `kbmcp add`, bench scripts that start servers of their own.

`subprocess.run(..., timeout=...)` kills only the process it started: a timed-out
bench/soak.py died, and the two `kbmcp serve --http` it had started ran on for half an hour
with init as their parent. Here a process starts a new session (its own process group, and no
terminal's Ctrl-C), and every way out kills the whole group: a timeout, `stop()`, the end of
the test session (`kill_leftovers`, called by tests/conftest.py) and the exit of the test
process; and if the test process dies without any clean-up (killed, or an interrupted xdist
worker), the kernel sends its children SIGTERM (`_end_with`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from tests.patience import ceiling

_STARTED: list[subprocess.Popen[Any]] = []  # leaders of groups that may hold a process


def popen(args: Sequence[Any], **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen` in a process group of its own (whose id is the child's pid), sent
    SIGTERM by the kernel if the test process dies first (`preexec_fn` may add its own)."""
    kwargs["preexec_fn"] = _end_with(os.getpid(), kwargs.get("preexec_fn"))
    process: subprocess.Popen[Any] = subprocess.Popen(args, start_new_session=True, **kwargs)
    _STARTED.append(process)
    return process


# Linux's prctl(PR_SET_PDEATHSIG): a signal for the child when the thread that started it ends
# (tests start processes from the main thread, which lives as long as the test process). Without
# it, a test process killed mid-test (an interrupted xdist worker, a SIGKILL) runs no clean-up,
# and its servers ran on with init as their parent. Loaded here: no dlopen between fork and exec.
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _end_with(parent: int, then: Callable[[], object] | None) -> Callable[[], None]:
    def in_the_child() -> None:
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the parent died before prctl: nothing would tell us
                os._exit(1)
        if then is not None:
            then()

    return in_the_child


def run(args: Sequence[Any], *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run` with `timeout` as a ceiling (scaled by tests/patience.py): on timeout
    the whole process group is killed, then `subprocess.TimeoutExpired` is raised as usual.
    `input`, `capture_output` and `check` work as in `subprocess.run`."""
    given = kwargs.pop("input", None)
    check = kwargs.pop("check", False)
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if given is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(args, **kwargs) as process:
        try:
            out, err = process.communicate(given, timeout=ceiling(timeout))
        except subprocess.TimeoutExpired:
            kill_group(process)
            process.communicate()
            raise
        finally:
            kill_group(process)  # whatever it left behind (a server it started, ...)
    done = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def stop(process: subprocess.Popen[Any], *, grace: float = 10) -> int:
    """Ends `process` as a supervisor would: SIGTERM, then (after `ceiling(grace)` seconds)
    SIGKILL; then kills whatever else is left in its group. Its exit status."""
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=ceiling(grace))
    kill_group(process)
    return process.wait()


def kill_group(process: subprocess.Popen[Any]) -> bool:
    """SIGKILL to every process left in `process`'s group (it is the group's leader, alive or
    not), then reaps the leader. Whether a process got the signal."""
    killed = False
    # Once the leader is reaped, its pid may be reused, but not while a process of its group
    # lives (Linux keeps a group's id reserved). A process with the leader's pid after the
    # leader was reaped is therefore someone else's, in a group of its own: leave it alone.
    reused = process.poll() is not None and _exists(process.pid)
    if not reused:
        try:
            os.killpg(process.pid, signal.SIGKILL)
            killed = True
        except (ProcessLookupError, PermissionError):
            pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=ceiling(10))
    if process in _STARTED:
        _STARTED.remove(process)
    return killed


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_leftovers() -> list[int]:
    """Kills what is left of every group the tests started and did not stop with `stop()`,
    `run()` or `kill_group()`: a test that ended its process with `process.kill()` (its group
    may still hold what the process started) or was interrupted before its clean-up. The
    groups in which a process got the signal."""
    return [process.pid for process in list(_STARTED) if kill_group(process)]


atexit.register(kill_leftovers)


class Lines:
    """The lines of a child's pipe, read by a thread of their own: a test waits for the next
    line with a ceiling, where `pipe.readline()` would wait forever for a child that hangs.
    Every line read so far is kept in `seen`."""

    def __init__(self, pipe: IO[str]) -> None:
        self._queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._ended = False
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[str]) -> None:
        for line in pipe:
            self._queue.put(line)
        self._queue.put("")  # the end

    def next(self, seconds: float = 60) -> str:
        """The next line ("" at the end of the pipe), within `ceiling(seconds)`."""
        return self._get(time.monotonic() + ceiling(seconds))

    def until(self, wanted: Callable[[str], bool], seconds: float = 60) -> str:
        """Reads up to the first line that is `wanted`, or to the end; that line ("" at the
        end). `ceiling(seconds)` bounds the whole wait."""
        deadline = time.monotonic() + ceiling(seconds)
        while True:
            line = self._get(deadline)
            if not line or wanted(line):
                return line

    def rest(self, seconds: float = 60) -> str:
        """The lines from here to the end of the pipe, within `ceiling(seconds)`."""
        start = len(self.seen)
        self.until(lambda _line: False, seconds)
        return "".join(self.seen[start:])

    def _get(self, deadline: float) -> str:
        if self._ended:
            return ""
        try:
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line in time; so far: {''.join(self.seen)}") from None
        self._ended = not line
        self.seen.append(line)
        return line

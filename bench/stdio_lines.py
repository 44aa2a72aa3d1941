"""CPU time `kbmcp serve` (stdio) spends on one long input line.

Starts `kbmcp serve` on a small knowledge base (hashing embedder), sends `initialize`, one
`ping` whose params carry a pad of the given size (a line of about that many bytes), then a
plain `ping`, closes stdin and reads every reply. The server's CPU time (user + sys, from
wait4) minus that of the same run without the long line is what the line cost: reading it,
and parsing it when it is under the line limit. The reply to the long line says which.

    python bench/stdio_lines.py                      # 8 MiB and 50 MiB lines, 3 runs each
    python bench/stdio_lines.py --mib 8 50 --runs 5
    KBMCP_STDIO_MAX_LINE_BYTES=67108864 python bench/stdio_lines.py   # parse them, too
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LAST_PING = {"jsonrpc": "2.0", "id": 3, "method": "ping"}


def env() -> dict[str, str]:
    return {**os.environ, "KBMCP_EMBEDDER": "hash", "PYTHONPATH": str(REPO_ROOT)}


def build_db(folder: Path) -> Path:
    notes = folder / "notes"
    notes.mkdir()
    (notes / "heron.md").write_text("# Heron\n\nThe heron waits by the water.\n")
    db = folder / "kb.db"
    subprocess.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "add", str(notes)],
        env=env(),
        check=True,
        capture_output=True,
    )
    return db


def long_line(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"'
    tail = b'"}}\n'
    return head + b"a" * max(0, size - len(head) - len(tail)) + tail


def run(db: Path, line: bytes | None) -> tuple[float, list[dict]]:
    """The server's CPU seconds for one session, and its replies."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "serve"],
        env=env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: list[bytes] = []
    reader = threading.Thread(target=lambda: replies.extend(process.stdout), daemon=True)
    reader.start()
    messages = [json.dumps(INITIALIZE).encode() + b"\n", json.dumps(INITIALIZED).encode() + b"\n"]
    if line is not None:
        messages.append(line)
    messages.append(json.dumps(LAST_PING).encode() + b"\n")
    for message in messages:
        process.stdin.write(message)
    process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=30)
    return usage.ru_utime + usage.ru_stime, [json.loads(reply) for reply in replies]


def describe(replies: list[dict]) -> str:
    answer = next((reply for reply in replies if reply.get("id") == 2), None)
    if answer is None:
        return "no reply"
    if "error" in answer:
        return f"error {answer['error']['code']}: {answer['error']['message'][:90]}"
    return "answered"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, nargs="+", default=[8, 50])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = build_db(Path(tmp))
        base = [run(db, None)[0] for _ in range(args.runs)]
        baseline = statistics.median(base)
        print(f"baseline session (no long line): {baseline:.2f} s CPU (median of {args.runs})")
        for mib in args.mib:
            line = long_line(int(mib * 1024 * 1024))
            seconds, outcome = [], ""
            for _ in range(args.runs):
                started = time.perf_counter()
                cpu, replies = run(db, line)
                wall = time.perf_counter() - started
                seconds.append(cpu - baseline)
                outcome = describe(replies)
            print(
                f"{mib:g} MiB line: {statistics.median(seconds):.2f} s CPU beyond the baseline "
                f"(median of {args.runs}; last run {wall:.1f} s wall); the line: {outcome}"
            )


if __name__ == "__main__":
    main()

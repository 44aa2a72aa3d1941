"""docs/cli.md's example outputs are the real commands' outputs: each documented command runs on
a knowledge base shaped like the docs' (with the default model), and its output must read as
the docs show it, line by line, after masking what differs from machine to machine (ids, times,
paths, version numbers, counts). What is not masked must match: the words, the order, and the
schema versions (docs/cli.md showed version 8 where files are at 12, PostgreSQL 2 where it is 6).

Conventions of docs/cli.md: in a ```bash block, the `# ` lines right after a `kbmcp` command are
its output (a `#   ` line continues the one before it; `#   ...` stands for lines left out; a
trailing `(on stderr)` says which stream); a plain ``` block that starts with `$ kbmcp` is a
terminal transcript (`...` likewise). Every such example must be one of CHECKED, or of
NOT_CHECKED with the reason: an output example added to the docs without either fails
`test_every_output_example_is_checked`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kbmcp.ids import TEST_KEY_ENV
from tests.cli_support import Run
from tests.mcp_support import REPO_ROOT, write

CLI_MD = REPO_ROOT / "docs" / "cli.md"


@dataclass(frozen=True)
class Example:
    command: str  # as written in the docs
    lines: list[str]  # the output the docs show ("..." for lines left out)


def output_examples(markdown: str) -> list[Example]:
    found = []
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```", markdown, re.M | re.S):
        lines = body.splitlines()
        if language == "" and lines and lines[0].startswith("$ kbmcp "):
            found.append(Example(lines[0][2:], lines[1:]))
        elif language in ("bash", "sh"):
            for i, line in enumerate(lines):
                if not line.startswith("kbmcp ") and not line.startswith("$ kbmcp "):
                    continue
                shown: list[str] = []
                for comment in lines[i + 1 :]:
                    if comment.startswith("#   ") and shown and comment.strip() != "#   ...":
                        shown[-1] += " " + comment[4:].strip()  # a continued line
                    elif comment.startswith("# "):
                        shown.append(STREAM_NOTE.sub("", comment[2:]).strip())
                    else:
                        break
                if shown:
                    found.append(Example(line.split("  #")[0].strip(), shown))
    return found


STREAM_NOTE = re.compile(r"\s+\(on std(?:err|out)\)\s*$")

# What differs between machines and runs, masked in the docs' lines and the real ones alike.
MASKS = [
    (re.compile(r"\b(?:kb|doc|rev|chk|mem|mst|ten|tok)_[0-9a-f]{16}\b"), "<id>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T[\d:.]+Z"), "<time>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}"), "<date>"),
    (re.compile(r"on Python \S+ \([^)]*\)"), "on Python <version> (<platform>)"),
    (re.compile(r"(?<!\S)(?:postgresql://|~/|/)\S*?(?=[,;:]? |[,;:]?$)"), "<path>"),
    (re.compile(r"\b\d+(?:\.\d+)+\S*"), "<version>"),  # also timings: 0.49 s, 4.1s
    (re.compile(r"\b\d+(?= [a-z])"), "<n>"),  # counts: 3 documents (not "version 12 (")
    # A count's noun follows its number: "1 memory" in one, "2 memories" in the other.
    (re.compile(r"ies\b"), "y"),
    (re.compile(r"(?<=[a-z])s\b"), ""),
]


def masked(line: str) -> str:
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


def mismatch(shown: list[str], real: list[str]) -> str | None:
    """Where the docs' lines differ from the real ones ("..." matches any run of lines)."""
    want = [masked(line) for line in shown]
    have = [masked(line) for line in real]

    def matches(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(have)
        if want[i] == "...":
            return any(matches(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and want[i] == have[j] and matches(i + 1, j + 1)

    if matches(0, 0):
        return None
    return "docs:\n  " + "\n  ".join(want) + "\nreal:\n  " + "\n  ".join(have)


# Every output example of docs/cli.md, by its command as written there.
CHECKED = {
    "kbmcp ls",
    "kbmcp ls handbook --path ops/ --tag team=ops",
    'kbmcp remember "The deploy key rotates on the first Monday of each month" --tag topic=deploy',
    "kbmcp memory store list",
    "kbmcp doctor",
    "kbmcp --db postgresql://kbmcp:secret@db.internal/kbmcp doctor",
    "kbmcp copy ~/kb/kbmcp.db postgresql://kbmcp:secret@db.internal:5432/kbmcp",
    "kbmcp export > kb.jsonl",
    "kbmcp --db restored.db import kb.jsonl",
}
# Output examples that depend on more than a knowledge base: what is installed on the machine,
# or the traffic of a running HTTP server. Each with the reason it is not run here.
NOT_CHECKED = {
    "kbmcp --db ~/kb/kbmcp.db connect claude-desktop": "writes a desktop client's configuration",
    "kbmcp connect --list": "says which desktop clients this machine has installed",
    "kbmcp audit --since 7d --tenant acme": "lists a running HTTP server's calls by a token",
    "kbmcp --db postgresql://kbmcp:secret@coordinator.internal/kbmcp doctor": (
        "needs a Citus cluster: tests/test_citus.py checks the lines it adds"
    ),
}


def test_every_output_example_is_checked() -> None:
    documented = {example.command for example in output_examples(CLI_MD.read_text())}
    assert documented == CHECKED | set(NOT_CHECKED)


def test_the_masks_keep_what_must_match() -> None:
    assert masked("schema: version 12 (latest 12), journal mode wal") == (
        "schema: version 12 (latest 12), journal mode wal"
    )
    assert masked("kb_b4471cfe87001fca  handbook  3 documents, 4 chunks") == (
        "<id> handbook <n> document, <n> chunk"
    )
    assert masked("doc_6a90d8f53e220a5d  ops/backups.md  rev 2") == "<id> op/backup.md rev 2"
    assert mismatch(["schema: version 8 (latest 8)"], ["schema: version 12 (latest 12)"])
    assert mismatch(["a", "...", "d"], ["a", "b", "c", "d"]) is None


@pytest.fixture
def docs_like(
    tmp_path: Path, kbmcp: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """A file shaped like the docs' examples, made as a user makes one: the default model, a
    random id key. (the file, the folder it was added from)"""
    monkeypatch.setenv("KBMCP_EMBEDDER", "minilm")
    monkeypatch.delenv(TEST_KEY_ENV)
    folder = write(
        tmp_path / "handbook",
        {
            "ops/backups.md": "# Backups and restore\n\nBackups run nightly.\n",
            "ops/oncall.md": "# On-call\n\nPages are answered within ten minutes.\n",
            "guides/search.md": "# Searching well\n\nScope first, then search.\n",
        },
    )
    db = tmp_path / "kbmcp.db"
    assert kbmcp("--db", db, "add", folder, "--kb", "handbook").code == 0
    (folder / "ops" / "backups.md").write_text("# Backups and restore\n\nNightly, checked.\n")
    added = kbmcp("--db", db, "add", folder, "--kb", "handbook", "--include", "ops/backups.md",
                  "--tag", "team=ops")  # fmt: skip
    assert added.code == 0, added.err
    return db, folder


def run_example(kbmcp: Callable[..., Run], db: Path | str, command: str) -> list[str]:
    """A documented command run on `db` (its own --db and file arguments replaced); its
    stderr lines (progress), then its stdout lines."""
    words = shlex.split(command)[1:]
    if words[:1] == ["--db"]:
        words = words[2:]
    done = kbmcp("--db", db, *words)
    assert done.code == 0, (command, done.err)
    return [line.strip() for line in (done.err + done.out).splitlines()]


def test_the_outputs_are_the_real_ones(
    docs_like: tuple[Path, Path], kbmcp: Callable[..., Run], fresh_postgres_url: str
) -> None:
    db, _ = docs_like
    examples = {example.command: example for example in output_examples(CLI_MD.read_text())}
    problems = {}

    def check(command: str, real: list[str]) -> None:
        problem = mismatch(examples[command].lines, real)
        if problem:
            problems[command] = problem

    for command in ("kbmcp ls", "kbmcp ls handbook --path ops/ --tag team=ops"):
        check(command, run_example(kbmcp, db, command))
    # The memory store example's block: its commands in order, then the listing.
    assert kbmcp("--db", db, "memory", "store", "create", "ops", "--tag", "team=ops").code == 0
    assert kbmcp("--db", db, "remember", "The on-call phone is in the top drawer",
                 "--store", "ops").code == 0  # fmt: skip
    check("kbmcp memory store list", run_example(kbmcp, db, "kbmcp memory store list"))
    remember = (
        'kbmcp remember "The deploy key rotates on the first Monday of each month" '
        "--tag topic=deploy"
    )
    check(remember, run_example(kbmcp, db, remember))
    check("kbmcp doctor", run_example(kbmcp, db, "kbmcp doctor"))
    copy = "kbmcp copy ~/kb/kbmcp.db postgresql://kbmcp:secret@db.internal:5432/kbmcp"
    copied = kbmcp("copy", db, fresh_postgres_url)
    assert copied.code == 0, copied.err
    check(copy, [line.strip() for line in (copied.err + copied.out).splitlines()])
    postgres = "kbmcp --db postgresql://kbmcp:secret@db.internal/kbmcp doctor"
    check(postgres, run_example(kbmcp, fresh_postgres_url, postgres))
    exported = kbmcp("--db", db, "export", "-o", db.parent / "kb.jsonl")
    assert exported.code == 0, exported.err
    check("kbmcp export > kb.jsonl", exported.err.strip().splitlines())
    restore = "kbmcp --db restored.db import kb.jsonl"
    imported = kbmcp("--db", db.parent / "restored.db", "import", db.parent / "kb.jsonl")
    assert imported.code == 0, imported.err
    check(restore, imported.out.strip().splitlines())  # the summary (progress: on stderr)
    assert not problems, "\n\n".join(f"{c}\n{p}" for c, p in problems.items())

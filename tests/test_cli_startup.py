"""A first run that feels instant: `kbmcp --help`, every command's `--help` and `kbmcp ls` load
no heavy module (the model runtime, numpy, the MCP SDK, pydantic, parsers), and `--help` loads
none of kbmcp's service or store layers either (kbmcp/cli imports them inside the commands), so
they finish in tens of milliseconds. Mostly which modules load is checked, which is
deterministic; one test times `kbmcp --help` in CPU seconds (not wall time, which a loaded
machine stretches), against a bound with room to spare. Each case runs in a fresh interpreter,
as a user's command does."""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
from pathlib import Path

import pytest

from tests import processes
from tests.mcp_support import REPO_ROOT

# Imported by commands that need them (search, add, serve, ...), never to parse arguments, print
# help or list knowledge bases. (pydantic_core, --json's serialiser, is light: ~15 ms.)
HEAVY = (
    "numpy",
    "onnxruntime",
    "tokenizers",
    "mcp",
    "pydantic",
    "anyio",
    "uvicorn",
    "starlette",
    "httpx",
    "yaml",
    "pathspec",
    "selectolax",
    "pypdf",
    "watchfiles",
    "rich",
    "sqlite_vec",
    "sqlite3",
    "multiprocessing",
    "kbmcp.embed.minilm",
    "kbmcp.store.sqlite.search.accelerator",
    "kbmcp.server",
    "kbmcp.ingest.walker",
    # The web page of `serve --http` (kbmcp/web/) and its template engine.
    "kbmcp.web",
    "jinja2",
    "markupsafe",
)

PROBE = """
import json, sys
from kbmcp.cli import main
heavy = json.loads(sys.argv[1])
for args in json.loads(sys.argv[2]):
    try:
        main(args)
    except SystemExit:
        pass
    loaded = [name for name in heavy if name in sys.modules]
    if loaded:
        break
print(json.dumps({"args": args, "loaded": loaded}), file=sys.stderr)
"""


def loaded_heavy_modules(*commands: list[str], db: Path) -> dict[str, object]:
    """Runs `kbmcp ARGS` for each list of arguments, in turn, in one fresh interpreter; stops at
    the first after which a HEAVY module is loaded: {"args": those arguments, "loaded": [...]}."""
    run = processes.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps(commands)],
        env={**os.environ, "KBMCP_DB": str(db)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    *_, last = run.stderr.strip().splitlines()
    return json.loads(last)


@pytest.fixture(scope="module")
def filled_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file with one knowledge base (made with the hashing embedder: no model needed)."""
    root = tmp_path_factory.mktemp("startup")
    (root / "notes").mkdir()
    (root / "notes" / "a.md").write_text("# Keys\n\nRotate the keys every ninety days.\n")
    db = root / "kb.db"
    processes.run(
        [sys.executable, "-m", "kbmcp", "--db", str(db), "add", str(root / "notes"), "--kb", "n"],
        env={**os.environ, "KBMCP_EMBEDDER": "hash"},
        check=True,
        capture_output=True,
        timeout=60,
    )
    return db


def every_help() -> list[list[str]]:
    """`--help` of the group, of every command and of every subcommand of a group command."""
    from kbmcp.cli import cli

    helps = [["--help"]]
    for name, command in sorted(cli.commands.items()):
        helps.append([name, "--help"])
        helps.extend([name, sub, "--help"] for sub in sorted(getattr(command, "commands", {})))
    return helps


@pytest.mark.parametrize(
    "args",
    [[], ["--help"], ["--version"], ["ls"], ["ls", "n"], ["ls", "--json"], ["ls", "n", "--json"]],
    ids=" ".join,
)
def test_help_and_ls_load_no_heavy_module(args: list[str], filled_db: Path) -> None:
    # On failure: import the module named inside the function that needs it (see the top of
    # kbmcp/cli/common.py); `python -X importtime -m kbmcp ARGS` shows which import pulled it in.
    assert loaded_heavy_modules(args, db=filled_db)["loaded"] == []


def test_every_command_help_loads_no_heavy_module(filled_db: Path) -> None:
    helps = every_help()
    assert len(helps) > 20
    assert loaded_heavy_modules(*helps, db=filled_db) == {"args": helps[-1], "loaded": []}


def test_the_probe_sees_heavy_modules(filled_db: Path) -> None:
    """The checks above can fail: a search loads numpy (the hashing embedder's vectors)."""
    result = loaded_heavy_modules(["ls"], ["search", "rotate keys"], ["ls"], db=filled_db)
    assert result["args"] == ["search", "rotate keys"]
    assert "numpy" in result["loaded"]


def test_the_extension_is_found_where_sqlite_vec_says() -> None:
    """kbmcp locates vec0 without importing sqlite_vec (whose __init__ loads numpy)."""
    import sqlite_vec

    from kbmcp.store.sqlite.connection import sqlite_vec_path

    assert sqlite_vec_path() == sqlite_vec.loadable_path()


# What `--help` may load of kbmcp: the command line and the plain values its options show.
HELP_MODULES = {
    "kbmcp",
    "kbmcp.errors",
    "kbmcp.wording",
    "kbmcp.scopes",
    "kbmcp.memory_defaults",
    "kbmcp.search",
    "kbmcp.search.limits",
    "kbmcp.tags",  # the tag pairs of --tag options, and its annotations
    "kbmcp.described",
}
LOADED_BY_HELP = """
import json, sys
from kbmcp.cli import main
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit:
        pass
names = [name for name in sys.modules if name.startswith(("kbmcp", "apsw", "platformdirs"))]
print(json.dumps(sorted(names)), file=sys.stderr)
"""


def test_help_loads_no_service_or_store_module(filled_db: Path) -> None:
    run = processes.run(
        [sys.executable, "-c", LOADED_BY_HELP, json.dumps(every_help())],
        env={**os.environ, "KBMCP_DB": str(filled_db)},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    loaded = json.loads(run.stderr.strip().splitlines()[-1])
    outside = [
        name for name in loaded if name not in HELP_MODULES and not name.startswith("kbmcp.cli")
    ]
    assert outside == []


# Beyond a bare interpreter (`python -c pass`), in CPU seconds (user + system), the median of
# runs with byte code cached (tests/conftest.py gives the suite's children a byte-code cache).
HELP_CPU_BOUND = 0.15
RUNS = 9


def cpu_seconds(command: list[str]) -> float:
    """The median CPU time of `command` over RUNS runs, after one that fills the byte-code
    cache."""
    processes.run(command, capture_output=True, timeout=120)
    times = []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        processes.run(command, capture_output=True, timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(times)


def test_help_takes_little_cpu_beyond_the_interpreter() -> None:
    bare = cpu_seconds([sys.executable, "-c", "pass"])
    helped = cpu_seconds([sys.executable, "-m", "kbmcp", "--help"])
    assert helped - bare < HELP_CPU_BOUND, f"kbmcp --help: {helped:.3f} s, bare {bare:.3f} s"

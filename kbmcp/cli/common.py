"""Helpers shared by the CLI commands: opening the workspace, output, progress.

The CLI imports service and parsing modules inside the commands that use them, not at the top of
its modules: `kbmcp --help` and `kbmcp ls` then load neither numpy, the model runtime, the MCP
SDK, pydantic nor the file parsers, and finish in tens of milliseconds
(tests/test_cli_startup.py checks which modules they load).
"""

from __future__ import annotations

import contextlib
import json
import unicodedata
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kbmcp.errors import InvalidRequest

if TYPE_CHECKING:
    from kbmcp.workspace import Workspace

T = TypeVar("T")


@contextlib.contextmanager
def open_workspace(
    ctx: click.Context, *, create: bool = False, long_lived: bool = False
) -> Iterator[Workspace]:
    """The workspace of the command's --db / KBMCP_DB database: a file, or a PostgreSQL URL
    (every command runs on both; tests/test_cli_postgres.py). Only commands that write documents
    pass create=True: a mistyped path for `ls` or `search` is an error, not a new empty file.
    Only commands that run many queries (`serve`, `eval`) pass long_lived=True (see Workspace)."""
    from kbmcp.config import load_settings  # the store layer: when a command runs, not --help
    from kbmcp.workspace import Workspace

    root = ctx.find_root().obj
    settings = load_settings().with_db(root.get("db")).with_immutable(root.get("immutable", False))
    workspace = Workspace(settings, create=create, long_lived=long_lived)
    try:
        yield workspace
    except BaseException:
        # A new file is complete or absent: a first `add` that failed (a full disk) does not
        # leave the empty knowledge base it created behind.
        workspace.close()
        workspace.store.remove_if_created_and_empty()
        raise
    finally:
        workspace.close()


class Utf8Text(click.ParamType):
    """Text that must be valid UTF-8. Python passes undecodable command-line bytes through as
    lone surrogates, which fail deep inside (the tokenizer: "unexpected TypeError"); here they
    are a usage error naming the argument and the first bad byte."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        problem = utf8_problem(text)
        if problem is not None:
            self.fail(f"is not valid UTF-8 text ({problem}); pass it in UTF-8", param, ctx)
        return text


def utf8_problem(text: str) -> str | None:
    """Where `text` (from the command line) is not valid UTF-8, e.g. "byte 0xe9 at character
    4"; None when it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        try:
            shown = "byte 0x" + bad.encode("utf-8", "surrogateescape")[:1].hex()
        except UnicodeEncodeError:
            shown = f"code point U+{ord(bad[0]):04X}"
        return f"{shown} at character {exc.start + 1}"
    return None


class Utf8Path(click.Path):
    """A `click.Path` whose text must be valid UTF-8: the same usage error as `Utf8Text` (a
    path that is not UTF-8 cannot be stored as a document's source, nor be a --db name)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        problem = utf8_problem(str(value))
        if problem is not None:
            self.fail(f"is not a valid UTF-8 path ({problem}); rename it or pass it in UTF-8",
                      param, ctx)  # fmt: skip
        return super().convert(value, param, ctx)


UTF8_TEXT = Utf8Text()


# Characters that would act on the terminal rather than show (escape sequences, carriage return,
# bidirectional overrides) or break a one-item-per-line listing (line and paragraph separators).
_ACTING_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def printable(text: str) -> str:
    """`text` for one line of a terminal: as it reads, without quotes (unlike repr), but with
    control characters, line separators and bidirectional controls shown escaped (`\\x1b`,
    `\\n`, `\\u202e`), so a document's title or path cannot move the cursor, recolour the
    screen or fake another line."""
    if text.isprintable():
        return text
    return "".join(
        repr(ch)[1:-1]
        if unicodedata.category(ch) in _ACTING_CATEGORIES or ch in _BIDI_CONTROLS
        else ch
        for ch in text
    )


def echo_json(value: Any) -> None:
    """`value` (service results, lists and dicts of them) as indented JSON. pydantic-core
    serialises it (dataclasses by their fields, tuples as lists), as it does the MCP tools'
    results. Imported here: only --json pays for the import (~17 ms)."""
    from pydantic_core import to_jsonable_python

    click.echo(json.dumps(to_jsonable_python(value), ensure_ascii=False, indent=2))


def print_result(result: T, as_json: bool, render: Callable[[T], str | list[str]]) -> None:
    """A service result as JSON (`--json`), or as the line(s) `render` makes of it."""
    if as_json:
        echo_json(result)
        return
    lines = render(result)
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(line)


def pairs_option(values: tuple[str, ...], option: str) -> list[tuple[str, str]]:
    """`--tag` / `--meta` values as pairs; a malformed one is a one-line `InvalidRequest`."""
    if not values:
        return []
    from kbmcp.ingest.parsing import parse_pairs  # loads yaml (front matter)

    try:
        return parse_pairs(values, option=option)
    except ValueError as exc:
        raise InvalidRequest(str(exc), details={"argument": option}) from None

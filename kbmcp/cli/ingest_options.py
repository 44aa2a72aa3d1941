"""The options `add` and `watch` share (--kb, --include, --exclude, --code, --tag, --meta),
defined once and handed to the command as one `IngestOptions`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kbmcp.cli.common import UTF8_TEXT, pairs_option
from kbmcp.errors import InvalidRequest

if TYPE_CHECKING:
    from kbmcp.ingest.walker import Selection

_OPTIONS = (
    click.option(
        "--kb",
        "kb_name",
        default="default",
        show_default=True,
        type=UTF8_TEXT,
        help="Knowledge base name or id (kb_...); a new name creates it.",
    ),
    click.option(
        "--include",
        multiple=True,
        type=UTF8_TEXT,
        metavar="GLOB",
        help="Index only files matching GLOB, whatever their format (gitignore syntax, "
        "relative to the added folder; repeatable).",
    ),
    click.option(
        "--exclude",
        multiple=True,
        type=UTF8_TEXT,
        metavar="GLOB",
        help="Skip files and folders matching GLOB (gitignore syntax; repeatable).",
    ),
    click.option(
        "--code", is_flag=True, help="Also index source code and configuration files (by suffix)."
    ),
    click.option(
        "--tag",
        "tags",
        multiple=True,
        type=UTF8_TEXT,
        metavar="KEY=VALUE",
        help="Tag every added document (repeatable).",
    ),
    click.option(
        "--meta",
        "meta",
        multiple=True,
        type=UTF8_TEXT,
        metavar="KEY=VALUE",
        help="Metadata on every added document (repeatable).",
    ),
)


def ingest_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options to a click command; it receives them as `options: IngestOptions`
    (a malformed --tag/--meta or glob is a one-line error naming the option)."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        kb_name: str,
        include: tuple[str, ...],
        exclude: tuple[str, ...],
        code: bool,
        tags: tuple[str, ...],
        meta: tuple[str, ...],
        **kwargs: Any,
    ) -> Any:
        from kbmcp.service.ingest import IngestOptions  # the ingest pipeline: only when run

        options = IngestOptions(
            knowledge_base=kb_name,
            tags=pairs_option(tags, "--tag"),
            metadata=pairs_option(meta, "--meta"),
            selection=_selection(include, exclude, code),
        )
        return command(*args, options=options, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def _selection(include: tuple[str, ...], exclude: tuple[str, ...], code: bool) -> Selection:
    from kbmcp.ingest.walker import Selection

    try:
        return Selection(include=include, exclude=exclude, code=code)
    except ValueError as exc:
        option = "--include" if str(exc).startswith("--include") else "--exclude"
        raise InvalidRequest(str(exc), details={"argument": option}) from None

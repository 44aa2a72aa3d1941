"""Reading, changing and writing a client's configuration file without losing anything in it.

A JSON file is parsed strictly: one with comments, trailing commas or anything after its object
cannot be written back as it was, so it is refused untouched, with the line and column of the
problem. It is written back with its own indentation; every other key keeps its value and place.
A TOML file (Codex) goes through tomlkit, which keeps comments and layout.

A change is written after a copy of the file (`NAME.TIME.kbmcp.bak` beside it), to a temporary
file in the same folder that then replaces the old one in one step (`os.replace`): a crash
never leaves half a file. Writing what is already there writes nothing.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import tempfile
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kbmcp.connect import json_edit
from kbmcp.connect.clients import Format
from kbmcp.errors import InvalidRequest

_INDENT = re.compile(r"^\{\s*?\n(?P<indent>[ \t]+)\S", re.MULTILINE)


class Unreadable(InvalidRequest):
    """A configuration file kbmcp cannot parse, so will not write."""


@dataclass
class ConfigFile:
    path: Path
    format: Format
    text: str  # as found ("" when the file does not exist)
    data: Any  # dict (JSON) or tomlkit document
    # The changes made through `set`/`remove` (paths of keys), replayed on a JSON file's text.
    edits: list[tuple[str, tuple[str, ...], Any]] = field(default_factory=list)

    def set(self, path: tuple[str, ...], value: Any) -> None:
        """Set the member at `path` (a top-level key, or a key inside one)."""
        holder = self.data if len(path) == 1 else self.servers(path[0], create=True)
        holder[path[-1]] = value
        self.edits.append(("set", path, value))

    def remove(self, path: tuple[str, ...]) -> Any:
        """Remove the member at `path` (a top-level key, or a key inside one); its value."""
        holder = self.data if len(path) == 1 else self.data[path[0]]
        removed = holder.pop(path[-1])
        self.edits.append(("remove", path, None))
        return removed

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def servers(self, key: str, *, create: bool) -> Any:
        """The object holding the servers (made when `create` and missing); None if missing.
        Unreadable if the key holds something else than an object."""
        found = self.data.get(key)
        if found is None:
            if not create:
                return None
            found = _new_table(self.format)
            self.data[key] = found
        if not isinstance(found, MutableMapping):
            raise Unreadable(
                f"{self.path}: '{key}' is not an object; kbmcp connect will not change this "
                "file (fix it by hand)",
                details={"path": str(self.path)},
            )
        return found

    def render(self) -> str:
        """The file's new text, in its own style."""
        if self.format == "toml":
            import tomlkit

            text = tomlkit.dumps(self.data)
            if not self.text.strip():
                text = text.lstrip("\n")
            return text.rstrip("\n") + "\n"
        indent = _indent_of(self.text)
        whole = json.dumps(self.data, indent=indent, ensure_ascii=False) + "\n"
        if not self.text.strip():
            return whole
        text = self.text
        for action, path, value in self.edits:
            if action == "set":
                text = json_edit.set_member(text, path, value, indent)
            else:
                text = json_edit.remove_member(text, path)
        # The edit touched only the members it changed; were it ever wrong, the file is
        # written whole instead (same content, the layout normalised).
        return text if json.loads(text) == self.data else whole


def read(path: Path, format: Format) -> ConfigFile:
    """The file at `path` parsed (an empty one if it does not exist); Unreadable otherwise."""
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as error:
        raise Unreadable(f"{path}: cannot read it ({error})", details={"path": str(path)}) from None
    if not text.strip():
        return ConfigFile(path, format, text, _new_document(format))
    if format == "toml":
        import tomlkit
        from tomlkit.exceptions import ParseError

        try:
            return ConfigFile(path, format, text, tomlkit.parse(text))
        except ParseError as error:
            raise _unreadable(path, f"not valid TOML ({error})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        hint = (
            " (comments or trailing commas?)"
            if error.msg.startswith(("Expecting property name", "Expecting value"))
            else ""
        )
        raise _unreadable(
            path, f"not plain JSON: {error.msg} at line {error.lineno}, column {error.colno}{hint}"
        ) from None
    if not isinstance(data, dict):
        raise _unreadable(path, "its top level is not a JSON object")
    return ConfigFile(path, format, text, data)


def _unreadable(path: Path, problem: str) -> Unreadable:
    return Unreadable(
        f"{path} is {problem}: kbmcp connect only changes files it can read and write back "
        "whole, so it left this one untouched; fix it, or add the entry by hand "
        "(--dry-run shows it)",
        details={"path": str(path)},
    )


def _new_document(format: Format) -> Any:
    if format == "toml":
        import tomlkit

        return tomlkit.document()
    return {}


def _new_table(format: Format) -> Any:
    if format == "toml":
        import tomlkit

        return tomlkit.table(is_super_table=True)
    return {}


def _indent_of(text: str) -> int | str:
    """The file's indentation (2 spaces for a new file)."""
    match = _INDENT.search(text)
    if match is None:
        return 2
    indent = match["indent"]
    return indent if "\t" in indent else len(indent)


def diff(config: ConfigFile, new_text: str) -> str:
    """A unified diff of the change (empty when nothing changes)."""
    return "".join(
        difflib.unified_diff(
            config.text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=str(config.path) if config.exists else "/dev/null",
            tofile=str(config.path),
        )
    )


def write(config: ConfigFile, new_text: str) -> Path | None:
    """Write `new_text` over the file, after a backup of it (returned; None for a new file)."""
    path = config.path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if config.exists:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        backup = path.with_name(f"{path.name}.{stamp}.kbmcp.bak")
        shutil.copy2(path, backup)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(new_text)
        if config.exists:
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return backup

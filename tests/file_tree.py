"""Writing a tree of files for a test: {relative path: text or bytes}."""

from __future__ import annotations

from pathlib import Path


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write `files` under `root` (text as UTF-8 with its line breaks kept); returns `root`."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
    return root

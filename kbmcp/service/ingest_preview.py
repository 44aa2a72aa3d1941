"""`kbmcp add --dry-run`: what `add` would index, and why each other file would not be."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbmcp.ingest.chunker import chunk_document
from kbmcp.ingest.reader import read_source
from kbmcp.ingest.walker import WalkReport, iter_source_files
from kbmcp.service.ingest import IngestOptions, check_paths
from kbmcp.wording import counted

DEFAULT_OPTIONS = IngestOptions()


@dataclass(frozen=True)
class PreviewFile:
    path: str  # relative to the added folder (a file given directly: its name)
    kind: str
    chunks: int


@dataclass
class IngestPreview:
    """What `add` would do with these paths (`kbmcp add --dry-run`): the files it would index
    and every file it would leave out, with the reason."""

    files: list[PreviewFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    errors: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(reason for _, reason in self.skipped).items()))

    def summary_line(self) -> str:
        reasons = ", ".join(f"{reason} {count}" for reason, count in self.counts().items())
        chunks = sum(file.chunks for file in self.files)
        return (
            f"would index {counted(len(self.files), 'file')} ({counted(chunks, 'chunk')}), "
            f"skip {len(self.skipped)}{f' ({reasons})' if reasons else ''}"
        )


def preview_paths(paths: Sequence[Path], options: IngestOptions = DEFAULT_OPTIONS) -> IngestPreview:
    """Walk, read and chunk as `add_paths` would, writing nothing and embedding nothing (no
    database needed): which files would be indexed, and why each other one is not."""
    check_paths(paths)
    walk = WalkReport()
    preview = IngestPreview()
    for source in iter_source_files(list(paths), walk, options.selection):
        extracted = read_source(source)
        if extracted.content is None:
            walk.skip(source.relative_path, extracted.reason or "unreadable")
            continue
        spans = chunk_document(extracted.content, extracted.kind, options.chunking)
        preview.files.append(PreviewFile(source.relative_path, extracted.kind, len(spans)))
    preview.skipped = walk.skipped_paths
    preview.errors = walk.errors
    return preview

"""Progress that tells the truth (issue 19, item 6, the service's part): `add_paths` reports
files, bytes and chunks, and the file being embedded, so a display can measure progress and ETA
in bytes and show the current file; one large file moves the numbers while it embeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.service.ingest import add_paths
from kbmcp.service.ingest_progress import IngestProgress
from kbmcp.workspace import Workspace
from tests.file_tree import write_tree


def long_text(sections: int) -> str:
    line = " ".join(f"heron wades through reed bed {n}" for n in range(30))
    return "\n".join(f"## Part {n}\n\n{line}\n\n{line.upper()}\n" for n in range(sections))


@pytest.mark.parametrize("write_batch_chunks", [1000, 40], ids=["one write", "in parts"])
def test_bytes_move_while_one_large_file_embeds(tmp_path: Path, write_batch_chunks: int) -> None:
    root = write_tree(
        tmp_path / "docs",
        {"a.md": "# A\n\nA small note.\n", "big.md": long_text(80), "z.md": "# Z\n\nLast one.\n"},
    )
    events: list[IngestProgress] = []
    settings = Settings(
        db=tmp_path / "kb.db", embedder="hash", write_batch_chunks=write_batch_chunks
    )
    with Workspace(settings, embedder=HashingEmbedder()) as workspace:
        report = add_paths(
            workspace, workspace.local_principal(), [root], on_progress=events.append
        )
    total = sum(path.stat().st_size for path in root.iterdir())
    assert events[-1] == IngestProgress(3, 3, total, total, report.chunks_embedded)
    assert all(e.files_total == 3 and e.bytes_total == total for e in events)
    done = [e.bytes_done for e in events]
    assert done == sorted(done)  # never goes back
    big = [
        e
        for e in events
        if e.current_file == str(root / "big.md") and e.current_action == "embedding"
    ]
    # while big.md embeds, its chunks and the bytes move, not only the file count
    assert len({e.current_chunks_done for e in big}) > 3
    assert big[0].current_chunks_total == big[-1].current_chunks_total > 100
    inside = [e.bytes_done for e in big if 0 < e.current_chunks_done < e.current_chunks_total]
    assert len(set(inside)) > 3
    assert all(e.files_done <= 1 for e in big)  # a.md only: big.md is not done yet

"""Watch benchmark: edit-to-searchable time beside many PDFs and HTML pages, and the cost of an
unchanged re-add of that folder (issue 19, item 1).

Builds a folder of --pdfs PDF files (several pages of text each), --pages HTML pages shaped like
Sphinx output (navigation, sidebar, headings with permalinks, code blocks) and --notes Markdown
notes, indexes it with the hashing embedder (the model is not what is measured), then:

- times `add_paths` of the unchanged folder (--readds times; target under 1 s);
- starts `watch_paths` on the folder and, --edits times, rewrites one Markdown note with a new
  word and times until a keyword search finds it (target under 1 s).

Prints medians and the individual runs. Run from the repository root:

    python bench/watch.py                       # 100 PDFs, 300 pages, 50 notes
    python bench/watch.py --pdfs 20 --pages 50  # quick

To compare with another checkout's code, put it first on the path:
`PYTHONPATH=/path/to/other/checkout python bench/watch.py` (the fixture comes from this one).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO_ROOT))  # tests.pdf_fixture; kbmcp comes first from wherever it is

from kbmcp.config import Settings  # noqa: E402
from kbmcp.embed.hashing import HashingEmbedder  # noqa: E402
from kbmcp.search.models import SearchRequest  # noqa: E402
from kbmcp.service.ingest import IngestOptions, IngestReport, add_paths  # noqa: E402
from kbmcp.service.search import search  # noqa: E402
from kbmcp.service.watch import watch_paths  # noqa: E402
from kbmcp.workspace import Workspace  # noqa: E402
from tests.pdf_fixture import write_pdf  # noqa: E402

_WORD_TEXT = (
    "the of and to in is that for it as was with be by on not this are or from at which "
    "index search query vector chunk document revision embedding model file database table "
    "column row schema migration transaction agent server client request token knowledge base "
    "heron egret bittern stork crane ibis spoonbill pelican cormorant grebe plover sandpiper"
)
WORDS = _WORD_TEXT.split()

SPHINX_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title} &#8212; Docs</title></head>
<body>
<div class="related" role="navigation"><ul><li><a href="index.html">Docs</a> &#187;</li></ul></div>
<div class="document"><div class="documentwrapper"><div class="body" role="main">
<section id="s{n}"><h1>{title}<a class="headerlink" href="#s{n}">¶</a></h1>
{sections}
</section></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Navigation</h3><ul><li>Index</li></ul></div>
</div><div class="footer">&#169; Copyright.</div></body></html>
"""


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def build_folder(root: Path, pdfs: int, pages: int, notes: int) -> None:
    rng = random.Random(7)
    (root / "papers").mkdir(parents=True)
    (root / "library").mkdir()
    (root / "notes").mkdir()
    for i in range(pdfs):
        content = [[words(rng, 12) for _ in range(40)] for _ in range(6)]
        write_pdf(root / "papers" / f"paper{i:03}.pdf", content, title=f"Paper {i}")
    for i in range(pages):
        sections = "\n".join(
            f'<section id="p{i}-{j}"><h2>Part {j}<a class="headerlink" href="#p{i}-{j}">¶</a>'
            f"</h2><p>{words(rng, 120)}</p><pre><code>{words(rng, 10)}</code></pre></section>"
            for j in range(8)
        )
        page = SPHINX_PAGE.format(title=f"Module {i}", n=i, sections=sections)
        (root / "library" / f"module{i:03}.html").write_text(page, encoding="utf-8")
    for i in range(notes):
        (root / "notes" / f"note{i:03}.md").write_text(f"# Note {i}\n\n{words(rng, 80)}\n")
    an_hour_ago = time.time_ns() - 3600 * 10**9  # as files that were not written just now
    for path in root.rglob("*"):
        os.utime(path, ns=(an_hour_ago, an_hour_ago))


def found(workspace: Workspace, word: str) -> bool:
    request = SearchRequest(word, mode="lexical", limit=1)
    return bool(search(workspace, workspace.local_principal(), request).results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdfs", type=int, default=100)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--notes", type=int, default=50)
    parser.add_argument("--readds", type=int, default=5)
    parser.add_argument("--edits", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "docs"
        build_folder(root, args.pdfs, args.pages, args.notes)
        settings = Settings(db=Path(tmp) / "kb.db", embedder="hash")
        with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as workspace:
            principal = workspace.local_principal()
            options = IngestOptions(knowledge_base="bench")
            started = time.perf_counter()
            first = add_paths(workspace, principal, [root], options)
            print(f"first add: {first.summary_line()} ({time.perf_counter() - started:.2f} s)")

            readds = []
            for _ in range(args.readds):
                started = time.perf_counter()
                again = add_paths(workspace, principal, [root], options)
                readds.append(time.perf_counter() - started)
                assert again.unchanged == first.added, again.summary_line()
            print(
                f"unchanged re-add of {first.added} files: median {statistics.median(readds):.3f} s"
                f" (runs: {', '.join(f'{s:.3f}' for s in readds)})"
            )

            reports: list[IngestReport] = []
            stop = threading.Event()
            watcher = threading.Thread(
                target=watch_paths,
                args=(workspace, principal, [root], options),
                kwargs={"on_report": reports.append, "stop": stop},
                daemon=True,
            )
            watcher.start()
            while not reports:  # the first (full) sync
                time.sleep(0.05)
            latencies = []
            for edit in range(args.edits):
                word = f"zanzibar{edit}x"
                note = root / "notes" / f"note{edit % args.notes:03}.md"
                started = time.perf_counter()
                note.write_text(f"# Note {edit}\n\nThe {word} heron waits.\n")
                while not found(workspace, word):
                    if time.perf_counter() - started > 120:
                        raise SystemExit(f"edit {edit} not searchable within 120 s")
                    time.sleep(0.01)
                latencies.append(time.perf_counter() - started)
                time.sleep(0.3)
            stop.set()
            watcher.join(timeout=30)
            print(
                f"edit-to-searchable beside {args.pdfs} PDFs and {args.pages} pages: median "
                f"{statistics.median(latencies):.3f} s, max {max(latencies):.3f} s "
                f"(runs: {', '.join(f'{s:.2f}' for s in latencies)})"
            )


if __name__ == "__main__":
    main()

"""Can a tenant tell from its search times what another holds? `python bench/timing_oracle.py`

A server's workspace (accelerators, as `kbmcp serve`) over one file with two tenants: `small`
reads one knowledge base of --own-chunks chunks, `big` owns --foreign-chunks chunks, each of
which contains every one of the --trials "present" words. The small tenant searches (lexical
and hybrid) and times each search, two experiments of --trials pairs each:

- presence: a present word (in every foreign chunk, never in its own) against an absent word;
- recency: a present word the big tenant searched just before, against one it did not (it
  searched another word before that one).

Every word is searched once (its first use is what the attack measures). A threshold classifier
is fitted on the first half of the pairs (the midpoint of the two kinds' medians) and scored on
the second half: 0.5 is chance. The file is built in --db (default: a temporary folder).
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

from kbmcp.config import Settings
from kbmcp.embed.hashing import HashingEmbedder
from kbmcp.search.models import SearchRequest
from kbmcp.service.ingest import DocumentInput, add_documents
from kbmcp.service.search import search
from kbmcp.service.tenants import act_as_tenant, create_tenant
from kbmcp.workspace import Workspace

FILLER_TEXT = (
    "the service keeps a copy of each record and answers requests from the nearest node "
    "while the operator rotates keys and checks the backups every week"
)
FILLER = FILLER_TEXT.split()


def word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(9))


def build(db: Path, own: int, foreign: int, present: list[str], rng: random.Random) -> None:
    with Workspace(Settings(db=db, embedder="hash"), embedder=HashingEmbedder(), create=True) as ws:
        admin = ws.local_principal()
        for tenant in ("small", "big"):
            create_tenant(ws, admin, tenant)
        small, big = act_as_tenant(ws, admin, "small"), act_as_tenant(ws, admin, "big")
        mine = [
            DocumentInput(f"own/{n}.md", " ".join(rng.choices(FILLER, k=60)) + "\n")
            for n in range(own)
        ]
        add_documents(ws, small, "own", mine)
        theirs = [
            DocumentInput(f"theirs/{n}.md", " ".join(rng.choices(FILLER, k=60) + present) + "\n")
            for n in range(foreign)
        ]
        for start in range(0, len(theirs), 1000):
            add_documents(ws, big, "theirs", theirs[start : start + 1000])


def timed(ws: Workspace, principal: object, query: str, mode: str) -> float:
    started = time.perf_counter()
    search(ws, principal, SearchRequest(query=query, mode=mode))  # type: ignore[arg-type]
    return (time.perf_counter() - started) * 1000


def accuracy(pairs: list[tuple[float, float]]) -> float:
    """A threshold fitted on the first half (midpoint of medians), scored on the second: the
    share of times classified right (the 'slow' kind is whichever median was larger)."""
    half = len(pairs) // 2
    fit, test = pairs[:half], pairs[half:]
    a = statistics.median(p[0] for p in fit)
    b = statistics.median(p[1] for p in fit)
    threshold = (a + b) / 2
    a_slow = a > b
    right = 0
    for first, second in test:
        right += (first > threshold) == a_slow
        right += (second > threshold) != a_slow
    return right / (2 * len(test))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--own-chunks", type=int, default=1)
    parser.add_argument("--foreign-chunks", type=int, default=4800)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--modes", default="lexical,hybrid")
    args = parser.parse_args()
    rng = random.Random(7)
    modes = args.modes.split(",")
    # Per mode and experiment, distinct words: every search is a word's first use.
    present = {
        (mode, kind): [word(rng) for _ in range(args.trials)]
        for mode in modes
        for kind in ("presence", "searched", "unsearched", "decoy")
    }
    absent = {mode: [word(rng) for _ in range(args.trials)] for mode in modes}
    every_present = [w for words in present.values() for w in words]
    folder = Path(tempfile.mkdtemp(prefix="kbmcp-oracle-")) if args.db is None else None
    db = args.db or folder / "oracle.db"  # type: ignore[operator]
    if not db.exists():
        print(f"building {db}: {args.own_chunks} own chunks, {args.foreign_chunks} foreign")
        build(db, args.own_chunks, args.foreign_chunks, every_present, rng)
    settings = Settings(db=db, embedder="hash")
    with Workspace(settings, embedder=HashingEmbedder(), long_lived=True) as ws:
        admin = ws.local_principal()
        small, big = act_as_tenant(ws, admin, "small"), act_as_tenant(ws, admin, "big")
        for _ in range(20):  # warm: model, readable sets, statements
            timed(ws, small, word(rng), "hybrid")
            timed(ws, small, "record", "lexical")
        for mode in modes:
            presence = [
                (timed(ws, small, p, mode), timed(ws, small, a, mode))
                for p, a in zip(present[mode, "presence"], absent[mode], strict=True)
            ]
            recency = []
            decoys = iter(present[mode, "decoy"])
            for seen, unseen in zip(
                present[mode, "searched"], present[mode, "unsearched"], strict=True
            ):
                # Each timed search follows one of the other tenant's: the only difference
                # between the two is whether it searched the same word.
                timed(ws, big, seen, mode)
                after_same = timed(ws, small, seen, mode)
                timed(ws, big, next(decoys), mode)
                recency.append((after_same, timed(ws, small, unseen, mode)))
            for name, pairs, labels in (
                ("presence", presence, ("present", "absent")),
                ("recency", recency, ("searched by the other", "not searched")),
            ):
                first = statistics.median(p[0] for p in pairs)
                second = statistics.median(p[1] for p in pairs)
                print(
                    f"{mode:8} {name:9} {labels[0]} {first:7.2f} ms  {labels[1]} {second:7.2f} ms"
                    f"  classifier accuracy {accuracy(pairs):.2f} (chance 0.50)"
                )


if __name__ == "__main__":
    main()

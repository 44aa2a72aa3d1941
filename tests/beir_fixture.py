"""A small BEIR-format dataset written by the tests, built so that lexical ranking is predictable.

Six queries. Queries 1-4 share rare words only with their relevant documents, which therefore rank
first (q1's grade-2 document repeats the words more than its grade-1 document, so the ranking is
ideal). Query 5 shares no word with its relevant document (lexical finds nothing). Query 6's one
word appears in a short non-relevant document far more densely than in the long relevant one, so
the relevant document ranks second. Document d05 is long enough to be cut into several chunks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

FILLER_TOPICS = (
    "bread baking", "river fishing", "garden roses", "city buses", "mountain hiking",
    "tax forms", "piano lessons", "coffee roasting", "dog training", "cloud storage",
    "school lunches", "bicycle repair", "wool knitting", "ocean sailing", "chess openings",
    "tea ceremonies", "desert camping", "office chairs", "winter tyres", "folk music",
    "paper recycling", "museum tours",
)  # fmt: skip

RELEVANT_DOCS: dict[str, tuple[str, str]] = {
    "d01": ("Zorblat crystal luminescence", "Zorblat crystal luminescence: zorblat crystals glow."),
    "d02": ("Notes from the field", "A survey of minerals found one zorblat among many stones."),
    "d03": ("Velmorian harbor tides", "The velmorian harbor has unusual tides every season."),
    "d04": ("Quintessor enzyme kinetics", "Quintessor enzyme kinetics follow a simple rate law."),
    "d05": ("Draxil bird migration", " ".join(["Draxil flocks fly north in spring."] * 80)),
    "d06": ("Synonyms elsewhere", "Rotating small gadgets by hand is tiring work."),
    "d07": ("Astronomy primer", "Among distant objects a quasar is very bright. " + "x " * 10),
    "d08": ("Quasar", "Quasar quasar quasar."),
}

QUERIES: dict[str, str] = {
    "q1": "zorblat crystal luminescence",
    "q2": "velmorian harbor tides",
    "q3": "quintessor enzyme kinetics",
    "q4": "draxil migration",
    "q5": "frobnicate widgets",
    "q6": "quasar",
}

QRELS: list[tuple[str, str, int]] = [
    ("q1", "d01", 2),
    ("q1", "d02", 1),
    ("q2", "d03", 1),
    ("q3", "d04", 2),
    ("q4", "d05", 1),
    ("q5", "d06", 1),
    ("q6", "d07", 1),
    ("q6", "d08", 0),  # judged non-relevant
]

# Expected lexical metrics, by hand: q1-q4 rank their relevant documents ideally (nDCG 1, MRR 1,
# recall 1); q5 finds nothing (all 0); q6 ranks its one relevant document second:
# nDCG = (1/log2(3)) / 1 = 0.63093, MRR = 1/2, recall 1.
EXPECTED_LEXICAL = {
    "ndcg@10": (4 + 1 / math.log2(3)) / 6,
    "recall@10": 5 / 6,
    "recall@100": 5 / 6,
    "mrr@10": (4 + 0.5) / 6,
}


def corpus() -> list[dict[str, str]]:
    docs = [
        {"_id": key, "title": title, "text": text} for key, (title, text) in RELEVANT_DOCS.items()
    ]
    for index, topic in enumerate(FILLER_TOPICS, start=9):
        text = f"A short guide to {topic}. It covers the basics of {topic} for beginners."
        docs.append({"_id": f"d{index:02d}", "title": topic.title(), "text": text})
    return docs


def write_fixture(folder: Path) -> Path:
    """Write corpus.jsonl, queries.jsonl and qrels.tsv (30 documents) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc in corpus():
            handle.write(json.dumps(doc) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query_id, text in QUERIES.items():
            handle.write(json.dumps({"_id": query_id, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in QRELS]
    (folder / "qrels.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder

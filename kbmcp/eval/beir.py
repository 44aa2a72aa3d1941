"""Load a BEIR-format dataset directory (corpus.jsonl, queries.jsonl, qrels).

Layout::

    <dir>/corpus.jsonl     {"_id": ..., "title": ..., "text": ..., "metadata": {...}} per line
    <dir>/queries.jsonl    {"_id": ..., "text": ...} per line
    <dir>/qrels.tsv        or <dir>/qrels/test.tsv; header "query-id<TAB>corpus-id<TAB>score"

Instead of corpus.jsonl, a dataset about real files has ``<dir>/corpus.paths``: the files and
folders to ingest as ``kbmcp add`` would, one path per line (relative to ``<dir>``; blank lines
and ``#`` comments ignored). Its corpus ids are the files' paths relative to the deepest folder
that holds every listed path (``docs/search.md`` for ``../docs`` and ``../README.md``), so the
judgements name files, not chunks, and survive edits of those files.

Files are read line by line. Every problem raises a one-line ``ValueError`` naming the file
(and the line number when there is one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QRELS_CANDIDATES: tuple[str, ...] = ("qrels.tsv", "qrels/test.tsv")
CORPUS_JSONL = "corpus.jsonl"
CORPUS_PATHS = "corpus.paths"


@dataclass(frozen=True)
class BeirDocument:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirQuery:
    id: str
    text: str


@dataclass(frozen=True)
class CorpusFiles:
    """A corpus of real files (corpus.paths): what to ingest, and where its ids are rooted."""

    paths: list[Path]  # absolute, as listed
    root: Path  # the deepest folder holding every listed path; corpus ids are relative to it

    def corpus_id(self, source: str) -> str | None:
        """The corpus id of an ingested file (its absolute source path); None outside root."""
        file = Path(source)
        return file.relative_to(self.root).as_posix() if file.is_relative_to(self.root) else None


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: list[BeirDocument]  # empty when the corpus is files (``files``)
    queries: list[BeirQuery]  # only queries with at least one qrel of score > 0
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade (for the kept queries)
    files: CorpusFiles | None = None


def load_beir(path: Path) -> BeirDataset:
    """Load the BEIR dataset in directory ``path``; its name is the directory name."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory")
    qrels = _read_qrels(_find_qrels(path))
    files = _read_corpus_paths(path / CORPUS_PATHS) if (path / CORPUS_PATHS).exists() else None
    if files is not None and (path / CORPUS_JSONL).exists():
        raise ValueError(f"{path}: both {CORPUS_JSONL} and {CORPUS_PATHS}; keep one")
    corpus = [] if files is not None else list(_read_corpus(path / CORPUS_JSONL))
    queries = [q for q in _read_queries(path / "queries.jsonl") if _has_relevant(qrels.get(q.id))]
    kept_qrels = {q.id: qrels[q.id] for q in queries}
    return BeirDataset(
        name=path.name, corpus=corpus, queries=queries, qrels=kept_qrels, files=files
    )


def _read_corpus_paths(file: Path) -> CorpusFiles:
    """The paths listed in corpus.paths; each must exist."""
    paths: list[Path] = []
    for lineno, line in _open_lines(file):
        if line.startswith("#"):
            continue
        listed = (file.parent / line).resolve()
        if not listed.exists():
            raise ValueError(f"{file}:{lineno}: {line!r} does not exist")
        paths.append(listed)
    if not paths:
        raise ValueError(f"{file}: lists no paths")
    folders = [p if p.is_dir() else p.parent for p in paths]
    return CorpusFiles(paths=paths, root=Path(os.path.commonpath(folders)))


def _has_relevant(judgements: dict[str, int] | None) -> bool:
    return judgements is not None and any(grade > 0 for grade in judgements.values())


def _find_qrels(path: Path) -> Path:
    for candidate in QRELS_CANDIDATES:
        if (path / candidate).is_file():
            return path / candidate
    raise ValueError(f"{path}: no qrels file (looked for {' or '.join(QRELS_CANDIDATES)})")


def _open_lines(file: Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, stripped line) for the non-blank lines of ``file``."""
    if not file.is_file():
        raise ValueError(f"{file}: file not found")
    with file.open(encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            line = raw.strip()
            if line:
                yield lineno, line


def _read_json_objects(file: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in _open_lines(file):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}:{lineno}: malformed JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{file}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def _id_field(obj: dict[str, Any], file: Path, lineno: int) -> str:
    value = obj.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{file}:{lineno}: missing or invalid field '_id'")
    text = str(value)
    if not text:
        raise ValueError(f"{file}:{lineno}: empty '_id'")
    return text


def _str_field(
    obj: dict[str, Any], key: str, file: Path, lineno: int, *, required: bool = True
) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{file}:{lineno}: missing or non-string field '{key}'")
    return value


def _check_unique(seen: set[str], item_id: str, file: Path, lineno: int) -> None:
    if item_id in seen:
        raise ValueError(f"{file}:{lineno}: duplicate _id {item_id!r}")
    seen.add(item_id)


def _read_corpus(file: Path) -> Iterator[BeirDocument]:
    """Documents of corpus.jsonl; ``title`` may be absent or null (read as "")."""
    seen: set[str] = set()
    for lineno, obj in _read_json_objects(file):
        doc_id = _id_field(obj, file, lineno)
        _check_unique(seen, doc_id, file, lineno)
        title = _str_field(obj, "title", file, lineno, required=False)
        text = _str_field(obj, "text", file, lineno)
        yield BeirDocument(id=doc_id, title=title, text=text)


def _read_queries(file: Path) -> Iterator[BeirQuery]:
    seen: set[str] = set()
    for lineno, obj in _read_json_objects(file):
        query_id = _id_field(obj, file, lineno)
        _check_unique(seen, query_id, file, lineno)
        yield BeirQuery(id=query_id, text=_str_field(obj, "text", file, lineno))


def _parse_grade(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _read_qrels(file: Path) -> dict[str, dict[str, int]]:
    """Parse a qrels TSV; the first line is skipped when it is the header."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in _open_lines(file):
        fields = [field.strip() for field in line.split("\t")]
        if lineno == 1 and fields[:1] == ["query-id"]:
            continue
        if len(fields) != 3 or not fields[0] or not fields[1]:
            raise ValueError(
                f"{file}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score', got {line!r}"
            )
        grade = _parse_grade(fields[2])
        if grade is None:
            raise ValueError(f"{file}:{lineno}: score {fields[2]!r} is not an integer")
        qrels.setdefault(fields[0], {})[fields[1]] = grade
    return qrels

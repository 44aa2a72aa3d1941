"""`kbmcp doctor` as lines a person reads: the report's sections in words, never a Python repr.

The report (kbmcp/service/admin.py `doctor`, also printed as is by `doctor --json`) is a dict
of values and nested dicts. Known sections get a sentence each; a section added later still
prints, as `label: key value, ...`, so nothing in the report is hidden from the text form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kbmcp.wording import counted

# The order of `counts` in the contents line, with the noun each number counts.
COUNTED = (
    ("knowledge_bases", "knowledge base"),
    ("documents", "document"),
    ("archived_documents", "archived document"),
    ("memory_stores", "memory store"),
    ("memories", "memory"),
    ("forgotten_memories", "forgotten memory"),
    ("revisions", "revision"),
    ("indexed_chunks", "indexed chunk"),
)
# Keys the sentences below consume.
SHOWN = frozenset(
    {
        "kbmcp",
        "python",
        "platform",
        "sqlite",
        "apsw",
        "sqlite_vec",
        "postgresql",
        "pgvector",
        "psycopg",
        "mcp",
        "db_path",
        "schema_version",
        "schema_latest",
        "journal_mode",
        "hnsw_index",
        "citus",
        "recorded_model",
        "configured_embedder",
        "counts",
        "id_key",
        "model",
        "warnings",  # printed on stderr by the command
    }
)


def doctor_lines(report: Mapping[str, Any]) -> list[str]:
    lines = [
        f"kbmcp {report['kbmcp']} on Python {report['python']} ({report['platform']})",
        *_database_lines(report),
        *_model_lines(report["model"], report.get("recorded_model"), _holder(report)),
        f"embedder setting: {report['configured_embedder']} (KBMCP_EMBEDDER)",
        "contents: " + contents(report["counts"]),
        _id_key_line(report.get("id_key"), _holder(report)),
    ]
    for key, value in report.items():
        if key not in SHOWN:
            lines.append(f"{_label(key)}: {_words(value)}")
    return lines


def _database_lines(report: Mapping[str, Any]) -> list[str]:
    """The software, the database and its schema: an SQLite file's, or a PostgreSQL server's
    (the report has `postgresql` where a file's has `sqlite`)."""
    schema = f"schema: version {report['schema_version']} (latest {report['schema_latest']})"
    if "postgresql" in report:
        index = "present" if report["hnsw_index"] else "absent (searches scan exactly)"
        return [
            f"libraries: PostgreSQL {report['postgresql']}, pgvector {report['pgvector']}, "
            f"psycopg {report['psycopg']}, mcp {report['mcp']}",
            f"database: {report['db_path']}",
            f"{schema}, HNSW vector index {index}",
            *_citus_lines(report.get("citus")),
        ]
    return [
        f"libraries: SQLite {report['sqlite']}, apsw {report['apsw']}, "
        f"sqlite-vec {report['sqlite_vec']}, mcp {report['mcp']}",
        f"database: {report['db_path']}",
        f"{schema}, journal mode {report['journal_mode']}",
    ]


def _citus_lines(citus: Mapping[str, Any] | None) -> list[str]:
    """A Citus coordinator's nodes, one line each, with the stores and chunks its shards hold."""
    if citus is None:
        return []
    nodes = citus["nodes"]
    lines = [
        f"Citus {citus['version']} on {counted(len(nodes), 'node')} (tables distributed by store)"
    ]
    for node in nodes:
        lines.append(
            f"  {node['role']} {node['node']}: {counted(node['stores'], 'store')}, "
            f"{counted(node['chunks'], 'chunk')}"
        )
    return lines


def _holder(report: Mapping[str, Any]) -> str:
    return "the database" if "postgresql" in report else "the file"


def _model_lines(
    model: Mapping[str, Any], recorded: Mapping[str, Any] | None, holder: str
) -> list[str]:
    fingerprint = model.get("fingerprint")
    if model["ok"]:
        where = (
            f"{holder} has no vectors yet"
            if recorded is None
            else f"{holder}'s vectors were made with it"
        )
        return [
            f"model: ok: {_fingerprint(fingerprint)}, loaded in {model['load_seconds']:.2f} s; "
            + where
        ]
    lines = [f"model: NOT OK: {model.get('error', 'unusable')}"]
    if fingerprint is not None:
        lines.append(
            f"  configured: {_fingerprint(fingerprint)}; recorded in {holder}: "
            + ("none" if recorded is None else _fingerprint(recorded))
        )
    return lines


def _fingerprint(fingerprint: Mapping[str, Any]) -> str:
    return (
        f"{fingerprint['name']} (dimension {fingerprint['dimension']}, "
        f"version {fingerprint['version']})"
    )


def _id_key_line(id_key: Mapping[str, Any] | None, holder: str) -> str:
    """How the ids are made, in words: keyed (nobody can compute an id from a name without
    the key) or not, by whose key, since when, and what to do about a weakness."""
    if id_key is None:
        return f"ids: {holder} has no id key yet (it gets one at its first write)"
    since = str(id_key["created_at"])[:10]
    if id_key["origin"] == "pinned":
        key = "a key pinned for tests (KBMCP_TEST_ID_KEY)"
    else:
        key = f"{holder}'s own random key"
    line = f"ids: keyed with {key}, since {since}"
    notes = list(id_key.get("notes") or [])
    if not notes:
        return f"{line}: an id reveals nothing about a name or content"
    return f"{line}; " + "; ".join(notes)


def contents(counts: Mapping[str, int]) -> str:
    """The counts in words, doctor's order: `1 knowledge base, 3 documents, ...` (`kbmcp copy`
    says what it copied in the same words)."""
    known = [counted(counts[key], noun) for key, noun in COUNTED if key in counts]
    others = [f"{_label(key)} {value}" for key, value in counts.items() if key not in dict(COUNTED)]
    return ", ".join(known + others)


def _label(key: str) -> str:
    return key.replace("_", " ")


def _words(value: Any) -> str:
    """A report value in words: `origin random, notes none`, `yes`, `a, b`."""
    if isinstance(value, Mapping):
        return ", ".join(f"{_label(str(key))} {_words(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_words(item) for item in value) if value else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    return str(value)

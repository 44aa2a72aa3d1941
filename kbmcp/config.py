"""Settings from the environment and the command line: the only configuration kbmcp has.

Precedence for the database: `--db`, then `KBMCP_DB`, then a file in the platform's user data dir.
Either names a file (kept as a `Path`) or a PostgreSQL database by URL (`postgresql://...`, kept
as the string: `Path()` would turn `postgresql://host/db` into the relative path
`postgresql:/host/db`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import platformdirs

from kbmcp.errors import InvalidRequest, StoreError
from kbmcp.search.limits import MAX_RRF_K
from kbmcp.store.postgres.url import is_postgres_url, shown_url

DEFAULT_EMBEDDER = "minilm"
EMBEDDER_NAMES = ("minilm", "hash")
DEFAULT_RRF_K = 60
# Memories' recency half-life in days (0: no decay); a request's recency_half_life_days wins.
DEFAULT_RECENCY_HALF_LIFE_DAYS = 0.0
# The most chunks one ingest write transaction writes (docs/ingest.md): a document with more is
# written in parts of this size and made current at the end. ~0.2 s of writing on two cores.
DEFAULT_WRITE_BATCH_CHUNKS = 1000
# How long the audit trail keeps its rows (docs/operations.md, "Audit trail"); 0 keeps them all.
DEFAULT_AUDIT_RETENTION_DAYS = 90


@dataclass(frozen=True)
class Settings:
    # The knowledge base: a file path, or a PostgreSQL URL (a str; see `is_postgres`).
    db: Path | str
    embedder: str = DEFAULT_EMBEDDER
    rrf_k: int = DEFAULT_RRF_K
    recency_half_life_days: float = DEFAULT_RECENCY_HALF_LIFE_DAYS
    # The file is frozen: read it without locking (`--immutable` / KBMCP_IMMUTABLE=1;
    # docs/operations.md, read-only files).
    immutable: bool = False
    write_batch_chunks: int = DEFAULT_WRITE_BATCH_CHUNKS
    # The audit trail: record each search's query text (off: queries can be sensitive, only
    # their number per token is kept), and the days its rows are kept (0: forever).
    audit_queries: bool = False
    audit_retention_days: int = DEFAULT_AUDIT_RETENTION_DAYS

    def with_db(self, db: Path | str | None) -> Settings:
        return self if db is None else replace(self, db=database(db))

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self.db)

    @property
    def db_path(self) -> Path:
        """The knowledge-base file, for what only a file has (backup, file modes, WAL); a
        StoreError for a PostgreSQL database."""
        if isinstance(self.db, Path):
            return self.db
        raise StoreError(
            f"{self.shown_db} is a PostgreSQL database, not a file: this needs a knowledge-base "
            "file (`kbmcp copy URL FILE` makes one)",
            details={"db": self.shown_db},
        )

    @property
    def shown_db(self) -> str:
        """The database as messages show it: the path, or the URL without its password."""
        return shown_url(self.db) if isinstance(self.db, str) else str(self.db)

    def with_immutable(self, immutable: bool) -> Settings:
        """`--immutable` turns it on; without the flag KBMCP_IMMUTABLE decides."""
        return replace(self, immutable=True) if immutable else self


def database(db: Path | str) -> Path | str:
    """A `--db` / KBMCP_DB value as Settings keep it: a URL as given (stripped), a path expanded."""
    if is_postgres_url(db):
        return str(db).strip()
    return Path(db).expanduser()


def default_db_path() -> Path:
    return Path(platformdirs.user_data_dir("kbmcp", appauthor=False)) / "kbmcp.db"


def load_settings(environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    db = env.get("KBMCP_DB")
    embedder = env.get("KBMCP_EMBEDDER", DEFAULT_EMBEDDER).strip().lower()
    if embedder not in EMBEDDER_NAMES:
        raise InvalidRequest(
            f"KBMCP_EMBEDDER={embedder!r} is not known; use one of: {', '.join(EMBEDDER_NAMES)}"
        )
    rrf_text = env.get("KBMCP_RRF_K", str(DEFAULT_RRF_K))
    try:
        rrf_k = int(rrf_text)
    except ValueError:
        raise InvalidRequest(f"KBMCP_RRF_K={rrf_text!r} is not an integer") from None
    if not 1 <= rrf_k <= MAX_RRF_K:
        raise InvalidRequest(f"KBMCP_RRF_K must be an integer from 1 to {MAX_RRF_K}, got {rrf_k}")
    return Settings(
        db=database(db) if db else default_db_path(),
        embedder=embedder,
        rrf_k=rrf_k,
        recency_half_life_days=_half_life(env),
        immutable=_flag(env, "KBMCP_IMMUTABLE"),
        write_batch_chunks=_write_batch_chunks(env),
        audit_queries=_flag(env, "KBMCP_AUDIT_QUERIES"),
        audit_retention_days=_retention_days(env),
    )


def _flag(env: os._Environ[str] | dict[str, str], name: str) -> bool:
    text = env.get(name, "").strip().lower()
    if text in ("", "0", "false", "no", "off"):
        return False
    if text in ("1", "true", "yes", "on"):
        return True
    raise InvalidRequest(f"{name}={text!r} must be 1 or 0 (true or false)")


def _write_batch_chunks(env: os._Environ[str] | dict[str, str]) -> int:
    text = env.get("KBMCP_WRITE_BATCH_CHUNKS", "").strip()
    if not text:
        return DEFAULT_WRITE_BATCH_CHUNKS
    try:
        chunks = int(text)
    except ValueError:
        chunks = 0
    if chunks < 1:
        raise InvalidRequest(f"KBMCP_WRITE_BATCH_CHUNKS={text!r} must be a whole number >= 1")
    return chunks


def _half_life(env: os._Environ[str] | dict[str, str]) -> float:
    text = env.get("KBMCP_RECENCY_HALF_LIFE_DAYS", "").strip()
    if not text:
        return DEFAULT_RECENCY_HALF_LIFE_DAYS
    try:
        days = float(text)
    except ValueError:
        days = -1.0
    if not (math.isfinite(days) and days >= 0):
        raise InvalidRequest(
            f"KBMCP_RECENCY_HALF_LIFE_DAYS={text!r} must be a number of days >= 0 (0: no decay)"
        )
    return days


N = TypeVar("N", int, float)


def number_from_env(
    name: str,
    default: N,
    parse: Callable[[str], N],
    accept: Callable[[N], bool],
    requirement: str,
    environ: Mapping[str, str] | None = None,
) -> N:
    """A numeric setting: the environment variable `name`, parsed and accepted, or `default`
    when it is unset or empty; an InvalidRequest naming it and the `requirement` otherwise."""
    env = os.environ if environ is None else environ
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value: N | None = parse(text)
    except ValueError:
        value = None
    if value is None or not accept(value):
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        raise InvalidRequest(
            f"{name}={text!r} must be {requirement} (default {shown})", details={"argument": name}
        )
    return value


def seconds_from_env(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """A duration setting in seconds (> 0); see number_from_env."""
    return number_from_env(
        name,
        default,
        float,
        lambda seconds: math.isfinite(seconds) and seconds > 0,
        "a number of seconds > 0",
        environ,
    )


def _retention_days(env: Mapping[str, str]) -> int:
    return number_from_env(
        "KBMCP_AUDIT_RETENTION_DAYS",
        DEFAULT_AUDIT_RETENTION_DAYS,
        int,
        lambda days: days >= 0,
        "a whole number of days >= 0 (0: keep the audit trail forever)",
        env,
    )

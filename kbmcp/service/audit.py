"""The audit trail: who wrote what and when, who was refused, how many searches each token ran.

What is recorded (docs/operations.md, "Audit trail"), one row per event in the database
(kbmcp/store/audit.py):
- every write, whatever its outcome: `kbmcp add`, `remember`, `forget`, `kb share` / `unshare`,
  `token create` / `revoke`, `tenant create`, `kb create`, `copy`, `import`, from the CLI or
  an MCP tool;
- every refused request: an HTTP request whose bearer token is unusable (401, `unauthorized`),
  a tool call without the scope it needs (`forbidden`), an id the caller cannot read
  (`resource_unavailable`: a foreign id and a missing one look the same to the caller; the
  trail records the ids, so the operator can tell);
- searches, counted per token and flushed at most every FLUSH_SECONDS: identical events are
  folded into one row with a `count`, so a busy server writes a row per token and minute, not
  one per search. The query text is recorded only when KBMCP_AUDIT_QUERIES=1 (queries can be
  sensitive).
A row holds the acting tenant and token (its public id: never a secret), the tool or command,
the public ids involved and the outcome (`ok` or the error's code).

Recording never fails the request it describes: a trail that cannot be written (a read-only
database, a full disk) is logged on stderr and the request's own answer stands. A server writes
its trail from a background thread (`AuditTrail`): a write or a refusal wakes it at once, a
search waits for the next flush, so a search never waits for the audit. Rows older than the
retention (KBMCP_AUDIT_RETENTION_DAYS, 90 by default; 0 keeps them) are deleted as the trail
is written, at most hourly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kbmcp.access import ADMIN, Principal
from kbmcp.clock import format_timestamp, parse_timestamp, system_now, system_now_iso
from kbmcp.errors import InvalidRequest, KbError
from kbmcp.ids import looks_like_id
from kbmcp.store.audit import AuditRow, NewAuditEvent
from kbmcp.workspace import Workspace

logger = logging.getLogger(__name__)

VIA_CLI = "cli"
VIA_STDIO = "stdio"
VIA_HTTP = "http"
OK = "ok"
UNAUTHORIZED = "unauthorized"  # an HTTP request refused for its bearer token (401)
# The refusals recorded for every tool (writes are recorded whatever their outcome).
REFUSALS = frozenset({"forbidden", "resource_unavailable", UNAUTHORIZED})
# Searches are written at most this often (refusals and writes at once).
FLUSH_SECONDS = 60.0
PRUNE_EVERY_SECONDS = 3600.0
# Ids kept per event (a fetch names up to 50 chunks): the first ones, and how many there were.
MAX_OBJECTS = 20
# Events held while the database cannot take them (then the oldest are dropped, and logged).
MAX_PENDING = 10_000
DEFAULT_LIMIT = 100
MAX_LIMIT = 100_000
_RELATIVE = re.compile(r"^(?P<amount>\d+)\s*(?P<unit>[smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class AuditEntry:
    """One row of the trail as `kbmcp audit` shows it."""

    at: str
    tenant: str | None  # the tenant's name; None when no tenant was known (a refused token)
    token_id: str | None  # None: the local operator
    via: str
    action: str
    outcome: str
    objects: list[str]
    detail: dict[str, Any]
    count: int


@dataclass
class AuditNote:
    """What a write found out while it ran: the ids it touched, figures worth keeping."""

    objects: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def ids_in(values: Iterable[Any]) -> list[str]:
    """The public ids among `values` (strings, or lists of them), in order, without repeats."""
    found: list[str] = []
    for value in values:
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, str) and looks_like_id(item) and item not in found:
                found.append(item)
    return found


class AuditTrail:
    """A process's trail: events are held in memory, folded, and written in one transaction
    by `flush` (the background thread of a server, or at once with `background=False`)."""

    def __init__(
        self,
        workspace: Workspace,
        via: str,
        *,
        background: bool = True,
        flush_seconds: float = FLUSH_SECONDS,
    ) -> None:
        self._workspace = workspace
        self.via = via  # cli | stdio | http
        self._background = background
        self._flush_seconds = flush_seconds
        self.record_queries = workspace.settings.audit_queries
        self._retention_days = workspace.settings.audit_retention_days
        self._pending: dict[tuple[Any, ...], NewAuditEvent] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pruned_at: float | None = None  # (monotonic) never yet in this process
        self._disabled = False
        self._flush_lock = threading.Lock()
        workspace.before_close(self.close)

    # ------------------------------------------------------------ recording

    def record(
        self,
        principal: Principal | None,
        action: str,
        outcome: str = OK,
        objects: Iterable[str] = (),
        detail: Mapping[str, Any] | None = None,
        *,
        token_id: str | None = None,
        tenant_id: int | None = None,
        urgent: bool = True,
    ) -> None:
        """Hold an event (a write, a refusal: `urgent`, written at once by the background
        thread; a search: at the next flush). Without a principal, `tenant_id` and `token_id`
        say who (a refused token: the tenant of the token it names, if any)."""
        if self._disabled:
            return
        ids = list(objects)
        details = dict(detail or {})
        if len(ids) > MAX_OBJECTS:
            details["objects_total"] = len(ids)
            ids = ids[:MAX_OBJECTS]
        if principal is not None:
            tenant_id, token_id = principal.tenant_id, principal.token_id
        event = NewAuditEvent(
            tenant_id=tenant_id or 0,
            at=system_now_iso(),
            token_id=token_id,
            via=self.via,
            action=action,
            outcome=outcome,
            objects=json.dumps(ids, ensure_ascii=False),
            detail=json.dumps(details, ensure_ascii=False, sort_keys=True),
        )
        key = (event.tenant_id, event.token_id, action, outcome, event.objects, event.detail)
        with self._lock:
            held = self._pending.get(key)
            if held is not None:
                self._pending[key] = dataclasses.replace(held, count=held.count + 1)
            else:
                if len(self._pending) >= MAX_PENDING:
                    dropped = next(iter(self._pending))
                    del self._pending[dropped]
                    logger.warning("audit trail: too many events waiting, the oldest dropped")
                self._pending[key] = event
        if not self._background:
            self.flush()
            return
        self._ensure_thread()
        if urgent:
            self._wake.set()

    def count_search(self, principal: Principal | None, query: str | None) -> None:
        """One search of `principal` (its query text kept only when the operator opted in)."""
        detail = {"query": query} if self.record_queries and query is not None else None
        self.record(principal, "search_knowledge", detail=detail, urgent=False)

    @contextlib.contextmanager
    def write(
        self, principal: Principal, action: str, objects: Iterable[str] = ()
    ) -> Iterator[AuditNote]:
        """Record the write the block makes, with its outcome: `ok`, or the code of the error
        it raised (then re-raised). The block adds the ids it touched to the note."""
        note = AuditNote(objects=ids_in(objects))
        try:
            yield note
        except KbError as error:
            self.record(principal, action, error.code, ids_in(note.objects), note.detail)
            raise
        except Exception as error:
            note.detail.setdefault("error", type(error).__name__)
            self.record(principal, action, "internal_error", ids_in(note.objects), note.detail)
            raise
        self.record(principal, action, OK, ids_in(note.objects), note.detail)

    # ------------------------------------------------------------ writing

    def flush(self) -> None:
        """Write every held event (one transaction); prune old rows when due."""
        with self._flush_lock:
            with self._lock:
                events, self._pending = list(self._pending.values()), {}
            if not events or self._disabled:
                return
            workspace = self._workspace
            store = workspace.store
            try:
                conn = workspace.conn
                if store.is_read_only(conn):
                    self._disabled = True
                    # (info: a read-only file is already said to be one; on the CLI a refused
                    # write is one error line, nothing more)
                    logger.info("audit trail: %s is read-only, nothing is recorded", store.shown)
                    return
                with workspace.lock, store.write_transaction(conn):
                    store.audit.append(conn, events)
                    self._prune(conn)
            except Exception as error:  # never fail the request the events describe
                if not self._background:
                    # A command: its own line says what failed (a full disk, a read-only
                    # file); one line of error is all a command prints, and it is ending.
                    logger.info("audit trail: %d events not recorded (%s)", len(events), error)
                    return
                logger.warning(
                    "audit trail: %d events not recorded yet (%s: %s)",
                    len(events),
                    type(error).__name__,
                    error,
                )
                with self._lock:  # kept for the next flush, before anything newer
                    held = {self._key(e): e for e in events}
                    held.update(self._pending)
                    self._pending = dict(list(held.items())[-MAX_PENDING:])

    @staticmethod
    def _key(event: NewAuditEvent) -> tuple[Any, ...]:
        return (
            event.tenant_id,
            event.token_id,
            event.action,
            event.outcome,
            event.objects,
            event.detail,
            event.at,  # (not folded with newer ones: they were written apart)
        )

    def _prune(self, conn: Any) -> None:
        if self._retention_days <= 0:
            return
        if self._pruned_at is not None and time.monotonic() - self._pruned_at < PRUNE_EVERY_SECONDS:
            return
        before = format_timestamp(system_now() - timedelta(days=self._retention_days))
        self._workspace.store.audit.prune(conn, before)
        self._pruned_at = time.monotonic()

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="kbmcp-audit", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._flush_seconds)
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the background thread and write what is held (before the workspace closes)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
        self.flush()


def command_trail(workspace: Workspace) -> AuditTrail:
    """The trail of a CLI command: each event written as it is recorded."""
    return AuditTrail(workspace, VIA_CLI, background=False)


# ------------------------------------------------------------------ reading


def read_trail(
    workspace: Workspace,
    principal: Principal,
    *,
    since: str | None = None,
    token_id: str | None = None,
    tenant: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[AuditEntry]:
    """The newest `limit` events at or after `since` (ISO 8601, or an age such as 30m, 24h,
    7d), of one token or tenant, oldest first. The local operator's alone (ADMIN)."""
    from kbmcp.service.tenants import tenant_named

    principal.require(ADMIN)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(
            f"limit must be from 1 to {MAX_LIMIT}, got {limit}", details={"argument": "limit"}
        )
    tenant_id = None if tenant is None else tenant_named(workspace, tenant, "tenant").id
    rows = workspace.store.audit.events(
        workspace.conn,
        since=None if since is None else parse_since(since),
        token_id=None if token_id is None else token_id.strip(),
        tenant_id=tenant_id,
        limit=limit,
    )
    return [_entry(row) for row in rows]


def parse_since(text: str) -> str:
    """`--since` as an ISO 8601 UTC timestamp: a date, a date-time, or an age (90s, 30m, 24h,
    7d, 2w) counted back from now."""
    value = text.strip()
    relative = _RELATIVE.match(value)
    try:
        if relative:
            seconds = int(relative["amount"]) * _UNIT_SECONDS[relative["unit"]]
            return format_timestamp(system_now() - timedelta(seconds=seconds))
        return format_timestamp(parse_timestamp(value))
    except (ValueError, OverflowError):
        raise InvalidRequest(
            f"since: {text!r} is neither an ISO 8601 date or date-time nor an age such as "
            "30m, 24h or 7d",
            details={"argument": "since", "value": text},
        ) from None


def _entry(row: AuditRow) -> AuditEntry:
    return AuditEntry(
        at=row.at,
        tenant=row.tenant,
        token_id=row.token_id,
        via=row.via,
        action=row.action,
        outcome=row.outcome,
        objects=list(json.loads(row.objects)),
        detail=dict(json.loads(row.detail)),
        count=row.count,
    )

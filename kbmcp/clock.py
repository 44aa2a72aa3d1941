"""The one place that reads the time.

`KBMCP_NOW` (ISO 8601) pins `now()`: the timestamps kbmcp records and the clocks of memory decay
and scan windows, for reproducible snapshots and demos. It never applies to tokens: creating,
listing, counting and checking tokens read `system_now()`, the machine's clock, so a pinned (or
mistakenly set) clock can neither keep an expired token alive nor expire a valid one.
Timestamps are stored as ISO 8601 UTC text with a `Z` suffix so that they sort and compare as
strings.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime


def now() -> datetime:
    pinned = os.environ.get("KBMCP_NOW")
    if pinned:
        return parse_timestamp(pinned)
    return datetime.now(UTC)


def now_iso() -> str:
    return format_timestamp(now())


def system_now() -> datetime:
    """The machine's clock, never pinned: for access decisions (token expiry)."""
    return datetime.now(UTC)


def system_now_iso() -> str:
    return format_timestamp(system_now())


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(text: str) -> datetime:
    """Parse ISO 8601 (date or date-time, `Z` or offset); naive values are taken as UTC."""
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)

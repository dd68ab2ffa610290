"""Times as people write and read them: an RFC 3339 time with its zone in (a CLI's
``--at``, a simulation script's ``at``), UTC ISO 8601 with ``Z`` out (messages, a
script's events). One home for both: the CLI and the simulation parsed them apart."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_rfc3339(text: str, alternative: str = "") -> float:
    """`2026-01-01T09:00:00Z` (any zone) in epoch seconds; ValueError saying what a
    time looks like (and `alternative`, e.g. " or +2h", where another form is taken)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a time like 2026-01-01T09:00:00Z{alternative}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (end it with Z)")
    return parsed.timestamp()


def show_time(t: float) -> str:
    """UTC, ISO 8601, `Z`, milliseconds only when there are some (seconds beyond
    datetime's range as a number of seconds)."""
    try:
        whole = datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return f"{t:g} s"
    return whole.replace(".000+00:00", "Z").replace("+00:00", "Z")

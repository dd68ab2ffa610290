"""A fault that repeats on every background flush is logged once, then at most once a
minute with how often it failed meanwhile, and once when it is gone."""

from __future__ import annotations

import logging

import pytest
from memlineage.engine.fault_log import FaultLog

LOG = logging.getLogger("memlineage.test.faults")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    out = [(r.levelno, r.getMessage()) for r in caplog.records]
    caplog.clear()
    return out


def test_a_repeated_fault_is_said_once_a_minute_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    faults = FaultLog(LOG, repeat=60.0, clock=clock)
    with caplog.at_level(logging.INFO, LOG.name):
        faults.cleared("ns", "ns is fine")  # never failed: nothing to say
        assert lines(caplog) == []
        faults.failed("ns", "damaged key k", "3 items of ns dropped: damaged key k")
        assert lines(caplog) == [(logging.ERROR, "3 items of ns dropped: damaged key k")]
        for _ in range(5):  # every flush for the next minute: silent
            clock.now += 10.0
            faults.failed("ns", "damaged key k", "4 items of ns dropped: damaged key k")
        assert lines(caplog) == []
        clock.now += 10.1  # a minute after the first line
        faults.failed("ns", "damaged key k", "2 items of ns dropped: damaged key k")
        assert lines(caplog) == [
            (
                logging.ERROR,
                "2 items of ns dropped: damaged key k (failed 5 more times since the last report)",
            )
        ]
        faults.failed("other", "damaged key j", "other: damaged key j")  # another key: at once
        faults.failed("ns", "damaged key m", "ns: damaged key m")  # another cause: at once
        assert lines(caplog) == [
            (logging.ERROR, "other: damaged key j"),
            (logging.ERROR, "ns: damaged key m"),
        ]
        faults.cleared("ns", "ns is written again")
        faults.cleared("ns", "ns is written again")  # said once
        assert lines(caplog) == [(logging.INFO, "ns is written again")]
        faults.failed("ns", "damaged key m", "ns: damaged key m")  # back: a new fault
        assert lines(caplog) == [(logging.ERROR, "ns: damaged key m")]

"""Named source lists compare ids in every spelling of case and separators (none
of them counts); inline lists and `matches` compare exactly."""

from __future__ import annotations

from memlineage_dsl.facts import Creator
from memlineage_dsl.matchers import SourceMatcher, source_spelling


def test_a_source_list_matches_every_spelling_of_a_listed_id_or_glob() -> None:
    """`tool:WEB_SEARCH`, `tool:Web-Search` escaped `tool:web_*` (an outside audit): a
    runtime names a tool as the tool names itself."""
    listed = SourceMatcher(("tool:web_*", "tool:email_reader", "agent:Quarantined.Bot"))
    for spelled in (
        "tool:web_search",
        "tool:WEB_SEARCH",
        "tool:Web-Search",
        "TOOL:web.search",
        "tool:Email-Reader",
        "tool:EMAIL.READER",
        "agent:quarantined_bot",
    ):
        assert listed.match(spelled), spelled
        assert listed.match(spelled), spelled  # and from its remembered answer
    assert listed.match(Creator("tool", "tool:Email-Reader"))
    for other in ("tool:email_readers", "tool:flight_api", "user:web_x", "tool:we"):
        assert not listed.match(other), other
    assert listed.match("tool:webs")  # `web_*` is `web*` now: wider, on purpose
    assert source_spelling("tool:A-b.C_d/e f") == "tool:abcdef"


def test_run_together_doubled_and_slashed_spellings_are_on_the_list_too() -> None:
    """Only `-` and `.` were folded at first: `tool:WebSearch`, `tool:web/search` and
    `tool:web__search` escaped `tool:web_search` (a review)."""
    listed = SourceMatcher(("tool:web_search",))
    for spelled in ("tool:WebSearch", "tool:web/search", "tool:web__search", "tool:web search"):
        assert listed.match(spelled), spelled
    assert not listed.match("tool:web_searches")


def test_a_glob_class_keeps_its_ranges() -> None:
    """Folding `-` to `_` turned `[0-9]` into `[0_9]`: a blocked `tool:scraper_v[0-9]`
    no longer matched `tool:scraper_v5` (a review: fail-open)."""
    blocked = SourceMatcher(("tool:scraper_v[0-9]", "tool:x[A-C]", "tool:y[-_]z", "tool:q[!_]"))
    for hit in ("tool:scraper_v5", "tool:Scraper-V0", "tool:xb", "tool:XC", "tool:y_z", "tool:yz"):
        assert blocked.match(hit), hit
    for miss in ("tool:scraper_vx", "tool:xd", "tool:y", "tool:q"):
        assert not blocked.match(miss), miss
    assert blocked.match("tool:qa")


def test_the_kind_keeps_its_separators_so_no_other_kind_passes_for_a_listed_one() -> None:
    """Folding separators in the kind too made an agent's `to-ol:flight_api` (a prefix
    naming no kind, so the store took it) pass for the trusted `tool:flight_api`."""
    trusted = SourceMatcher(("tool:flight_api",))
    assert trusted.match("TOOL:Flight-API")
    for other in ("to-ol:flight_api", "t.ool:flight_api", "agent:flight_api"):
        assert not trusted.match(other), other

"""Named source lists compare ids in every spelling of case and separators; inline
lists and `matches` compare exactly."""

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
    for other in ("tool:webs", "tool:email_readers", "tool:flight_api", "user:web_x"):
        assert not listed.match(other), other
    assert source_spelling("tool:A-b.C_d") == "tool:a_b_c_d"

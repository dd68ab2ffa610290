"""Credibility priors compare source ids as a policy's source lists do: case-folded,
separators not counted, the kind keeping its own."""

from __future__ import annotations

from dataclasses import replace

from memlineage.scoring.config import ScoringConfig


def test_a_prior_is_found_in_every_spelling_of_a_listed_source() -> None:
    """`tool:Web-Search` took `tool:*`'s prior (0.8), not the low one configured for
    `tool:web_*`, while a policy's source list already had it as `tool:web_search`."""
    cfg = replace(
        ScoringConfig(),
        credibility_priors=(("tool:web_*", 0.2), ("tool:*", 0.8), ("*", 0.5)),
    )
    for spelled in ("tool:web_search", "tool:Web-Search", "TOOL:WebSearch", "tool:web/search"):
        assert cfg.prior(spelled) == 0.2, spelled
    assert cfg.prior("tool:flight_api") == 0.8
    assert cfg.prior("to-ol:web_search") == 0.5  # no kind's id: only `*`

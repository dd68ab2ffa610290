"""Fixtures the adapter tests share: a sidecar per test file on the bundled policies
(a file that needs another one defines its own `sidecar`), a client of it (`ml`, of
the sidecar's default namespace), and Mem0's offline embedder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memlineage.client import MemLineageClient
from support.sidecar import RunningSidecar


@pytest.fixture(scope="module")
def sidecar() -> Iterator[RunningSidecar]:
    with RunningSidecar() as s:
        yield s


@pytest.fixture
def ml(sidecar: RunningSidecar) -> Iterator[MemLineageClient]:
    with MemLineageClient(sidecar.address, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def embedder_url() -> Iterator[str]:
    from support.mem0_offline import embedder  # mem0's tests only: it sets mem0's home

    with embedder() as url:
        yield url

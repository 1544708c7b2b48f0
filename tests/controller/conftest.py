"""Fixtures shared by the controller's unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.controller.fake_apiserver import FakeCluster, fake_cluster


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    """An in-process API server over real HTTP, with the controller's real client on it."""
    async for c in fake_cluster():
        yield c

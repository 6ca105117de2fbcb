"""The circuit breaker around a state store (``ctxmgmt.store.circuit``).

Outages of real servers (a stopped or frozen PostgreSQL, a locked SQLite file) are in
``tests/integration/test_store_faults.py``; here a store that fails on demand stands in.
"""

from __future__ import annotations

import asyncio
import copy
import time

import pytest

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.store.base import CorruptRecordError, StaleStateError, StoreError
from ctxmgmt.store.circuit import CircuitStore, StoreSlowError, StoreTimeoutError, StoreUnavailableError
from ctxmgmt.store.memory import InMemoryStore
from tests.unit.store.contract import CONFIG, entries, round_trip


class Flaky(InMemoryStore):
    """An in-process store that raises ``error`` on every call while it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.error: BaseException | None = None
        self.delay = 0.0
        self.calls = 0

    def load(self, key, *, turns=None):
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return super().load(key, turns=turns)

    def delete(self, key):
        if self.error is not None:
            raise self.error
        super().delete(key)


def wait_until(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def flaky():
    inner = Flaky()
    store = CircuitStore(inner, first_retry=0.01, max_retry=0.02)
    yield inner, store
    store.close()


def test_the_store_contract_through_a_closed_circuit() -> None:
    store = CircuitStore(InMemoryStore())
    round_trip(store)
    assert store.available
    store.close()


def test_an_outage_fails_one_call_then_skips_the_store_until_it_answers(flaky) -> None:
    inner, store = flaky
    inner.error = OSError("connection refused")
    with pytest.raises(StoreError, match="OSError"):
        store.load("k")
    assert not store.available
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        store.load("k")  # fails at once, without calling the store
    assert time.monotonic() - started < 0.5
    inner.error = None
    assert wait_until(lambda: store.available)
    assert store.load("k") is None


@pytest.mark.parametrize("error", [StaleStateError("lost"), CorruptRecordError("bad row")])
def test_errors_of_the_data_keep_the_circuit_closed(flaky, error) -> None:
    inner, store = flaky
    inner.error = error
    with pytest.raises(type(error)):
        store.load("k")
    assert store.available


def test_a_deletion_during_an_outage_is_replayed_when_the_store_returns(flaky) -> None:
    inner, store = flaky
    InMemoryStore.append(inner, "k", entries(0, 1), expected_version=0, strategy="s", config=CONFIG)
    inner.error = OSError("down")
    with pytest.raises(StoreError):
        store.load("other")
    store.delete("k")  # no error: kept for later
    inner.error = None
    assert wait_until(lambda: store.available)
    assert InMemoryStore.load(inner, "k") is None


def test_a_call_past_its_deadline_is_abandoned_and_opens_the_circuit() -> None:
    inner = Flaky()
    inner.delay = 0.5
    store = CircuitStore(inner, deadline=0.05, first_retry=0.01, max_retry=0.02)
    started = time.monotonic()
    with pytest.raises(StoreTimeoutError):
        store.load("k")
    assert time.monotonic() - started < 0.45 and not store.available
    inner.delay = 0.0
    assert wait_until(lambda: store.available)
    store.close()


def test_slow_calls_in_a_row_open_the_circuit() -> None:
    inner = Flaky()
    inner.delay = 0.03
    store = CircuitStore(inner, deadline=None, slow_call=0.01, slow_calls=2, first_retry=10)
    store.load("k")
    assert store.available
    store.load("k")
    assert not store.available
    with pytest.raises(StoreUnavailableError, match=StoreSlowError.__name__):
        store.load("k")
    store.close()


def test_a_factory_that_fails_starts_the_circuit_open_and_is_retried() -> None:
    attempts: list[int] = []

    def factory():
        attempts.append(1)
        if len(attempts) < 3:
            raise StoreError("server down")
        return InMemoryStore()

    store = CircuitStore(factory=factory, first_retry=0.01, max_retry=0.02)
    assert store.inner is None and not store.available
    assert wait_until(lambda: store.available)
    assert isinstance(store.inner, InMemoryStore) and len(attempts) == 3
    store.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"deadline": 0}, {"slow_call": float("inf")}, {"slow_calls": -1}, {"slow_calls": True}],
)
def test_bad_settings_are_configuration_errors(kwargs) -> None:
    with pytest.raises(ConfigurationError):
        CircuitStore(InMemoryStore(), **kwargs)


def test_a_circuit_needs_a_store_or_a_factory() -> None:
    with pytest.raises(ConfigurationError, match="one of them"):
        CircuitStore()
    with pytest.raises(ConfigurationError, match="one of them"):
        CircuitStore(InMemoryStore(), factory=InMemoryStore)


def test_a_copy_is_a_new_closed_circuit_with_the_same_settings() -> None:
    store = CircuitStore(InMemoryStore(), deadline=2.0, slow_calls=5)
    twin = copy.deepcopy(store)
    assert twin is not store and twin.available
    assert (twin.deadline, twin.slow_calls) == (2.0, 5)
    assert repr(twin).endswith(", closed)")
    store.close()
    twin.close()


def test_a_closed_circuit_store_refuses_calls_after_close() -> None:
    inner = Flaky()
    store = CircuitStore(inner, first_retry=10)
    inner.error = OSError("down")
    with pytest.raises(StoreError):
        store.load("k")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.load("k")


class AsyncClosed(InMemoryStore):
    """An in-process store with an ``aclose`` (as PostgreSQL's), recording which close ran."""

    def __init__(self) -> None:
        super().__init__()
        self.how: list[str] = []

    def close(self) -> None:
        self.how.append("close")

    async def aclose(self) -> None:
        self.how.append("aclose")


def test_aclose_stops_retrying_and_awaits_the_wrapped_stores_aclose() -> None:
    inner = AsyncClosed()
    store = CircuitStore(inner)
    asyncio.run(store.aclose())
    assert inner.how == ["aclose"]


def test_aclose_closes_a_wrapped_store_without_aclose_on_a_store_thread() -> None:
    inner = Flaky()
    store = CircuitStore(inner, first_retry=10)
    inner.error = OSError("down")
    with pytest.raises(StoreError):
        store.load("k")  # the retry thread starts
    asyncio.run(store.aclose())
    assert store._retrier is None or not store._retrier.is_alive()
    with pytest.raises(StoreError, match="closed"):
        store.load("k")

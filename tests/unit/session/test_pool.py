"""Pool: live conversations by the framework's id, their store keys, eviction and copies."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from ctxmgmt import ConfigurationError, KadaneDialStrategy
from ctxmgmt.messages.types import Message
from ctxmgmt.session.codec import Codec
from ctxmgmt.session.pool import DEFAULT_SESSION, Pool
from ctxmgmt.store.base import StateStore
from ctxmgmt.store.memory import InMemoryStore
from ctxmgmt.strategies.base import Strategy

CODEC: Codec[str] = Codec(
    to_core=lambda t: Message("user", t), snapshot=None, memory_message=lambda m: m.text
)


class Opened:
    """A stand-in conversation: what a pool needs (store, strategy, close)."""

    def __init__(self, key: str, strategy: Strategy, store: StateStore | None) -> None:
        self.key, self.strategy, self.store = key, strategy, store
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Stand(Pool[Opened, str]):
    def open(self, key: str, strategy: Strategy, store: StateStore | None) -> Opened:
        return Opened(key, strategy, store)


def pool(hashing_embedder: Any, **kwargs: Any) -> Stand:
    return Stand(lambda: KadaneDialStrategy(embedder=hashing_embedder), CODEC, surface="memory", **kwargs)


def test_keys_are_strategy_surface_name_and_id_each_escaped(hashing_embedder) -> None:
    named = pool(hashing_embedder, name="facts:v2")
    assert named.get("alice").key == "kadanedial:memory:facts%3Av2:alice"
    assert pool(hashing_embedder).get(None).key == f"kadanedial:memory:{DEFAULT_SESSION}"


def test_the_same_id_gives_the_same_conversation_and_the_oldest_is_closed_first(hashing_embedder) -> None:
    p = pool(hashing_embedder, max_conversations=2)
    a, b = p.get("a"), p.get("b")
    assert p.get("a") is a  # a is now the most recent
    c = p.get("c")
    assert b.closed and not a.closed and not c.closed
    assert "b" not in p and len(p) == 2
    assert p.most_recent() is c and p.conversations() == [a, c]


def test_a_store_given_per_call_is_used_only_without_one_of_its_own(hashing_embedder) -> None:
    own, other = InMemoryStore(), InMemoryStore()
    assert pool(hashing_embedder).get("x", store=other).store is other
    assert pool(hashing_embedder, store=own).get("x", store=other).store is own
    p = pool(hashing_embedder)
    first = p.get("x", store=other)
    second = p.get("x", store=own)  # another store: a new conversation, the old one closed
    assert second is not first and first.closed


def test_drop_and_discard(hashing_embedder) -> None:
    p = pool(hashing_embedder)
    a, b = p.get("a"), p.get("b")
    p.drop(lambda c: c is a)
    assert "a" not in p and not a.closed  # dropped, not closed
    p.discard("b")
    assert "b" not in p and b.closed
    p.discard("never")  # nothing to do


def test_llm_calls_sum_the_live_strategies(hashing_embedder) -> None:
    p = pool(hashing_embedder)
    p.get("a"), p.get("b")
    assert p.llm_calls == 0


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_max_conversations_must_be_a_positive_int(hashing_embedder, bad: Any) -> None:
    with pytest.raises(ConfigurationError):
        pool(hashing_embedder, max_conversations=bad)


def test_a_deep_copy_copies_the_conversations_and_shares_the_store(hashing_embedder) -> None:
    store = InMemoryStore()
    p = pool(hashing_embedder, store=store)
    a = p.get("a")
    clone = copy.deepcopy(p)
    assert clone.store is store
    assert clone.get("a") is not a and clone.get("a").key == a.key
    clone.renew_locks()  # a forked child's: the mapping still works
    assert clone.get("a").key == a.key


class Closable(InMemoryStore):
    """An in-process store that counts its ``close()`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.closes = 0

    def close(self) -> None:
        self.closes += 1


@pytest.mark.parametrize("owns", [True, False])
def test_close_lets_every_conversation_go_and_closes_only_a_store_it_opened(hashing_embedder, owns) -> None:
    store = Closable()
    p = pool(hashing_embedder, store=store, owns_store=owns)
    a, b = p.get("a"), p.get("b")
    p.close()
    p.close()  # idempotent: the store is closed once
    assert a.closed and b.closed and len(p) == 0
    assert store.closes == (1 if owns else 0)
    with pytest.raises(ConfigurationError, match="closed"):
        p.get("a")


class AsyncClosable(Closable):
    """A store with an ``aclose`` (as PostgreSQL's), counting its calls apart from ``close``."""

    def __init__(self) -> None:
        super().__init__()
        self.acloses = 0

    async def aclose(self) -> None:
        self.acloses += 1


@pytest.mark.parametrize("owns", [True, False])
@pytest.mark.parametrize("kind", [Closable, AsyncClosable])
def test_aclose_lets_every_conversation_go_and_awaits_an_owned_store(hashing_embedder, owns, kind) -> None:
    store = kind()
    p = pool(hashing_embedder, store=store, owns_store=owns)
    a = p.get("a")

    async def close_twice() -> None:
        await p.aclose()
        await p.aclose()

    asyncio.run(close_twice())
    assert a.closed and len(p) == 0
    closes = (store.closes, getattr(store, "acloses", 0))
    assert closes == ((0, 0) if not owns else (1, 0) if kind is Closable else (0, 1))
    with pytest.raises(ConfigurationError, match="closed"):
        p.get("a")

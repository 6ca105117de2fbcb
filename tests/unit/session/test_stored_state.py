"""Per-session state on real stores: restart, erasure, alternation, bounds, faults.

Every memory kind runs against an in-process store and a real SQLite file; PostgreSQL runs
the same checks in ``tests/integration/test_sessions_postgres.py``.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from ctxmgmt import (
    ACMStrategy,
    DiscourseTreeStrategy,
    KadaneDialStrategy,
    Message,
    SWinStrategy,
    TopicThreadStrategy,
)
from ctxmgmt.app.testing import FakeLLM, HashingEmbedder, StatePool
from ctxmgmt.components.summarizer import LLMSummarizer
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Turn, chain_hashes
from ctxmgmt.store import InMemoryStore, SQLiteStore, StoreError
from ctxmgmt.store.base import TurnEntry
from ctxmgmt.strategies import acm, swin, topic_thread

PIN = "PIN 4417-2290"


def conversation(n: int = 30, *, secret_at: int | None = None) -> list[Turn]:
    messages: list[Message] = []
    for i in range(n):
        text = f"Turn {i}: my cat number {i} likes fish and the vet visit {i % 5} in Lisbon."
        if i == secret_at:
            text = f"Remember my bank {PIN} please, and the cat Miso."
        messages += [Message("user", text), Message("assistant", f"Noted {i}, said Ana about Porto.")]
    return group_turns(messages)


def counting_llm() -> FakeLLM:
    """A summariser LLM that counts its calls (``calls``)."""
    llm = FakeLLM(lambda prompt: f"- summary {llm.calls}: the user talked about cats and fish.")
    return llm


KINDS = {
    "kadanedial": lambda emb, llm: KadaneDialStrategy(embedder=emb),
    "swin": lambda emb, llm: SWinStrategy(summarizer=LLMSummarizer(llm)),
    "acm": lambda emb, llm: ACMStrategy(token_budget=400, summarizer=LLMSummarizer(llm)),
    "discourse_tree": lambda emb, llm: DiscourseTreeStrategy(embedder=emb),
    "topic_thread": lambda emb, llm: TopicThreadStrategy(embedder=emb, summarizer=LLMSummarizer(llm)),
}


def kinds(names: Iterable[str]) -> list[Any]:
    """Strategy kinds as test parameters; ACM's default entity extractor loads spaCy (``model``)."""
    return [pytest.param(k, marks=pytest.mark.model) if k == "acm" else k for k in sorted(names)]


@pytest.fixture(params=["memory", "sqlite"])
def store_factory(request, tmp_path):
    shared = InMemoryStore()
    path = tmp_path / "state.db"
    return (lambda: shared) if request.param == "memory" else (lambda: SQLiteStore(path))


@pytest.mark.parametrize("kind", kinds(KINDS))
def test_restart_restores_without_embedding_or_llm_calls(kind, store_factory):
    emb, llm = HashingEmbedder(), counting_llm()
    pool = StatePool(lambda: KINDS[kind](emb, llm), store=store_factory())
    turns = conversation(30)
    live = pool.get("alice")
    live.sync(turns[:20])
    live.sync(turns)
    expected = live.strategy.to_state()
    embeds, calls = len(emb.calls), llm.calls

    restarted = StatePool(lambda: KINDS[kind](emb, llm), store=store_factory()).get("alice")
    restarted.sync(turns)
    assert restarted.strategy.to_state() == expected
    assert (len(emb.calls), llm.calls) == (embeds, calls)  # nothing recomputed
    query = "what does my cat like?"
    assert restarted.strategy.select(query).blocks == live.strategy.select(query).blocks


@pytest.mark.parametrize("kind", kinds(KINDS))
def test_redacted_turn_leaves_no_derived_trace(kind, tmp_path, caplog):
    emb, llm = HashingEmbedder(), counting_llm()
    path = tmp_path / "state.db"
    pool = StatePool(lambda: KINDS[kind](emb, llm), store=SQLiteStore(path))
    turns = conversation(60, secret_at=1)
    session = pool.get("bob")
    session.sync(turns)
    redacted = list(turns)
    redacted[1] = Turn(1, (Message("user", "[redacted]"), turns[1].messages[1]))
    with caplog.at_level(logging.WARNING):
        fresh_pool = StatePool(lambda: KINDS[kind](emb, llm), store=SQLiteStore(path))
        fresh_pool.get("bob").sync(redacted)
        session.sync(redacted)
    assert "no longer matches" in caplog.text and "changed at turn 1" in caplog.text
    for live in (session, fresh_pool.get("bob")):
        state = str(live.strategy.to_state())
        assert "4417" not in state
        reference = KINDS[kind](emb, llm)
        reference.add_many(redacted)
        assert live.strategy.to_state()["turns"] == reference.to_state()["turns"]
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT data FROM ctxmgmt_records").fetchall()
    assert rows and not any(b"4417" in bytes(r[0]) for r in rows)


@pytest.mark.parametrize("kind", kinds(["swin", "topic_thread", "acm"]))
def test_alternating_sessions_cost_no_extra_llm_calls(kind):
    turns_a, turns_b = conversation(24), conversation(24, secret_at=3)
    sequential, alternating = counting_llm(), counting_llm()
    emb = HashingEmbedder()
    pool = StatePool(lambda: KINDS[kind](emb, sequential), store=InMemoryStore())
    for name, turns in (("a", turns_a), ("b", turns_b)):
        for i in range(1, len(turns) + 1):
            pool.get(name).sync(turns[:i])
    pool = StatePool(lambda: KINDS[kind](emb, alternating), store=None)
    for i in range(1, 25):
        pool.get("a").sync(turns_a[:i])
        pool.get("b").sync(turns_b[:i])
    assert sequential.calls > 0 and alternating.calls == sequential.calls


def test_live_sessions_are_bounded_and_evicted_ones_reload(tmp_path):
    emb = HashingEmbedder()
    pool = StatePool(
        lambda: KadaneDialStrategy(embedder=emb), store=SQLiteStore(tmp_path / "s.db"), max_sessions=3
    )
    turns = conversation(4)
    for i in range(10):
        pool.get(f"user-{i}").sync(turns)
    assert len(pool) == 3 and "user-0" not in pool
    embeds = len(emb.calls)
    pool.get("user-0").sync(turns)
    assert len(emb.calls) == embeds


def test_any_string_is_a_session_id(tmp_path):
    pool = StatePool(lambda: SWinStrategy(), store=SQLiteStore(tmp_path / "s.db"))
    turns = conversation(8)
    odd = ["", "'; DROP TABLE ctxmgmt_records; --", "ünïcødé 🐈", "a/b:c{d}[e]#", "x" * 5000]
    for sid in odd:
        pool.get(sid).sync(turns)
    reloaded = StatePool(lambda: SWinStrategy(), store=SQLiteStore(tmp_path / "s.db"))
    for sid in odd:
        session = reloaded.get(sid)
        session.sync(turns)
        assert session.strategy.to_state() == pool.get(sid).strategy.to_state()


def test_parameters_changed_since_storing_rebuild_with_a_warning(tmp_path, caplog):
    path = tmp_path / "s.db"
    StatePool(lambda: SWinStrategy(window=6), store=SQLiteStore(path)).get("a").sync(conversation(12))
    with caplog.at_level(logging.WARNING):
        session = StatePool(lambda: SWinStrategy(window=4), store=SQLiteStore(path)).get("a")
        session.sync(conversation(12))
    assert "rebuilding" in caplog.text
    reference = SWinStrategy(window=4)
    reference.add_many(conversation(12))
    assert session.strategy.to_state() == reference.to_state()


def test_another_embedder_since_storing_rebuilds_instead_of_mixing_vectors(tmp_path, caplog):
    """Vectors of one model are never restored for another (here: another dimension)."""

    class Wider(HashingEmbedder):
        name = "wider-hashing"

        def embed(self, texts):
            return np.hstack([super().embed(texts), np.zeros((len(texts), 8), dtype=np.float32)])

    path = tmp_path / "s.db"
    turns = conversation(12)
    stored = StatePool(lambda: KadaneDialStrategy(embedder=HashingEmbedder()), store=SQLiteStore(path))
    stored.get("a").sync(turns)
    wider = Wider()
    with caplog.at_level(logging.WARNING):
        session = StatePool(lambda: KadaneDialStrategy(embedder=wider), store=SQLiteStore(path)).get("a")
        session.sync(turns)
    assert "rebuilding" in caplog.text
    assert session.strategy.matrix.shape[1] == wider.embed(["x"]).shape[1]
    assert session.strategy.select("what does my cat like?").blocks  # no dimension error


def test_corrupt_record_rebuilds_instead_of_failing(tmp_path, caplog):
    path = tmp_path / "s.db"
    emb = HashingEmbedder()
    StatePool(lambda: KadaneDialStrategy(embedder=emb), store=SQLiteStore(path)).get("a").sync(
        conversation(6)
    )
    with sqlite3.connect(path) as db:
        db.execute("UPDATE ctxmgmt_records SET data = x'00ff' WHERE name = 'embeddings[2]'")
    with caplog.at_level(logging.WARNING):
        session = StatePool(lambda: KadaneDialStrategy(embedder=emb), store=SQLiteStore(path)).get("a")
        session.sync(conversation(6))
    assert "unusable" in caplog.text
    assert len(session.strategy) == 6 and session.strategy.select("cat").blocks


def _resized(value: Any) -> Any:
    """A stored vector (or list of them) one dimension short."""
    if isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[-1] > 8:
        return value[..., :-1]
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return [_resized(v) for v in value]
    return value


@pytest.mark.parametrize("strategy", [KadaneDialStrategy, TopicThreadStrategy, DiscourseTreeStrategy])
def test_stored_vectors_all_of_another_dimension_are_rebuilt_before_the_first_query(
    strategy, tmp_path, caplog
):
    """Every stored vector consistently one dimension short (not only one bad row): the restore
    checks them against the embedder's own dimension, so the first query does not fail."""
    store = SQLiteStore(tmp_path / "s.db")
    turns = conversation(8)
    original = StatePool(lambda: strategy(embedder=HashingEmbedder()), store=store).get("a")
    original.sync(turns)
    stored = store.load(original.key)
    assert stored is not None
    records = {name: _resized(value) for name, value in stored.records.items()}
    assert any(records[name] is not stored.records[name] for name in records)
    last = len(stored.chains) - 1
    store.delete(original.key)
    store.append(
        original.key,
        [TurnEntry(i, chain, records if i == last else {}) for i, chain in enumerate(stored.chains)],
        expected_version=0,
        strategy=stored.strategy,
        config=stored.config,
    )
    with caplog.at_level(logging.WARNING):
        pool = StatePool(lambda: strategy(embedder=HashingEmbedder()), store=SQLiteStore(tmp_path / "s.db"))
        session = pool.get("a")
        session.sync(turns)
        assert session.strategy.select("what does my cat like?").blocks  # no dimension error
    assert "dimensions" in caplog.text and len(session.strategy) == 8


def test_failing_store_falls_back_to_process_memory(caplog):
    class Broken(InMemoryStore):
        def load(self, key, *, turns=None):
            raise StoreError("database is down")

    session = StatePool(lambda: SWinStrategy(), store=Broken()).get("a")
    with caplog.at_level(logging.WARNING):
        session.sync(conversation(8))
    assert "database is down" in caplog.text and len(session.strategy) == 8


def test_two_workers_on_one_session_neither_lose_nor_duplicate(tmp_path):
    path = tmp_path / "s.db"
    emb = HashingEmbedder()
    first = StatePool(lambda: KadaneDialStrategy(embedder=emb), store=SQLiteStore(path)).get("a")
    second = StatePool(lambda: KadaneDialStrategy(embedder=emb), store=SQLiteStore(path)).get("a")
    turns = conversation(20)
    for i in range(1, 21):
        (first if i % 2 else second).sync(turns[:i])
    second.sync(turns)
    first.sync(turns)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM ctxmgmt_turns").fetchone()[0] == 20
        assert db.execute("SELECT COUNT(DISTINCT turn) FROM ctxmgmt_records").fetchone()[0] == 20
    assert first.strategy.to_state() == second.strategy.to_state()


def test_chain_hashes_change_from_the_edited_turn_on():
    turns = conversation(5)
    edited = list(turns)
    edited[2] = Turn(2, (Message("user", "changed"),))
    a, b = chain_hashes(turns), chain_hashes(edited)
    assert a[:2] == b[:2] and all(x != y for x, y in zip(a[2:], b[2:], strict=True))


@pytest.mark.parametrize("kind", kinds(KINDS))
def test_a_restarted_session_writes_what_a_continuous_one_writes(kind, tmp_path):
    """After a restart the next turns write exactly the rows they write without one (no rewrite)."""
    emb, turns = HashingEmbedder(), conversation(30)
    rows = {}
    for label in ("continuous", "restarted"):
        path, llm = tmp_path / f"{label}.db", counting_llm()

        def factory(llm: FakeLLM = llm) -> Any:
            return KINDS[kind](emb, llm)

        session = StatePool(factory, store=SQLiteStore(path)).get("a")
        session.sync(turns[:24])
        if label == "restarted":
            session = StatePool(factory, store=SQLiteStore(path)).get("a")
            session.sync(turns[:24])
        for i in range(25, 31):
            session.sync(turns[:i])
        with sqlite3.connect(path) as db:
            rows[label] = db.execute(
                "SELECT turn, name, kind, data FROM ctxmgmt_records WHERE turn >= 24 ORDER BY turn, name"
            ).fetchall()
    assert rows["restarted"] == rows["continuous"]
    assert len(rows["continuous"]) < 40 * 6  # a handful of records per turn, not the whole state


def by_prompt(prompt: str) -> str:
    """A summariser LLM whose answer depends on the prompt only (a rebuild gets the same items)."""
    return f"- summary {hashlib.sha1(prompt.encode()).hexdigest()[:8]}: the user talked about cats."


CAPPED = {
    "topic_thread": (topic_thread, "LOG_ENTRIES", "log", KINDS["topic_thread"]),
    "acm": (
        acm,
        "LOG_ENTRIES",
        "log",
        lambda emb, llm: ACMStrategy(token_budget=200, summarizer=LLMSummarizer(llm)),
    ),
    "swin": (
        swin,
        "FORGOTTEN_ENTRIES",
        "forgotten",
        lambda emb, llm: SWinStrategy(summarizer=LLMSummarizer(llm), gamma=2),
    ),
}


@pytest.mark.parametrize("kind", kinds(CAPPED))
def test_capped_logs_write_each_entry_once(kind, tmp_path, monkeypatch):
    """A log trimmed from the front writes one row per new entry and one tombstone per dropped one,
    however many turns the conversation has (a positional list rewrote every entry each turn)."""
    module, constant, field, factory = CAPPED[kind]
    monkeypatch.setattr(module, constant, 4)
    emb, llm, path = HashingEmbedder(), by_prompt, tmp_path / "s.db"
    turns = conversation(60)
    session = StatePool(lambda: factory(emb, llm), store=SQLiteStore(path)).get("a")
    for i in range(1, 61):
        session.sync(turns[:i])
    edited = list(turns)
    edited[40] = Turn(40, (Message("user", "a new topic: my bicycle in Madrid"),))
    session.sync(edited)  # rewinds to turn 40, rebuilds from there
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT name, kind FROM ctxmgmt_records WHERE name LIKE ? ORDER BY turn", (f"{field}[%",)
        ).fetchall()
    written = [name for name, k in rows if k != "del"]
    dropped = [name for name, k in rows if k == "del"]
    assert len(dropped) > 4, "the log never overflowed its cap"
    assert len(written) == len(set(written)) and len(dropped) == len(set(dropped))
    assert set(dropped) <= set(written)
    restarted = StatePool(lambda: factory(emb, llm), store=SQLiteStore(path)).get("a")
    restarted.sync(edited)
    rebuilt = factory(emb, by_prompt)
    rebuilt.add_many(edited)
    state = restarted.strategy.to_state()
    assert state == session.strategy.to_state()
    assert state[field] == rebuilt.to_state()[field] and len(state[field]) == 4


def test_common_prefix_of_chains_finds_every_first_difference():
    from ctxmgmt.session.stored_state import _common_prefix

    turns = conversation(17)
    base = chain_hashes(turns)
    for edited_at in range(len(turns)):
        edited = list(turns)
        edited[edited_at] = Turn(edited_at, (Message("user", "[redacted]"),))
        other = chain_hashes(edited)
        assert _common_prefix(base, other) == edited_at
        assert _common_prefix(base[: edited_at + 3], other) == edited_at
    assert _common_prefix(base, base[:5]) == 5 and _common_prefix([], base) == 0


def test_sentence_transformer_embedders_are_named_by_their_model():
    """Stored states record the model, so a state is never restored for another model's vectors."""
    from ctxmgmt.components.embedder import SentenceTransformerEmbedder

    def built_with(embedder):
        return KadaneDialStrategy(embedder=embedder).stored_config()["built_with"]

    bundled = built_with(SentenceTransformerEmbedder())
    other = built_with(SentenceTransformerEmbedder("/models/other"))
    assert bundled["embedder"] == "sentence-transformers:all-MiniLM-L6-v2"
    assert other["embedder"] == "sentence-transformers:/models/other" != bundled["embedder"]


class StepClock:
    """A clock that moves ``per_call`` seconds each time it is read."""

    def __init__(self, per_call: float) -> None:
        self.now = 0.0
        self.per_call = per_call

    def __call__(self) -> float:
        self.now += self.per_call
        return self.now


def test_catch_up_without_a_time_limit_derives_every_turn_in_batches():
    from ctxmgmt.session.stored_state import StoredState

    store = InMemoryStore()
    state = StoredState("k", KadaneDialStrategy(embedder=HashingEmbedder()), store)
    past = conversation(10)
    seen: list[tuple[int, int]] = []
    done = state.catch_up(
        past, chain_hashes(past), seconds=None, first_step=4, batch=4, progress=lambda *p: seen.append(p)
    )
    assert done == 10 and len(state.strategy) == 10
    assert seen == [(4, 10), (8, 10), (10, 10)]
    assert store.load("k").chains == chain_hashes(past)


def test_catch_up_stops_when_its_time_is_spent_and_the_next_call_resumes():
    from ctxmgmt.session.stored_state import StoredState

    state = StoredState("k", KadaneDialStrategy(embedder=HashingEmbedder()), InMemoryStore())
    past = conversation(40)
    chains = chain_hashes(past)
    # the first 2 turns are untimed; then every clock read costs 1 s of a 1.5 s limit
    done = state.catch_up(past, chains, seconds=1.5, first_step=2, batch=8, clock=StepClock(1.0))
    assert 2 < done < 40 and len(state.strategy) == done
    assert state.catch_up(past, chains, seconds=0.0, first_step=2, batch=8) == done + 2  # untimed step only
    assert state.catch_up(past, chains, seconds=None, first_step=2, batch=8) == 40

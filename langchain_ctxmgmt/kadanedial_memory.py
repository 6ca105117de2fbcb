"""``KadaneDialMemory``: classic LangChain memory that sends only the relevant spans of history."""

from __future__ import annotations

from ctxmgmt import KadaneDialStrategy, Strategy
from ctxmgmt.kadane import THETA
from ctxmgmt.strategies.kadanedial import (
    COMMON_SHARE,
    KEEP_LAST,
    LEXICAL_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SHARPNESS,
    TUNED_TAU,
)
from langchain_ctxmgmt._base import CtxMgmtMemory


class KadaneDialMemory(CtxMgmtMemory):
    r"""DYCP KadaneDial selection as a classic ``BaseMemory`` (``langchain_classic``).

    Every saved turn (user input + AI output) is embedded once. For each new input, the
    turns are scored against it, z-normalised, and KadaneDial picks the contiguous spans of
    high relevance; they are returned in chronological order, within ``max_token_limit``.
    No extra LLM call. The full history stays in ``chat_memory`` / :attr:`messages`.

    Attributes:
        tau: Gain shift, in standard deviations of the turn scores; 0.52 (LoCoMo dev; DYCP 4.4
            uses 0.6 on the raw cosine).
        theta: Stop when the best remaining span's summed gain is below this; 1.0 per DYCP 4.4.
        keep_last: Most recent turns always returned (0 by default; 1-2 helps follow-ups
            such as "and then?").
        lexical_weight: Weight of the max-scaled BM25 score added to the cosine relevance
            (0 = dense only).
        sharpness: Exponent on the clipped relevance before z-normalisation (1 = plain score).
        neighbour_weight: Share of the neighbouring turns' mean signal added to a turn, so
            spans grow around a peak (0 = none).
        common_share: Share of past turns above which a query word (such as a speaker's
            name) is left out of a second query embedding; 0.5 (None = embed the query once).

    Defaults are ``KadaneDialStrategy``'s; ``tau=0.6, lexical_weight=0, sharpness=1,
    neighbour_weight=0, common_share=None`` is DYCP exactly as published.

    The shared fields (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
    ``human_prefix``, ``ai_prefix``, ``max_token_limit``, ``embedder``, ``token_counter``,
    ``chat_memory``) are described on :class:`~langchain_ctxmgmt._base.CtxMgmtMemory`.

    Example:
        >>> from langchain_ctxmgmt import KadaneDialMemory
        >>> memory = KadaneDialMemory(max_token_limit=1000)  # bundled embedder, loaded on first use
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})  # doctest: +SKIP
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]  # doctest: +SKIP
        'Human: My cat is Miso.\nAI: Cute!'
    """

    tau: float = TUNED_TAU
    theta: float = THETA
    keep_last: int = KEEP_LAST
    lexical_weight: float = LEXICAL_WEIGHT
    sharpness: float = SHARPNESS
    neighbour_weight: float = NEIGHBOUR_WEIGHT
    common_share: float | None = COMMON_SHARE

    def _make_strategy(self) -> Strategy:
        return KadaneDialStrategy(
            embedder=self.embedder,
            token_counter=self.token_counter,
            tau=self.tau,
            theta=self.theta,
            keep_last=self.keep_last,
            lexical_weight=self.lexical_weight,
            sharpness=self.sharpness,
            neighbour_weight=self.neighbour_weight,
            common_share=self.common_share,
        )

"""``ACMTieredBuffer``: classic LangChain memory with ACM's verbatim / summary / entity tiers."""

from __future__ import annotations

from ctxmgmt import ACMStrategy
from langchain_ctxmgmt._base import StrategyMemory


class ACMTieredBuffer(StrategyMemory, strategy=ACMStrategy):
    r"""ACM adaptive context management as a classic ``BaseMemory`` (``langchain_classic``).

    Within ``max_token_limit`` the newest saved turns stay verbatim (at least
    ``unmodified_ratio`` of the budget while there are enough), older turns are summarised
    once into the summarised tier (at most ``summary_limit`` tokens per summary) and, when
    that tier is full, its oldest turns collapse into a de-duplicated list of named entities
    (spaCy ``en_core_web_sm``) with their source turn, timestamp, label and mention count.
    When the input mentions one of those entities, the verbatim turns behind it come back
    if the budget allows. ``load_memory_variables`` returns the entity and summary tiers as
    framed memory messages (``HumanMessage`` s by default, ``memory_role``; string form:
    ``Human:`` lines) around the verbatim turns, never more
    than ``max_token_limit`` tokens. ``explain()`` shows the tiers. The full history stays in
    ``chat_memory`` / :attr:`messages`.

    Example:
        >>> from langchain_ctxmgmt import ACMTieredBuffer
        >>> memory = ACMTieredBuffer(max_token_limit=2000)
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]
        'Human: My cat is Miso.\nAI: Cute!'
    """

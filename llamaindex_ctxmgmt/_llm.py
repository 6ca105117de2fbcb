"""Private helpers: a ctxmgmt ``LLMSummarizer`` / ``LLMDecider`` driven by a LlamaIndex LLM."""

from __future__ import annotations

from typing import Any

from llama_index.core.llms.llm import LLM

from ctxmgmt.components.decider import Decider, LLMDecider, as_decider
from ctxmgmt.components.summarizer import LLMSummarizer, Summarizer, as_summarizer
from ctxmgmt.exceptions import ConfigurationError


def llm_summarizer(llm: LLM, **kwargs: Any) -> LLMSummarizer:
    """An ``LLMSummarizer`` that sends its prompt to ``llm.complete``.

    ``kwargs`` go to ``LLMSummarizer`` (``fallback``, ``max_items``).
    """

    def complete(prompt: str) -> str:
        return llm.complete(prompt).text

    return LLMSummarizer(complete, **kwargs)


def resolve_summarizer(llm: Any, summarizer: Any) -> Summarizer:
    """The summarizer a memory uses: ``summarizer`` as given, else one over ``llm``, else extractive."""
    if llm is not None and summarizer is not None:
        raise ConfigurationError("give either llm or summarizer, not both")
    if llm is not None:
        if not isinstance(llm, LLM):
            raise ConfigurationError(f"llm must be a LlamaIndex LLM, got {type(llm).__name__}")
        return llm_summarizer(llm)
    return as_summarizer(summarizer)


def llm_decider(llm: LLM, **kwargs: Any) -> LLMDecider:
    """An ``LLMDecider`` (discourse tree) that sends its prompts to ``llm.complete``.

    ``kwargs`` go to ``LLMDecider`` (``fallback``).
    """

    def complete(prompt: str) -> str:
        return llm.complete(prompt).text

    return LLMDecider(complete, **kwargs)


def resolve_decider(llm: Any, decider: Any) -> Decider:
    """The decider a memory uses: ``decider`` as given, else one over ``llm``, else the embedded one."""
    if llm is not None and decider is not None:
        raise ConfigurationError("give either llm or decider, not both")
    if llm is not None:
        if not isinstance(llm, LLM):
            raise ConfigurationError(f"llm must be a LlamaIndex LLM, got {type(llm).__name__}")
        return llm_decider(llm)
    return as_decider(decider)

"""Private helpers: a ctxmgmt ``LLMSummarizer`` / ``LLMDecider`` driven by a LangChain chat model."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from ctxmgmt.components.decider import Decider, LLMDecider, as_decider
from ctxmgmt.components.summarizer import LLMSummarizer, Summarizer, as_summarizer
from ctxmgmt.exceptions import ConfigurationError
from langchain_ctxmgmt._convert import content_text


def chat_model_summarizer(model: BaseChatModel, **kwargs: Any) -> LLMSummarizer:
    """An ``LLMSummarizer`` that sends its prompt to ``model`` as one human message.

    ``kwargs`` go to ``LLMSummarizer`` (``fallback``, ``max_items``).
    """

    def complete(prompt: str) -> str:
        return content_text(model.invoke([HumanMessage(prompt)]))

    return LLMSummarizer(complete, **kwargs)


def resolve_summarizer(llm: Any, summarizer: Any) -> Summarizer:
    """The summarizer a memory uses: ``summarizer`` as given, else one over ``llm``, else extractive."""
    if llm is not None and summarizer is not None:
        raise ConfigurationError("give either llm or summarizer, not both")
    if llm is not None:
        if not isinstance(llm, BaseChatModel):
            raise ConfigurationError(f"llm must be a LangChain BaseChatModel, got {type(llm).__name__}")
        return chat_model_summarizer(llm)
    return as_summarizer(summarizer)


def chat_model_decider(model: BaseChatModel, **kwargs: Any) -> LLMDecider:
    """An ``LLMDecider`` (discourse tree) that sends its prompts to ``model`` as one human message.

    ``kwargs`` go to ``LLMDecider`` (``fallback``).
    """

    def complete(prompt: str) -> str:
        return content_text(model.invoke([HumanMessage(prompt)]))

    return LLMDecider(complete, **kwargs)


def resolve_decider(llm: Any, decider: Any) -> Decider:
    """The decider a memory uses: ``decider`` as given, else one over ``llm``, else the embedded one."""
    if llm is not None and decider is not None:
        raise ConfigurationError("give either llm or decider, not both")
    if llm is not None:
        if not isinstance(llm, BaseChatModel):
            raise ConfigurationError(f"llm must be a LangChain BaseChatModel, got {type(llm).__name__}")
        return chat_model_decider(llm)
    return as_decider(decider)

"""Private helper: a LangChain chat model as the core's ``prompt -> text`` function."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from ctxmgmt.adapter import Complete, completion
from langchain_ctxmgmt._convert import content_text


def _invoke(model: BaseChatModel, prompt: str) -> str:
    return content_text(model.invoke([HumanMessage(prompt)]))


def complete_with(llm: Any) -> Complete | None:
    """``prompt -> text`` over a LangChain chat model (the prompt as one human message); None for None.

    Raises:
        ConfigurationError: ``llm`` is not a LangChain ``BaseChatModel``.
    """
    return completion(llm, BaseChatModel, _invoke, label="LangChain BaseChatModel")

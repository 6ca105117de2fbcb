"""Private helper: a LlamaIndex LLM as the core's ``prompt -> text`` function."""

from __future__ import annotations

from typing import Any

from llama_index.core.llms.llm import LLM

from ctxmgmt.adapter import Complete, completion


def _complete(llm: LLM, prompt: str) -> str:
    return llm.complete(prompt).text


def complete_with(llm: Any) -> Complete | None:
    """``prompt -> text`` over ``llm.complete``; None for None.

    Raises:
        ConfigurationError: ``llm`` is not a LlamaIndex ``LLM``.
    """
    return completion(llm, LLM, _complete, label="LlamaIndex LLM")

"""Private helper: a LangChain chat model as the core's ``prompt -> text`` function.

The summariser/decider calls a memory makes are internal: they must not appear in the agent's
stream (``stream_mode="messages"``, ``astream_events``) or state. Each call is therefore made

- with the metadata LangChain's own middlewares put on their internal calls
  (``SummarizationMiddleware._summary_config``: ``{"lc_source": ..., **internal_call_metadata()}``),
  so LangChain's ``InternalCallTransformer`` recognises it as internal;
- with LangGraph's ``nostream`` tag, which ``stream_mode="messages"`` skips;
- with no callbacks (``"callbacks": []``), so it is not a child run of the agent's run: no
  handler of the caller (the messages stream, ``astream_events``, a parent tracer) sees it.
  LangSmith tracing set by environment still records it, as a run of its own named ``ctxmgmt``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from ctxmgmt.adapter.kit import INTERNAL_CALL_SOURCE, Complete, completion
from langchain_ctxmgmt._convert import content_text

try:  # recent LangChain marks middleware-internal calls with a process-local token
    from langchain.agents.middleware.internal_call_transformer import internal_call_metadata
except ImportError:  # pragma: no cover - older LangChain: the other two measures suffice

    def internal_call_metadata() -> dict[str, Any]:
        return {}


def internal_call_config() -> RunnableConfig:
    """Config of a memory's own model call: marked internal, not streamed, no parent run."""
    return {
        "callbacks": [],
        "tags": [TAG_NOSTREAM, INTERNAL_CALL_SOURCE],
        "metadata": {"lc_source": INTERNAL_CALL_SOURCE, **internal_call_metadata()},
        "run_name": INTERNAL_CALL_SOURCE,
    }


def _invoke(model: BaseChatModel, prompt: str) -> str:
    return content_text(model.invoke([HumanMessage(prompt)], config=internal_call_config()))


def complete_with(llm: Any) -> Complete | None:
    """``prompt -> text`` over a LangChain chat model (the prompt as one human message); None for None.

    The call is internal (see the module docstring): it never reaches the agent's stream.

    Raises:
        ConfigurationError: ``llm`` is not a LangChain ``BaseChatModel``.
    """
    return completion(llm, BaseChatModel, _invoke, label="LangChain BaseChatModel")

"""Private helper: a LlamaIndex LLM as the core's ``prompt -> text`` function.

The summariser/decider calls a memory makes stay out of an agent's stream: a workflow's
``handler.stream_events()`` carries only what its steps write with ``ctx.write_event_to_stream``
(``AgentInput``/``AgentStream``/``AgentOutput`` of the agent's own LLM), and this call is a plain
``llm.complete(prompt)`` (not streamed), so it writes nothing there. The only place it shows is
LlamaIndex's instrumentation (the global dispatcher that tracing integrations listen to): one
``LLMCompletionStartEvent``/``LLMCompletionEndEvent`` pair in a ``<LLM class>.complete`` span,
nested under the memory call that made it; the agent's answer comes as ``LLMChat*`` events
of the agent LLM's ``astream_chat`` span, so a handler cannot take one for the other.
Tested in ``tests/integration/test_internal_calls_hidden.py``.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.llms.llm import LLM

from ctxmgmt.adapter.kit import Complete, completion


def _complete(llm: LLM, prompt: str) -> str:
    return llm.complete(prompt).text


def complete_with(llm: Any) -> Complete | None:
    """``prompt -> text`` over ``llm.complete``; None for None.

    Raises:
        ConfigurationError: ``llm`` is not a LlamaIndex ``LLM``.
    """
    return completion(llm, LLM, _complete, label="LlamaIndex LLM")

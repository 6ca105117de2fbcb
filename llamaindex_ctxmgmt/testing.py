"""LlamaIndex test doubles that the tests and the examples share.

- :class:`RecordingFunctionLLM`: LlamaIndex's ``MockFunctionCallingLLM`` (usable by
  ``FunctionAgent``, ``ReActAgent`` and ``AgentWorkflow``) that keeps every message list it is
  sent and answers with :meth:`~RecordingFunctionLLM.respond`, which subclasses write.
- :class:`PromptRecordingLLM`: LlamaIndex's ``MockLLM`` whose ``complete`` (what the memories'
  summariser and decider call) keeps every prompt and gives one answer.

The prompt -> text fakes and the embedders are in :mod:`ctxmgmt.app.testing`.

Example::

    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llamaindex_ctxmgmt.testing import RecordingFunctionLLM

    class Echo(RecordingFunctionLLM):
        def respond(self, messages):
            return ChatMessage(role=MessageRole.ASSISTANT, content=messages[-1].content)

    llm = Echo()
    ...
    llm.received[-1]   # what the LLM was sent for the last answer
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, CompletionResponse, MessageRole
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.mock import MockFunctionCallingLLM

__all__ = ["PromptRecordingLLM", "RecordingFunctionLLM"]


class RecordingFunctionLLM(MockFunctionCallingLLM):
    """``MockFunctionCallingLLM`` that records every message list and answers with :meth:`respond`.

    Every path (``chat``, ``achat``, and the streaming ones agents use) comes through one
    response generator: it appends the messages to ``received``, then calls :meth:`respond`.

    Args:
        **kwargs: ``MockFunctionCallingLLM``'s fields (e.g. ``is_chat_model=True``).

    Attributes:
        received: The messages of every call, in order (the current call's included when
            :meth:`respond` runs).
    """

    received: list[list[ChatMessage]] = Field(default_factory=list, exclude=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(response_generator=self._record_and_respond, **kwargs)

    def _record_and_respond(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.received.append(list(messages))
        return self.respond(messages)

    def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
        """The answer to ``messages``: a ``ChatMessage``, with ``ToolCallBlock``s to call tools.

        The default answers ``"OK."``; subclasses write their own.
        """
        return ChatMessage(role=MessageRole.ASSISTANT, content="OK.")


class PromptRecordingLLM(MockLLM):
    """``MockLLM`` whose ``complete`` records the prompt and gives one answer.

    Args:
        answer: The answer to every prompt; default a summary item
            (``"- The user bakes sourdough bread with a rye starter."``).
        **kwargs: Passed to ``MockLLM``.

    Attributes:
        prompts: Every prompt ``complete`` received, in order.
    """

    prompts: list[str] = Field(default_factory=list, exclude=True)
    answer: str = "- The user bakes sourdough bread with a rye starter."

    def __init__(self, answer: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # MockLLM takes no field values
        if answer is not None:
            self.answer = answer

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        """Record ``prompt``; answer ``answer``."""
        self.prompts.append(prompt)
        return CompletionResponse(text=self.answer)

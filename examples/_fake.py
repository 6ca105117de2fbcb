"""The offline model every example uses: the frameworks' own fakes, adapted a little.

``OfflineChatModel`` is LangChain's ``GenericFakeChatModel`` (through
``langchain_ctxmgmt.testing.RecordingChatModel``), ``OfflineLLM`` is LlamaIndex's
``MockLLM`` and ``OfflineFunctionLLM`` its ``MockFunctionCallingLLM`` (for ``FunctionAgent``,
through ``llamaindex_ctxmgmt.testing.RecordingFunctionLLM``).
All keep every message list they are sent in ``received`` (what the model got is the point of
the examples), and they answer by saying how many messages that was.

Each example needs only its own framework, so each half is defined only if that framework is
installed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from importlib.util import find_spec
from typing import Any

from pydantic import Field


def reply_text(sent: int) -> str:
    """What the offline model answers when it was sent ``sent`` messages."""
    return f"(offline model) I was sent {sent} messages for this answer."


if find_spec("langchain_core") is not None:
    from langchain_core.messages import AIMessage

    from langchain_ctxmgmt.testing import RecordingChatModel

    class OfflineChatModel(RecordingChatModel):
        """LangChain's ``GenericFakeChatModel``, usable by ``create_agent``, recording its input.

        Args:
            script: Replies for given calls, by call number from 0: a string, or an ``AIMessage``
                (with ``tool_calls`` to make the agent run a tool). Every other call answers
                with :func:`reply_text`.
        """

        def __init__(self, script: Mapping[int, AIMessage | str] | None = None, **kwargs: Any) -> None:
            super().__init__(messages=self._replies(dict(script or {})), **kwargs)

        def _replies(self, script: dict[int, AIMessage | str]) -> Iterator[AIMessage | str]:
            call = 0
            while True:
                yield script.get(call) or reply_text(len(self.received[-1]))
                call += 1


if find_spec("llama_index") is not None:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.llms import MockLLM
    from llama_index.core.llms.callbacks import llm_chat_callback

    from llamaindex_ctxmgmt.testing import RecordingFunctionLLM

    class OfflineLLM(MockLLM):
        """LlamaIndex's ``MockLLM`` as a chat model: records its input, answers with :func:`reply_text`."""

        received: list[list[ChatMessage]] = Field(default_factory=list, exclude=True)

        def __init__(self) -> None:
            super().__init__(is_chat_model=True)

        @llm_chat_callback()
        def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            """Record the messages; reply with how many there were."""
            self.received.append(list(messages))
            reply = ChatMessage(role=MessageRole.ASSISTANT, content=reply_text(len(messages)))
            return ChatResponse(message=reply)

    class OfflineFunctionLLM(RecordingFunctionLLM):
        """LlamaIndex's ``MockFunctionCallingLLM``, usable by ``FunctionAgent``, recording its input.

        Args:
            script: Replies for given calls, by call number from 0: a string, or a ``ChatMessage``
                (with a ``ToolCallBlock`` to make the agent run a tool). Every other call answers
                with :func:`reply_text`.
        """

        script: dict[int, ChatMessage | str] = Field(default_factory=dict, exclude=True)

        def __init__(self, script: Mapping[int, ChatMessage | str] | None = None) -> None:
            super().__init__(is_chat_model=True)
            self.script = dict(script or {})

        def respond(self, messages: Sequence[ChatMessage]) -> ChatMessage:
            """The scripted reply of this call, else :func:`reply_text`."""
            reply = self.script.get(len(self.received) - 1) or reply_text(len(messages))
            if isinstance(reply, str):
                return ChatMessage(role=MessageRole.ASSISTANT, content=reply)
            return reply

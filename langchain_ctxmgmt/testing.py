"""LangChain test doubles that the tests, the examples and the benchmarks share.

:class:`RecordingChatModel` is LangChain's own ``GenericFakeChatModel`` (it answers with the
next of the ``messages`` it was given), usable as ``create_agent``'s model, that keeps every
message list it is sent; :class:`RecordingListChatModel` is ``FakeListChatModel`` keeping
every prompt, for the models the memories call themselves. The prompt -> text fakes and the embedders are in
:mod:`ctxmgmt.app.testing`.

Example::

    from langchain_core.messages import AIMessage
    from langchain_ctxmgmt.testing import RecordingChatModel

    model = RecordingChatModel(messages=iter(["Hello.", AIMessage("Bye.")]))
    agent = create_agent(model, tools, middleware=[KadaneDialMiddleware()])
    ...
    model.received[-1]   # what the model was sent for the last answer
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from pydantic import Field

__all__ = ["RecordingChatModel", "RecordingListChatModel"]


class RecordingChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that records the messages of every call and accepts tools.

    Streamed calls are recorded too (``GenericFakeChatModel`` streams what ``_generate``
    answers). ``bind_tools`` returns the model itself: a scripted model needs no tool schema,
    and an ``AIMessage`` with ``tool_calls`` among its ``messages`` makes an agent run a tool.

    Attributes:
        received: The messages of every call, in order.
    """

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingChatModel:  # type: ignore[override]
        """This model itself (the tools are not needed to answer from a script)."""
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.received.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


class RecordingListChatModel(FakeListChatModel):
    """``FakeListChatModel`` that records the prompt of every call, streamed or not.

    For a model the memories call themselves (summariser, compressor, decider): it answers
    with its ``responses`` in turn, as ``FakeListChatModel`` does.

    Attributes:
        prompts: The text of the last message of every call, in order.
    """

    prompts: list[str] = Field(default_factory=list)

    def _record(self, messages: list[BaseMessage]) -> None:
        self.prompts.append(str(messages[-1].content))

    def _call(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> str:
        self._record(messages)
        return super()._call(messages, stop=stop, run_manager=run_manager, **kwargs)

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        self._record(messages)
        yield from super()._stream(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        self._record(messages)
        async for chunk in super()._astream(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield chunk

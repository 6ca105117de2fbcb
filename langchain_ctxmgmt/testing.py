"""LangChain test doubles that the tests, the examples and the benchmarks share.

:class:`RecordingChatModel` is LangChain's own ``GenericFakeChatModel`` (it answers with the
next of the ``messages`` it was given), usable as ``create_agent``'s model, that keeps every
message list it is sent. The prompt -> text fakes and the embedders are in
:mod:`ctxmgmt.testing`.

Example::

    from langchain_core.messages import AIMessage
    from langchain_ctxmgmt.testing import RecordingChatModel

    model = RecordingChatModel(messages=iter(["Hello.", AIMessage("Bye.")]))
    agent = create_agent(model, tools, middleware=[KadaneDialMiddleware()])
    ...
    model.received[-1]   # what the model was sent for the last answer
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import Field

__all__ = ["RecordingChatModel"]


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

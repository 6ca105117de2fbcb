"""How the examples run their conversation and print what the model received.

Every example talks through a list of questions, prints each answer with a note on what was
sent, and then prints the messages the model got for the last question. The lines for that
are here, so that each example shows only what is its own: the memory, its settings and what
it explains. (The persistence examples show what was (not) embedded again after a restart with
``ctxmgmt.app.testing.CountingEmbedder``.) The LangChain half (agents) and the LlamaIndex half
(chat engines, agents with ``Memory``) are defined only if that framework is installed (see
``_fake.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from importlib.util import find_spec
from typing import Any

from ctxmgmt import Context


def sent(context: Context) -> str:
    """How much of the conversation went to the model: ``sent 210 of 640 tokens``."""
    return f"sent {context.tokens} of {context.history_tokens} tokens"


def print_turn(question: str, answer: str, note: str) -> None:
    """One exchange: the question, the answer and, in brackets, a note on what was sent."""
    print(f"> {question}")
    print(f"  {answer}")
    print(f"  [{note}]")


def print_received(context: Context, who: str = "model", system: str | None = None) -> None:
    """The messages of ``context``, one ``role: text`` entry each (tool calls by name, later lines indented).

    Args:
        context: The context built for the last question.
        who: What received it, for the heading.
        system: A system prompt the framework sends before the context, shown first.
    """
    print(f"\nFor the last question the {who} received:")
    if system is not None:
        print(f"  system: {system}")
    for message in context.messages():
        calls = f" {[call['name'] for call in message.tool_calls]}" if message.tool_calls else ""
        text = message.text.replace("\n", "\n    ")
        print(f"  {message.role}: {text}{calls}")


if find_spec("langchain") is not None:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    def chat_model(name: str | None, instead: str) -> BaseChatModel | None:
        """The ``init_chat_model`` model called ``name``; None if there is no name or it cannot be built.

        Args:
            name: Any ``init_chat_model`` string, e.g. ``"openai:gpt-4o-mini"``.
            instead: What the example does without it, said when the model cannot be built.
        """
        if not name:
            return None
        try:
            from langchain.chat_models import init_chat_model

            return init_chat_model(name)
        except Exception as exc:  # missing provider package, bad name, ...
            print(f"Cannot build {name!r} ({exc}); {instead}.")
            return None

    def example_agent(
        model: BaseChatModel,
        middleware: Any,
        system_prompt: str,
        tools: Sequence[Any] = (),
        checkpointer: Any = None,
    ) -> Any:
        """``create_agent`` with one middleware; its checkpointer (default: in memory) keeps the history."""
        return create_agent(
            model,
            tools=list(tools),
            system_prompt=system_prompt,
            middleware=[middleware],
            checkpointer=InMemorySaver() if checkpointer is None else checkpointer,
        )

    def converse(
        agent: Any,
        middleware: Any,
        questions: Iterable[str],
        note: Callable[[Context], str],
        thread_id: str = "example",
    ) -> dict[str, Any]:
        """Ask the questions in thread ``thread_id``; print each with its answer and ``note(last context)``.

        Returns:
            The agent's final state.
        """
        config = {"configurable": {"thread_id": thread_id}}
        state: dict[str, Any] = {}
        for question in questions:
            state = agent.invoke({"messages": [HumanMessage(question)]}, config)
            print_turn(question, state["messages"][-1].text, note(middleware.last_context))
        return state


if find_spec("llama_index") is not None:
    from llama_index.core.agent.workflow import AgentInput
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
    from llama_index.core.llms import LLM

    def openai_llm(instead: str) -> LLM | None:
        """OpenAI (``CTXMGMT_MODEL``, default ``gpt-4o-mini``) if ``OPENAI_API_KEY`` is set, else None.

        Args:
            instead: What the example does without it, said when ``llama-index-llms-openai``
                is not installed.
        """
        if not os.environ.get("OPENAI_API_KEY"):
            return None
        try:
            from llama_index.llms.openai import OpenAI
        except ImportError:
            print(f"OPENAI_API_KEY is set but llama-index-llms-openai is not installed; {instead}.")
            return None
        return OpenAI(model=os.environ.get("CTXMGMT_MODEL", "gpt-4o-mini"))

    def chat(engine: Any, memory: Any, questions: Iterable[str], note: Callable[[Context], str]) -> None:
        """Ask a chat engine the questions; print each with its answer and ``note(last context)``."""
        for question in questions:
            response = engine.chat(question)
            print_turn(question, str(response), note(memory.last_context))

    async def run_agent(
        agent: Any, memory: Any, block: Any, questions: Iterable[str], note: Callable[[Context | None], str]
    ) -> tuple[list[ChatMessage], Context | None]:
        """Ask a LlamaIndex agent the questions with ``memory``; print each with its answer and a note.

        ``note`` gets ``block.last_context`` as it is when the agent's LLM input is ready (its
        ``AgentInput`` event): the block's selection for that call. (After answering,
        ``FunctionAgent`` calls ``memory.aget()`` once more, so afterwards ``last_context`` is
        that later selection.)

        Returns:
            What the LLM received for the last question, and the block's context for it.
        """
        llm_input: list[ChatMessage] = []
        context: Context | None = None
        for question in questions:
            handler = agent.run(user_msg=question, memory=memory)
            async for event in handler.stream_events():
                if isinstance(event, AgentInput):  # sent to the LLM right after this event
                    llm_input, context = list(event.input), block.last_context
            response = await handler
            print_turn(question, str(response), note(context))
        return llm_input, context

    def print_llm_input(messages: Sequence[ChatMessage], who: str = "LLM") -> None:
        """A LlamaIndex LLM's input, one ``role: text`` entry each (tool calls by name, lines indented)."""
        print(f"\nFor the last question the {who} received:")
        for message in messages:
            calls = [block.tool_name for block in message.blocks if isinstance(block, ToolCallBlock)]
            text = (message.content or "").strip().replace("\n", "\n    ")
            print(f"  {message.role.value}: {text}{f' {calls}' if calls else ''}")

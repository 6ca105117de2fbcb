"""Thread alternation: LLM calls with two alternating threads vs the same threads one after the other.

Run: ``python benchmarks/thread_alternation.py [--quick] [--json threads.json]
[--embedder minilm|hash] [--thread-turns 24] [--data FILE]``.

``create_agent`` (a tool-less fake chat model answering each user message with its LoCoMo
reply, ``InMemorySaver``) through each middleware that can use an LLM, ``llm=`` a
call-counting fake chat model that answers with :func:`ctxmgmt.app.testing.plausible_answer`;
two threads of ``--thread-turns`` (24) turns, alternating one turn at a time vs one after the
other: LLM calls of both orders, their ratio, and whether every model call saw the same
context. Target: ratio 1.00.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import make_embedder, parser_for, run_benchmark, source_turns, table  # noqa: E402

from ctxmgmt.app.testing import plausible_answer  # noqa: E402

SIZES = {"thread_turns": (24, 8)}
"""``name -> (default, with --quick)``."""


def _chat_models() -> tuple[type, type]:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class CountingChatModel(BaseChatModel):
        """A fake LLM for summaries and decisions: deterministic in the prompt, counts its calls."""

        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "counting-fake"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            self.calls += 1
            prompt = str(messages[-1].content)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(plausible_answer(prompt)))])

    class ReplyModel(BaseChatModel):
        """The agent's tool-less fake model: answers each user message with its LoCoMo reply."""

        replies: dict[str, str] = Field(default_factory=dict)
        received: list[list[str]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "reply-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
            self.received.append([str(m.content) for m in messages])
            last = next((str(m.content) for m in reversed(messages) if m.type == "human"), "")
            reply = self.replies.get(last, "I see.")
            return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])

    return CountingChatModel, ReplyModel


def _thread_script(n: int) -> dict[str, list[tuple[str, str]]]:
    """Two threads of ``n`` (user, reply) pairs from two different dialogues."""
    base = source_turns()
    threads = {}
    for name, start in (("thread-a", 0), ("thread-b", len(base) // 2)):
        pairs = []
        for i in range(n):
            msgs = base[start + i].messages
            pairs.append((f"{msgs[0].text}", msgs[1].text if len(msgs) > 1 else "OK."))
        threads[name] = pairs
    return threads


def measure(*, turns: int, embedder: str) -> list[dict[str, Any]]:
    """LLM calls with two alternating threads vs the same threads one after the other."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_ctxmgmt import (
        ACMTieredMiddleware,
        DiscourseTreeMiddleware,
        SWinSummaryMiddleware,
        TopicThreadMiddleware,
    )

    counting_model, reply_model = _chat_models()
    script = _thread_script(turns)
    replies = {q: a for pairs in script.values() for q, a in pairs}
    emb = make_embedder(embedder)
    a = [("thread-a", q) for q, _ in script["thread-a"]]
    b = [("thread-b", q) for q, _ in script["thread-b"]]
    orders = {"sequential": a + b, "alternating": [t for pair in zip(a, b, strict=True) for t in pair]}
    middlewares: dict[str, tuple[Any, dict[str, Any]]] = {
        "SWinSummaryMiddleware": (SWinSummaryMiddleware, {}),
        "TopicThreadMiddleware": (TopicThreadMiddleware, {"embedder": emb}),
        "DiscourseTreeMiddleware": (DiscourseTreeMiddleware, {"embedder": emb}),
        # a budget small enough for ACM's cascade to summarise within 24 turns
        "ACMTieredMiddleware": (ACMTieredMiddleware, {"max_tokens": 1000}),
    }
    rows = []
    for name, (cls, kwargs) in middlewares.items():
        calls: dict[str, int] = {}
        seen: dict[str, dict[tuple[str, int], list[str]]] = {}
        for order, script_order in orders.items():
            llm = counting_model()
            model = reply_model(replies=replies)
            agent = create_agent(model, [], middleware=[cls(llm=llm, **kwargs)], checkpointer=InMemorySaver())
            position = {"thread-a": 0, "thread-b": 0}
            contexts = {}
            for thread, text in script_order:
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
                contexts[(thread, position[thread])] = model.received[-1]
                position[thread] += 1
            calls[order] = llm.calls
            seen[order] = contexts
        ratio = calls["alternating"] / calls["sequential"] if calls["sequential"] else float("nan")
        rows.append(
            {
                "middleware": name,
                "turns_per_thread": turns,
                "sequential_llm_calls": calls["sequential"],
                "alternating_llm_calls": calls["alternating"],
                "ratio": ratio,
                "same_contexts": seen["sequential"] == seen["alternating"],
                **({"max_tokens": kwargs["max_tokens"]} if "max_tokens" in kwargs else {}),
            }
        )
        print(f"  {name}: done", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """One line per middleware: LLM calls in both orders, their ratio, whether the contexts matched."""
    return table(
        "thread alternation (create_agent + InMemorySaver, two threads; target ratio 1.00)",
        [
            "middleware",
            "turns/thread",
            "LLM calls one after the other",
            "LLM calls alternating",
            "ratio",
            "same contexts",
        ],
        [
            [
                r["middleware"],
                r["turns_per_thread"],
                r["sequential_llm_calls"],
                r["alternating_llm_calls"],
                f"{r['ratio']:.2f}",
                r["same_contexts"],
            ]
            for r in rows
        ],
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark from the command line; the figures, under ``"threads"``."""
    parser = parser_for(__doc__, SIZES, postgres=False)
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm", help="default minilm")

    def run(args: Any, sizes: dict[str, int], pg: str | None, workdir: Path) -> list[dict[str, Any]]:
        return measure(turns=sizes["thread_turns"], embedder=args.embedder)

    return run_benchmark("threads", parser, SIZES, run, report, argv)


if __name__ == "__main__":
    main()

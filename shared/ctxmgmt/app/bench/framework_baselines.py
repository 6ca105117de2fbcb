"""The memories users of LangChain and LlamaIndex would pick instead, as benchmark baselines.

Each one drives the framework's own code; the frameworks are imported inside the classes, so
importing this module (and the core) never imports a framework.
:func:`ctxmgmt.app.bench.baselines.framework_baselines` lists only those whose framework is
installed and :func:`framework_notes` says which were skipped.

- LlamaIndex ``ChatMemoryBuffer``: the turns' messages as ``ChatMessage`` s, ``get()`` with
  ``token_limit`` = the question's budget.
- LlamaIndex ``ChatSummaryMemoryBuffer``: replayed as a chat engine uses it (put the user
  message, ``get()``, put the reply), with a call-counting fake LLM returning a fixed summary
  and ``token_limit`` = the dialogue's budget; every summarisation is one counted LLM call.
- LangChain ``trim_messages(strategy="last", start_on="human")`` with our token counter and
  ``max_tokens`` = the question's budget.
- LangChain ``SummarizationMiddleware``: its ``before_model`` hook run on the agent state
  before every model call, as ``create_agent`` does, with a call-counting
  ``GenericFakeChatModel``; ``trigger=("tokens", budget)``, ``keep=("tokens", budget // 2)``
  with the dialogue's budget.

Messages carry their turn index (LangChain: ``id``; LlamaIndex: ``additional_kwargs``), so the
output maps back to turns: a turn counts as sent verbatim when all its messages are in the
output; summaries count for answer containment, not for evidence recall.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from typing import Any

from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.strategies.base import Strategy

__all__ = [
    "FAKE_SUMMARY",
    "LangChainSummarizationStrategy",
    "LangChainTrimStrategy",
    "LlamaIndexBufferStrategy",
    "LlamaIndexSummaryStrategy",
    "has_langchain",
    "has_llamaindex",
    "framework_notes",
]

FAKE_SUMMARY = "Summary of the earlier conversation (fixed text of a call-counting fake model)."
"""What the fake summarising models return: their cost is counted, their content is not real."""
DEFAULT_DIALOGUE_BUDGET = 2000
"""Token limit of the summarising baselines when no reference budget is known."""
_TAG = "ctxmgmt-"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def has_llamaindex() -> bool:
    """True when ``llama-index-core`` is installed (its baselines can run)."""
    return _installed("llama_index.core")


def has_langchain() -> bool:
    """True when ``langchain`` (with ``langchain_core``) is installed (its baselines can run)."""
    return _installed("langchain_core") and _installed("langchain.agents")


def framework_notes() -> list[str]:
    """One line per framework baseline group skipped because its framework is missing."""
    notes = []
    if not has_llamaindex():
        notes.append("LlamaIndex baselines skipped: pip install llama-index-core")
    if not has_langchain():
        notes.append("LangChain baselines skipped: pip install langchain")
    return notes


# -- mapping framework output back to turns -------------------------------------------------------


def _build_context(
    strategy: Strategy, query: str, items: Sequence[tuple[int | None, int | None, str, str]], reason: str
) -> Context:
    """A Context from framework output ``(turn, message position, role, text)`` in send order.

    Runs of messages of one turn become a ``turns`` block; a turn with all its messages present
    gets provenance (counts for recall), a partial one is sent text without provenance.
    Untagged messages (summaries) become ``summary`` blocks.
    """
    context = Context(query=query, strategy=strategy.name, history_tokens=strategy.total_tokens)
    turns = strategy.turns
    k = 0
    while k < len(items):
        turn, _pos, role, text = items[k]
        if turn is None:
            message = Message("system" if role == "system" else "user", text)
            context.blocks.append(
                Block(
                    kind="summary",
                    text=text,
                    tokens=message_tokens(strategy.token_counter, message),
                    reason="summary written by the framework (fake model)",
                )
            )
            k += 1
            continue
        run: list[int] = []
        while k < len(items) and items[k][0] == turn:
            run.append(int(items[k][1] or 0))
            k += 1
        whole = sorted(set(run)) == list(range(len(turns[turn].messages)))
        messages = tuple(turns[turn].messages[p] for p in run)
        context.blocks.append(
            Block(
                kind="turns",
                turns=(turn,) if whole else (),
                messages=messages,
                tokens=strategy.tokens_of([turn])
                if whole
                else sum(message_tokens(strategy.token_counter, m) for m in messages),
                reason=reason if whole else f"{reason} (part of turn {turn})",
            )
        )
    # merge adjacent whole-turn blocks into runs for a readable explain()
    merged: list[Block] = []
    for block in context.blocks:
        prev = merged[-1] if merged else None
        if (
            prev is not None
            and block.kind == prev.kind == "turns"
            and block.turns
            and prev.turns
            and prev.turns[-1] == block.turns[0] - 1
        ):
            merged[-1] = Block(
                kind="turns",
                turns=prev.turns + block.turns,
                messages=prev.messages + block.messages,
                tokens=prev.tokens + block.tokens,
                reason=reason,
            )
        else:
            merged.append(block)
    context.blocks = merged
    return context


# -- LlamaIndex -----------------------------------------------------------------------------------


def _llama_message(message: Message, turn: int, pos: int) -> Any:
    from llama_index.core.llms import ChatMessage, MessageRole

    role = {"user": MessageRole.USER, "system": MessageRole.SYSTEM}.get(message.role, MessageRole.ASSISTANT)
    return ChatMessage(role=role, content=message.text, additional_kwargs={"ctxmgmt_turn": turn, "pos": pos})


def _llama_items(messages: Sequence[Any]) -> list[tuple[int | None, int | None, str, str]]:
    items = []
    for m in messages:
        turn = m.additional_kwargs.get("ctxmgmt_turn")
        role = m.role.value if hasattr(m.role, "value") else str(m.role)
        items.append((turn, m.additional_kwargs.get("pos"), role, str(m.content or "")))
    return items


def _llama_tokenizer(counter: TokenCounter) -> Any:
    """LlamaIndex ``tokenizer_fn`` (str -> sized sequence) from our counter: no tiktoken download."""
    return lambda text: range(counter.count(text))


_COUNTING_LLM: Any = None


def counting_llama_llm(summary: str = FAKE_SUMMARY) -> Any:
    """A LlamaIndex ``CustomLLM`` that returns ``summary`` and counts its calls in ``.calls``."""
    global _COUNTING_LLM
    if _COUNTING_LLM is None:
        from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

        class CountingLLM(CustomLLM):
            """Fake LLM for baselines: fixed reply, counted calls."""

            reply: str = FAKE_SUMMARY
            calls: int = 0

            @property
            def metadata(self) -> LLMMetadata:
                return LLMMetadata()

            def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
                self.calls += 1
                return CompletionResponse(text=self.reply)

            def stream_complete(  # type: ignore[override]
                self, prompt: str, formatted: bool = False, **kwargs: Any
            ) -> Iterator[Any]:
                yield self.complete(prompt, formatted=formatted, **kwargs)

        _COUNTING_LLM = CountingLLM
    return _COUNTING_LLM(reply=summary)


class LlamaIndexBufferStrategy(Strategy):
    """LlamaIndex ``ChatMemoryBuffer.get()`` with ``token_limit`` = the budget.

    ``get()`` re-tokenises the joined suffix for every message it drops (quadratic), so it is
    given the newest messages worth at most four times the budget by our count (extended
    until the result is strictly shorter than its input): older messages could never fit,
    and the result is the one ``get()`` returns on the whole history.
    """

    name = "ChatMemoryBuffer"

    def __init__(self, *, token_counter: TokenCounter | Any = None) -> None:
        super().__init__(token_counter=token_counter)
        self._messages: list[Any] = []
        self._message_tokens: list[int] = []

    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            for pos, m in enumerate(turn.messages):
                self._messages.append(_llama_message(m, turn.index, pos))
                self._message_tokens.append(message_tokens(self.token_counter, m))

    def _on_reset(self) -> None:
        self._messages.clear()
        self._message_tokens.clear()

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The messages ``ChatMemoryBuffer.get()`` returns within ``budget`` tokens."""
        from llama_index.core.memory import ChatMemoryBuffer

        if budget is None:
            out = list(self._messages)
        else:
            window = 4 * budget
            while True:
                start, used = len(self._messages), 0
                while start > 0 and used + self._message_tokens[start - 1] <= window:
                    start -= 1
                    used += self._message_tokens[start]
                start = max(0, start - 1)
                memory = ChatMemoryBuffer.from_defaults(
                    chat_history=self._messages[start:],
                    token_limit=budget,
                    tokenizer_fn=_llama_tokenizer(self.token_counter),
                )
                out = memory.get()
                if start == 0 or len(out) < len(self._messages) - start:
                    break
                window *= 2
        return _build_context(self, query, _llama_items(out), "newest messages within token_limit")


class LlamaIndexSummaryStrategy(Strategy):
    """LlamaIndex ``ChatSummaryMemoryBuffer`` replayed as a chat engine drives it.

    Per turn: ``put`` the user message, ``get()`` (where the buffer summarises what no longer
    fits, one LLM call), ``put`` the replies. ``select`` runs ``get()`` once more on a copy.

    Args:
        token_limit: The buffer's ``token_limit``; default :data:`DEFAULT_DIALOGUE_BUDGET`.
        token_counter: Our token counter, also the buffer's ``tokenizer_fn``.
    """

    name = "ChatSummaryMemoryBuffer"

    def __init__(self, *, token_limit: int | None = None, token_counter: TokenCounter | Any = None) -> None:
        super().__init__(token_counter=token_counter)
        self.token_limit = int(token_limit or DEFAULT_DIALOGUE_BUDGET)
        self.llm = counting_llama_llm()
        self._memory = self._new_memory()

    def _new_memory(self) -> Any:
        from llama_index.core.memory import ChatSummaryMemoryBuffer

        return ChatSummaryMemoryBuffer.from_defaults(
            llm=self.llm, token_limit=self.token_limit, tokenizer_fn=_llama_tokenizer(self.token_counter)
        )

    @property
    def llm_calls(self) -> int:
        """Summarisation calls so far."""
        return int(self.llm.calls)

    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            for pos, m in enumerate(turn.messages):
                self._memory.put(_llama_message(m, turn.index, pos))
                if pos == 0:
                    self._memory.get()

    def _on_reset(self) -> None:
        self._memory = self._new_memory()

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """What ``get()`` returns now (the buffer's state is restored afterwards)."""
        snapshot = list(self._memory.get_all())
        out = self._memory.get()
        self._memory.set(snapshot)
        return _build_context(self, query, _llama_items(out), "recent messages within token_limit")


# -- LangChain ------------------------------------------------------------------------------------


def _lc_message(message: Message, turn: int, pos: int) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    cls = {"user": HumanMessage, "system": SystemMessage}.get(message.role, AIMessage)
    return cls(content=message.text, id=f"{_TAG}{turn}-{pos}")


def _lc_items(messages: Sequence[Any]) -> list[tuple[int | None, int | None, str, str]]:
    items: list[tuple[int | None, int | None, str, str]] = []
    for m in messages:
        mid = str(getattr(m, "id", "") or "")
        turn = pos = None
        if mid.startswith(_TAG):
            turn_s, pos_s = mid[len(_TAG) :].split("-")
            turn, pos = int(turn_s), int(pos_s)
        role = "system" if m.type == "system" else "user" if m.type == "human" else "assistant"
        items.append((turn, pos, role, m.text if isinstance(m.content, list) else str(m.content)))
    return items


def lc_token_counter(counter: TokenCounter) -> Any:
    """A LangChain ``token_counter`` (messages -> int) counting as our strategies do."""

    def count(messages: Sequence[Any]) -> int:
        total = 0
        for m in messages:
            text = m.content if isinstance(m.content, str) else m.text
            total += message_tokens(counter, Message("user", text))
        return total

    return count


class LangChainTrimStrategy(Strategy):
    """LangChain ``trim_messages(strategy="last", start_on="human")`` at ``max_tokens`` = budget."""

    name = "trim_messages"

    def __init__(self, *, token_counter: TokenCounter | Any = None) -> None:
        super().__init__(token_counter=token_counter)
        self._messages: list[Any] = []

    def _on_add(self, turns: list[Turn]) -> None:
        self._messages.extend(_lc_message(m, t.index, p) for t in turns for p, m in enumerate(t.messages))

    def _on_reset(self) -> None:
        self._messages.clear()

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The trimmed messages."""
        from langchain_core.messages import trim_messages

        if budget is None:
            out = list(self._messages)
        else:
            out = trim_messages(
                self._messages,
                strategy="last",
                token_counter=lc_token_counter(self.token_counter),
                max_tokens=budget,
                start_on="human",
            )
        return _build_context(self, query, _lc_items(out), "newest messages within max_tokens")


class LangChainSummarizationStrategy(Strategy):
    """LangChain ``SummarizationMiddleware`` as an agent runs it, with a call-counting fake model.

    The agent state is a message list; before every model call (after each user message, and
    for the question) ``before_model`` runs and, over ``trigger`` tokens, replaces the older
    messages with a summary (one counted call) keeping ``keep`` tokens of the newest.

    Args:
        trigger_tokens: ``trigger=("tokens", trigger_tokens)``; ``keep`` is half of it.
        token_counter: Our token counter, also the middleware's ``token_counter``.
    """

    name = "SummarizationMiddleware"

    def __init__(
        self, *, trigger_tokens: int | None = None, token_counter: TokenCounter | Any = None
    ) -> None:
        super().__init__(token_counter=token_counter)
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage

        self.trigger_tokens = int(trigger_tokens or DEFAULT_DIALOGUE_BUDGET)
        self._calls = 0

        def replies() -> Iterator[Any]:
            while True:
                self._calls += 1
                yield AIMessage(content=FAKE_SUMMARY)

        self.model = GenericFakeChatModel(messages=replies())
        self.middleware = SummarizationMiddleware(
            self.model,
            trigger=("tokens", self.trigger_tokens),
            keep=("tokens", max(1, self.trigger_tokens // 2)),
            token_counter=lc_token_counter(self.token_counter),
        )
        self._agent_state: list[Any] = []

    @property
    def llm_calls(self) -> int:
        """Summarisation calls so far."""
        return self._calls

    def _before_model(self, messages: list[Any]) -> list[Any]:
        from langchain_core.messages import RemoveMessage

        update = self.middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
        if not update:
            return messages
        return [m for m in update["messages"] if not isinstance(m, RemoveMessage)]

    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            for pos, m in enumerate(turn.messages):
                self._agent_state.append(_lc_message(m, turn.index, pos))
                if pos == 0:
                    self._agent_state = self._before_model(self._agent_state)

    def _on_reset(self) -> None:
        self._agent_state = []

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """The messages the model would get for ``query`` (the question itself left out)."""
        from langchain_core.messages import HumanMessage

        question = HumanMessage(content=query, id="ctxmgmt-question")
        out = [m for m in self._before_model([*self._agent_state, question]) if m.id != "ctxmgmt-question"]
        return _build_context(self, query, _lc_items(out), "newest messages kept by the middleware")

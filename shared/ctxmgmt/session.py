"""What every adapter shares: query inference, turn grouping, strategy sync and budgeting.

Adapters translate framework messages into :class:`~ctxmgmt.types.Message` and call
:func:`build_context`; nothing here knows a framework.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ctxmgmt.budget import check_budget, message_tokens, messages_tokens, turn_tokens
from ctxmgmt.context import Block, Context
from ctxmgmt.converted import ConvertedHistory, Progress, pick_originals
from ctxmgmt.exceptions import BudgetExceededError
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.types import History, Message, Turn, clean_text, group_turns, split_system


def split_current(turns: Sequence[Turn]) -> tuple[list[Turn], Turn | None]:
    """Split turns into (completed past turns, the turn in progress or None).

    The last turn is in progress unless it ends with a final assistant answer: it holds the
    user's new message, or a tool call waiting for (or just given) its result.
    """
    if turns and not turns[-1].is_complete:
        return list(turns[:-1]), turns[-1]
    return list(turns), None


def infer_query(turns: Sequence[Turn], current: Turn | None, query: str | None) -> str:
    """The query to select for: ``query`` if given, else the newest user message ("" if none).

    A user message with media and no text (e.g. only an image) has no query text, so the
    newest user message that has text is used. A given ``query`` is cleaned like message text
    (:func:`~ctxmgmt.types.clean_text`).
    """
    if query is not None and query.strip():
        return clean_text(query)
    if current is not None and current.query:
        return current.query
    for turn in reversed(turns):
        if turn.query:
            return turn.query
    return ""


def sync_strategy(strategy: Strategy, past: Sequence[Turn]) -> None:
    """Bring ``strategy`` up to date with the completed turns ``past``.

    Appends the new turns when the strategy's turns are a prefix of ``past``; otherwise
    (another conversation, an edited history) resets the strategy and adds every turn,
    reusing content-keyed caches such as embeddings. Every known turn is compared, so an edit
    anywhere is caught. Adapters use :class:`ctxmgmt.sessions.Session` instead, which also
    rewinds only to the edited turn and persists the state.
    """
    known = strategy.turns
    same_prefix = len(known) <= len(past) and all(
        known[i].fingerprint == past[i].fingerprint for i in range(len(known))
    )
    if not same_prefix:
        strategy.reset()
        known = ()
    if len(past) > len(known):
        strategy.add_many(past[len(known) :])


def build_context(
    strategy: Strategy,
    messages: Sequence[Message],
    *,
    query: str | None = None,
    budget: int | None = None,
    sync: Callable[[Sequence[Turn]], None] | None = None,
    grouped: tuple[Sequence[Message], Sequence[Turn]] | None = None,
) -> Context:
    """Select what to send from ``messages`` (the full raw history) for the next model call.

    System messages always come first and the turn in progress always comes last, verbatim;
    the strategy chooses among the completed turns in between, within what is left of
    ``budget`` (tokens; None = no limit). With no query at all (no user message yet) the
    strategy is not consulted and every completed turn is kept, newest first within the budget.

    ``sync`` brings the strategy up to date with the completed turns (default
    :func:`sync_strategy`; adapters pass their :meth:`ctxmgmt.sessions.Session.sync`).
    ``grouped`` is ``(system messages, turns)`` of ``messages`` when the caller keeps them
    grouped already (:class:`ctxmgmt.converted.ConvertedHistory`), so they are not grouped
    again on every call.

    Raises:
        BudgetExceededError: system messages plus the turn in progress exceed ``budget``.
        ConfigurationError: ``budget`` is not a positive int or None.
    """
    budget = check_budget(budget)
    counter = strategy.token_counter
    if grouped is None:
        system, conversation = split_system(messages)
        turns: Sequence[Turn] = group_turns(conversation)
    else:
        system, turns = list(grouped[0]), grouped[1]
    past, current = split_current(turns)
    if sync is None:
        sync_strategy(strategy, past)
    else:
        sync(past)
    question = infer_query(past, current, query)

    fixed = messages_tokens(counter, system) + (turn_tokens(counter, current) if current else 0)
    if budget is not None and fixed > budget:
        raise BudgetExceededError(
            f"the system messages and the current turn need {fixed} tokens, more than the "
            f"budget of {budget}; raise the budget or shorten the current message"
        )
    remaining = None if budget is None else budget - fixed
    if question:
        selected = strategy.select(question, budget=remaining)
    else:
        selected = _recent_within(strategy, remaining)

    blocks: list[Block] = []
    if system:
        blocks.append(
            Block(
                "system",
                messages=tuple(system),
                tokens=messages_tokens(counter, system),
                reason="system prompt",
            )
        )
    blocks.extend(selected.blocks)
    if current is not None:
        index = len(past)
        blocks.append(
            Block(
                "current",
                turns=(index,),
                messages=current.messages,
                tokens=turn_tokens(counter, current),
                reason="turn in progress",
            )
        )
    return Context(
        query=question,
        blocks=blocks,
        history_tokens=fixed + strategy.total_tokens,
        strategy=strategy.name,
        details=selected.details,
    )


T = TypeVar("T")


def view_context(
    session: Any,
    view: ConvertedHistory[Any],
    *,
    query: str | None,
    budget: int | None,
    progress: Progress | None = None,
) -> Context:
    """:func:`build_context` over ``view`` (a session's converted history), catching up in batches.

    The adapters' one selection path: ``view`` must be up to date with the caller's messages
    (:meth:`ConvertedHistory.update`) and the caller holds ``session.lock`` and ``view.lock``.
    A long history reaching a fresh session is derived in batches (:meth:`ConvertedHistory.sync`), with
    ``progress``.
    """
    return build_context(
        session.strategy,
        view.messages,
        query=query,
        budget=budget,
        sync=lambda past: view.sync(session, past, progress),
        grouped=view.grouped(),
    )


def select_originals(
    context: Context,
    converted: Sequence[Message],
    originals: Sequence[T],
    text_block: Callable[[Block], list[T]],
) -> list[T]:
    """The caller's own message objects for what ``context`` selected, in block order.

    The one provenance scheme of every adapter: ``converted[i]`` is the core form of
    ``originals[i]``; verbatim blocks name turns by their index among the turns of
    ``converted`` (grouped as :func:`build_context` groups them), so a turn always comes back
    whole, as the caller's objects (ids and metadata included). System blocks map to the
    system messages; text blocks (summaries, entities) become what ``text_block`` makes.
    """
    if len(converted) != len(originals):
        raise ValueError("converted and originals differ in length")
    original_of = {id(c): o for c, o in zip(converted, originals, strict=True)}
    system, conversation = split_system(list(converted))
    turns = [[original_of[id(m)] for m in turn.messages] for turn in group_turns(conversation)]
    return pick_originals(context, [original_of[id(m)] for m in system], turns, text_block)


def _recent_within(strategy: Strategy, budget: int | None) -> Context:
    turns = strategy.turns
    keep: list[int] = []
    used = 0
    for turn in reversed(turns):
        cost = strategy.tokens_of([turn.index])
        if budget is not None and used + cost > budget:
            break
        keep.append(turn.index)
        used += cost
    keep.reverse()
    context = Context(query="", strategy=strategy.name, history_tokens=strategy.total_tokens)
    if keep:
        context.blocks.append(strategy.turns_block(keep, "no query yet: most recent turns"))
    return context


class ConversationMemory:
    """A lossless :class:`History` plus a strategy: the core of every memory class.

    Thread-safe for one conversation. Adapters that keep history elsewhere (a LlamaIndex chat
    store, agent state) call :func:`build_context` directly with their messages.

    Args:
        strategy: The selection strategy.
        budget: Default token budget per context (None = no limit).

    Example:
        >>> from ctxmgmt import KadaneDialStrategy
        >>> memory = ConversationMemory(KadaneDialStrategy())  # doctest: +SKIP
        >>> memory.add_messages([Message("user", "hi"), Message("assistant", "hello")])  # doctest: +SKIP
        >>> memory.select("hi").messages()  # doctest: +SKIP
    """

    def __init__(self, strategy: Strategy, *, budget: int | None = None) -> None:
        self.strategy = strategy
        self.budget = check_budget(budget)
        self.history = History()
        self._lock = threading.RLock()
        self._open: list[Message] = []

    def add_messages(self, messages: Iterable[Message]) -> None:
        """Append messages to the history; every turn they close is added to the strategy.

        A turn is closed once the next user message arrives, so the work per call depends
        only on the new messages, not on the length of the history.
        """
        with self._lock:
            new = list(messages)
            self.history.extend(new)
            self._open.extend(m for m in new if m.role != "system")
            turns = group_turns(self._open)
            if len(turns) > 1:
                self.strategy.add_many(turns[:-1])
                self._open = list(turns[-1].messages)

    def select(self, query: str | None = None, *, budget: int | None = None) -> Context:
        """Context for ``query`` (default: the newest user message) within ``budget`` tokens."""
        with self._lock:
            return build_context(
                self.strategy,
                self.history.messages,
                query=query,
                budget=self.budget if budget is None else budget,
            )

    def clear(self) -> None:
        """Forget the conversation."""
        with self._lock:
            self.history = History()
            self._open = []
            self.strategy.reset()

    def message_tokens(self, message: Message) -> int:
        """Tokens of one message with this memory's counter."""
        return message_tokens(self.strategy.token_counter, message)

    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: the raw history (derived state is rebuilt on load)."""
        return {"history": self.history.to_state(), "budget": self.budget}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output."""
        with self._lock:
            self.clear()
            self.budget = check_budget(state.get("budget"))
            self.add_messages(History.from_state(state["history"]))

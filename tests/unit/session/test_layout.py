"""Stable layouts (ctxmgmt.session.layout) and the receipt's stable-prefix tokens."""

from __future__ import annotations

from collections.abc import Sequence

from ctxmgmt import KadaneDialStrategy, Message, Turn
from ctxmgmt.components.budget import messages_tokens
from ctxmgmt.messages.context import Context
from ctxmgmt.session.layout import KEPT, arrange, stable_prefix_tokens, uses_layout
from ctxmgmt.session.selection import compose_context
from ctxmgmt.strategies.base import Strategy

SYSTEM = (Message("system", "You are a helpful assistant."),)


class Scripted(Strategy):
    """Selects the turns scripted for each query, chronologically (one block per turn)."""

    name = "kadanedial"

    def __init__(self, script: dict[str, Sequence[int]]) -> None:
        super().__init__()
        self.script = script

    def _on_add(self, turns: list[Turn]) -> None:
        return None

    def _on_reset(self) -> None:
        return None

    def select(self, query: str, *, budget: int | None = None) -> Context:
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        for i in sorted(self.script.get(query, ())):
            context.blocks.append(self.turns_block([i], f"scripted for {query!r}"))
        return context


def turns(n: int, words: int = 60) -> list[Turn]:
    """``n`` turns of about ``words`` tokens each."""
    body = " ".join(["word"] * words)
    return [
        Turn(i, (Message("user", f"question {i} {body}"), Message("assistant", f"answer {i} {body}")))
        for i in range(n)
    ]


def filled(script: dict[str, Sequence[int]], n: int = 40) -> Scripted:
    strategy = Scripted(script)
    strategy.add_many(turns(n))
    return strategy


def middle(context: Context) -> list[int]:
    return [i for b in context.blocks if b.kind == "turns" for i in b.turns]


def call(strategy: Strategy, query: str, previous: Context | None, **kwargs) -> Context:
    """One call laid out (``stable=True``, as ``cache_friendly=True`` does) unless told otherwise."""
    kwargs.setdefault("stable", True)
    current = Turn(len(strategy.turns), (Message("user", query),))
    return compose_context(strategy, SYSTEM, strategy.turns, current, previous=previous, **kwargs)


def test_kept_units_stay_in_front_and_new_ones_follow() -> None:
    strategy = filled({"a": range(10, 20), "b": [0, 1, *range(12, 20)]})
    first = call(strategy, "a", None)
    assert middle(first) == list(range(10, 20))
    second = call(strategy, "b", first)
    # 10 and 11 are no longer selected but stay in place (cached prefix); 0, 1 follow
    assert middle(second) == [*range(10, 20), 0, 1]
    assert second.details["layout"] == {"rebuilt": False, "kept": 10, "stale": 2, "new": 2}
    assert all(b.reason.startswith(KEPT) for b in second.blocks if b.kind == "turns" and b.turns[0] >= 10)
    assert set(middle(strategy.select("b"))) <= set(middle(second))  # nothing selected is left out
    assert second.details["stable_prefix_tokens"] == messages_tokens(
        strategy.token_counter, first.messages()[:-1]
    )


def test_past_the_growth_limit_the_selection_is_sent_as_is() -> None:
    strategy = filled({"a": range(0, 20), "b": range(30, 34)})
    first = call(strategy, "a", None)
    second = call(strategy, "b", first)
    assert middle(second) == list(range(30, 34))  # 20 stale turns: over twice the selection
    assert second.details["layout"]["rebuilt"]
    assert second.details["stable_prefix_tokens"] == messages_tokens(strategy.token_counter, SYSTEM)


def test_a_budget_limits_what_is_kept() -> None:
    strategy = filled({"a": range(10, 20), "b": range(12, 22)})
    first = call(strategy, "a", None)
    selected = strategy.tokens_of(range(12, 22)) + messages_tokens(strategy.token_counter, SYSTEM)
    second = call(strategy, "b", first, budget=selected + 40)
    assert middle(second) == list(range(12, 22))
    assert second.tokens <= selected + 40


def test_small_contexts_are_not_laid_out() -> None:
    strategy = filled({"a": [3], "b": [1]})
    first = call(strategy, "a", None)
    assert middle(call(strategy, "b", first)) == [1]  # 3 is too small to be cached: not kept


def test_without_a_layout_the_selection_is_unchanged() -> None:
    strategy = filled({"a": range(10, 20), "b": [0, 1, *range(12, 20)]})
    first = call(strategy, "a", None)
    second = call(strategy, "b", first, stable=False)
    assert middle(second) == [0, 1, *range(12, 20)]
    assert "layout" not in second.details


def test_edited_history_is_not_kept() -> None:
    strategy = filled({"a": range(10, 20), "b": range(0, 4)})
    first = call(strategy, "a", None)
    edited = turns(40)
    edited[12] = Turn(12, (Message("user", "something else entirely"),))
    strategy.reset()
    strategy.add_many(edited)
    second = call(strategy, "b", first)
    assert middle(second) == [0, 1, 2, 3]
    assert second.details["layout"]["rebuilt"]


def test_arrange_first_call_is_the_selection() -> None:
    strategy = filled({"a": [5, 9]})
    blocks, done = arrange(strategy, strategy.select("a").blocks, None)
    assert [b.turns for b in blocks] == [(5,), (9,)]
    assert done["rebuilt"]


def test_stable_prefix_counts_whole_leading_messages() -> None:
    strategy = filled({})
    counter = strategy.token_counter
    a, b, c = (Message("user", "one"), Message("assistant", "two"), Message("user", "three"))
    assert stable_prefix_tokens(counter, [a, b, c], None) == 0
    assert stable_prefix_tokens(counter, [a, b, c], [a, b]) == messages_tokens(counter, [a, b])
    assert stable_prefix_tokens(counter, [a, c], [a, b, c]) == messages_tokens(counter, [a])
    assert stable_prefix_tokens(counter, [c], [a]) == 0


def test_receipt_carries_the_stable_prefix() -> None:
    strategy = filled({"a": range(10, 20)})
    first = call(strategy, "a", None)
    assert first.receipt()["stable_prefix_tokens"] == 0
    second = call(strategy, "a", first)  # the same call again (a tool loop's next call): all of it
    assert second.receipt()["stable_prefix_tokens"] == first.tokens == second.tokens


def test_no_strategy_is_laid_out_by_default(hashing_embedder) -> None:
    from ctxmgmt.strategies.acm import ACMStrategy
    from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
    from ctxmgmt.strategies.swin import SWinStrategy
    from ctxmgmt.strategies.topic_thread import TopicThreadStrategy

    for cls in (KadaneDialStrategy, DiscourseTreeStrategy, TopicThreadStrategy):
        assert not uses_layout(cls(embedder=hashing_embedder))
        assert uses_layout(cls(embedder=hashing_embedder, cache_friendly=True))
    assert not uses_layout(SWinStrategy()) and not uses_layout(ACMStrategy())
    assert not uses_layout(Scripted({}))


def test_a_user_message_sent_alone_is_its_turns_unit_and_never_merged_whole() -> None:
    strategy = filled({})
    whole = strategy.turns_block([5], "scripted")
    part = strategy.user_part_block(6, "scripted; reply left out for the budget")
    blocks, _ = arrange(strategy, [whole, part, strategy.turns_block([7], "scripted")], None)
    assert [(b.turns, b.reply_left_out) for b in blocks] == [((5,), False), ((6,), True), ((7,), False)]
    assert blocks[1].messages == strategy.turns[6].messages[:1]
    # a later call selects turn 9 whole: it takes the place of its user message, never both
    earlier = [strategy.turns_block(list(range(9)), "a"), strategy.user_part_block(9, "a; reply left out")]
    previous = Context(query="a", blocks=earlier)
    again, layout = arrange(strategy, [strategy.turns_block(list(range(10)), "b")], previous)
    sent = [m for b in again for m in b.messages]
    assert sent == [m for t in strategy.turns[:10] for m in t.messages]
    assert layout == {"rebuilt": False, "kept": 10, "stale": 0, "new": 0}

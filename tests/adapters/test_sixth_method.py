"""A sixth method takes a strategy, a registry line and one-line declarations (one per adapter kind).

``KeywordStrategy`` is a toy method (turns that share words with the question). Declared once
per adapter kind, it passes the same contract suites as the five methods, through the real
frameworks: ``create_agent``, classic memories in chains, LlamaIndex chat engines and
``Memory`` blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import Context, Strategy, StrategyConfig, registry
from ctxmgmt.app.bench.data import Dialogue, Question
from ctxmgmt.app.bench.runner import run_all
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.strategies.params import param
from tests.adapters.test_framework_contract import (
    LangChainClassicContract,
    LangChainMiddlewareContract,
    LlamaIndexBlockContract,
    LlamaIndexMemoryContract,
)
from tests.adapters.test_selector_contract import LangChainSelectorContract

_WORD = re.compile(r"[a-z]{3,}")
_STOP = frozenset("the and you did was are for what that have with your this from".split())


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _STOP


@dataclass(frozen=True, kw_only=True)
class KeywordConfig(StrategyConfig):
    """Parameters of :class:`KeywordStrategy`."""

    min_shared: int = param(1, "Words (3+ letters) a turn must share with the question.", ge=1)


class KeywordStrategy(Strategy):
    """Turns that share at least ``min_shared`` words with the question, newest first within the budget."""

    name = "keyword"
    config_class = KeywordConfig
    budget_only_trims = True

    def __init__(self, config: KeywordConfig | None = None, **kwargs: Any) -> None:
        self._words: list[set[str]] = []
        super().__init__(config, **kwargs)

    def _on_add(self, turns: list[Turn]) -> None:
        self._words.extend(_words(t.text) for t in turns)

    def _on_reset(self) -> None:
        self._words = []

    def select(self, query: str, *, budget: int | None = None) -> Context:
        asked = _words(query)
        keep: list[int] = []
        used = 0
        for i in reversed(range(len(self._words))):
            cost = self.tokens_of([i])
            if len(asked & self._words[i]) >= self.min_shared and (budget is None or used + cost <= budget):
                keep.append(i)
                used += cost
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        if keep:
            context.blocks.append(self.turns_block(sorted(keep), "shares words with the question"))
        return context


# The declarations a new method needs (beside its strategy and its registry line).
class KeywordMiddleware(lc.StrategyMiddleware, strategy=KeywordStrategy): ...


class KeywordSelector(lc.StrategySelector, strategy=KeywordStrategy): ...


class KeywordMemory(lc.StrategyMemory, strategy=KeywordStrategy): ...


class KeywordChatMemory(li.StrategyMemory, strategy=KeywordStrategy): ...


class KeywordBlock(li.StrategyMemoryBlock, strategy=KeywordStrategy): ...


def test_the_registry_line_is_all_the_benchmark_needs(monkeypatch):
    monkeypatch.setitem(registry.MEMORIES, "KeywordMemory", KeywordStrategy)
    turns = [
        Turn(i, (Message("user", user), Message("assistant", "Noted.")))
        for i, user in enumerate(
            ["I adopted a grey cat named Miso.", "My car engine rattles.", "I like tea."]
        )
    ]
    dialogue = Dialogue("toy", turns, [Question("What is my grey cat called?", "Miso", (0,))])
    (result,) = run_all(
        [dialogue], memories={"KeywordMemory": registry.MEMORIES["KeywordMemory"]}, full_history=False
    )
    assert result.memory == "KeywordMemory"
    assert result.summary()["evidence_recall"] == 1.0


def test_declarations_take_the_parameters_and_defaults():
    assert KeywordMiddleware(min_shared=2).strategy.min_shared == 2
    assert KeywordMemory().strategy.min_shared == 1
    assert KeywordChatMemory.from_defaults(min_shared=3).strategy.min_shared == 3
    block = KeywordBlock()
    assert block.name == "keyword" and block.output == "messages"


class TestKeywordMiddleware(LangChainMiddlewareContract):
    middleware_class = KeywordMiddleware


class TestKeywordClassic(LangChainClassicContract):
    memory_class = KeywordMemory


class TestKeywordChatMemory(LlamaIndexMemoryContract):
    memory_class = KeywordChatMemory


class TestKeywordBlock(LlamaIndexBlockContract):
    block_class = KeywordBlock


class TestKeywordSelector(LangChainSelectorContract):
    selector_class = KeywordSelector

"""The memories the demo and the benchmark run (``ctxmgmt.strategies.registry``)."""

from __future__ import annotations

from ctxmgmt.strategies import (
    ACMStrategy,
    DiscourseTreeStrategy,
    KadaneDialStrategy,
    SWinStrategy,
    TopicThreadStrategy,
)
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.registry import MEMORIES, REFERENCES


def test_every_method_is_registered_once_by_its_memory_name() -> None:
    assert MEMORIES == {
        "KadaneDialMemory": KadaneDialStrategy,
        "SWinSummaryBuffer": SWinStrategy,
        "ACMTieredBuffer": ACMStrategy,
        "DiscourseTreeMemory": DiscourseTreeStrategy,
        "TopicThreadMemory": TopicThreadStrategy,
    }


def test_every_factory_is_a_strategy_class_with_embedded_defaults() -> None:
    for factory in MEMORIES.values():
        assert isinstance(factory, type) and issubclass(factory, Strategy)
        assert factory.config_class.build(None) == factory.config_class.build(None)


def test_the_paper_reference_builds_kadanedial_with_the_papers_settings() -> None:
    (factory,) = REFERENCES.values()
    strategy = factory()
    assert isinstance(strategy, KadaneDialStrategy) and isinstance(strategy, Strategy)
    paper = KadaneDialStrategy.from_paper()
    assert strategy.config == paper.config

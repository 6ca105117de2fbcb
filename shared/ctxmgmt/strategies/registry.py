"""The memories the demo and the benchmark run, by the class name users see."""

from __future__ import annotations

from collections.abc import Callable

from ctxmgmt.strategies import (
    ACMStrategy,
    DiscourseTreeStrategy,
    KadaneDialStrategy,
    SWinStrategy,
    TopicThreadStrategy,
)
from ctxmgmt.strategies.base import Strategy

StrategyFactory = Callable[[], Strategy]

MEMORIES: dict[str, StrategyFactory] = {
    "KadaneDialMemory": KadaneDialStrategy,
    "SWinSummaryBuffer": SWinStrategy,
    "ACMTieredBuffer": ACMStrategy,
    "DiscourseTreeMemory": DiscourseTreeStrategy,
    "TopicThreadMemory": TopicThreadStrategy,
}
"""Every memory with its embedded defaults."""

REFERENCES: dict[str, StrategyFactory] = {
    "KadaneDial (paper settings)": KadaneDialStrategy.from_paper,
}
"""Variants shown beside the memories for reference."""

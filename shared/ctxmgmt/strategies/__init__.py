"""One strategy per method; each keeps plain-data derived state."""

from ctxmgmt.strategies.acm import ACMStrategy
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy
from ctxmgmt.strategies.swin import SWinStrategy
from ctxmgmt.strategies.topic_thread import TopicThreadStrategy

__all__ = [
    "ACMStrategy",
    "DiscourseTreeStrategy",
    "KadaneDialStrategy",
    "SWinStrategy",
    "Strategy",
    "TopicThreadStrategy",
]

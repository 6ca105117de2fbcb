"""One strategy per method; each keeps plain-data derived state."""

from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy
from ctxmgmt.strategies.swin import SWinStrategy

__all__ = ["KadaneDialStrategy", "SWinStrategy", "Strategy"]

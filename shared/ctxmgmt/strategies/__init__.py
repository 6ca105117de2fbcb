"""One strategy per method; each keeps plain-data derived state."""

from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.kadanedial import KadaneDialStrategy

__all__ = ["KadaneDialStrategy", "Strategy"]

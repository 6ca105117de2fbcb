"""ctxmgmt: choose the right part of a long conversation for the next LLM call.

The framework-free core. Adapters live in ``langchain_ctxmgmt`` and ``llamaindex_ctxmgmt``.
"""

from ctxmgmt.components.embedder import warm_up
from ctxmgmt.context import Block, Context
from ctxmgmt.exceptions import (
    BudgetExceededError,
    ComponentError,
    ConfigurationError,
    CtxMgmtError,
    InvalidMessageError,
)
from ctxmgmt.kadane import KadaneResult, kadane_dial
from ctxmgmt.memory import ConversationMemory
from ctxmgmt.params import StrategyConfig
from ctxmgmt.selection import build_context
from ctxmgmt.strategies import (
    ACMStrategy,
    DiscourseTreeStrategy,
    KadaneDialStrategy,
    Strategy,
    SWinStrategy,
    TopicThreadStrategy,
)
from ctxmgmt.types import History, Message, Turn, group_turns

__version__ = "0.1.0"

__all__ = [
    "ACMStrategy",
    "Block",
    "BudgetExceededError",
    "ComponentError",
    "ConfigurationError",
    "Context",
    "ConversationMemory",
    "CtxMgmtError",
    "DiscourseTreeStrategy",
    "History",
    "InvalidMessageError",
    "KadaneDialStrategy",
    "KadaneResult",
    "Message",
    "SWinStrategy",
    "Strategy",
    "StrategyConfig",
    "TopicThreadStrategy",
    "Turn",
    "__version__",
    "build_context",
    "group_turns",
    "kadane_dial",
    "warm_up",
]

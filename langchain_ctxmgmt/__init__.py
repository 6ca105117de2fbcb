"""LangChain adapters of ctxmgmt: classic memories, ``create_agent`` middlewares and selectors (Runnables).

Install with ``pip install "ctxmgmt[langchain]"``.
"""

from __future__ import annotations

try:
    import langchain  # noqa: F401
    import langchain_classic  # noqa: F401
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f'langchain_ctxmgmt needs LangChain ({exc.name} is missing): pip install "ctxmgmt[langchain]"'
    ) from exc

from langchain_ctxmgmt._base import StrategyMemory  # noqa: E402
from langchain_ctxmgmt._middleware import StrategyMiddleware  # noqa: E402
from langchain_ctxmgmt._selector import StrategySelector  # noqa: E402
from langchain_ctxmgmt.acm_memory import ACMTieredBuffer  # noqa: E402
from langchain_ctxmgmt.acm_middleware import ACMTieredMiddleware  # noqa: E402
from langchain_ctxmgmt.acm_selector import ACMTieredSelector  # noqa: E402
from langchain_ctxmgmt.discourse_tree_memory import DiscourseTreeMemory  # noqa: E402
from langchain_ctxmgmt.discourse_tree_middleware import DiscourseTreeMiddleware  # noqa: E402
from langchain_ctxmgmt.discourse_tree_selector import DiscourseTreeSelector  # noqa: E402
from langchain_ctxmgmt.kadanedial_memory import KadaneDialMemory  # noqa: E402
from langchain_ctxmgmt.kadanedial_middleware import KadaneDialMiddleware  # noqa: E402
from langchain_ctxmgmt.kadanedial_selector import KadaneDialSelector  # noqa: E402
from langchain_ctxmgmt.swin_memory import SWinSummaryBuffer  # noqa: E402
from langchain_ctxmgmt.swin_middleware import SWinSummaryMiddleware  # noqa: E402
from langchain_ctxmgmt.swin_selector import SWinSummarySelector  # noqa: E402
from langchain_ctxmgmt.topic_thread_memory import TopicThreadMemory  # noqa: E402
from langchain_ctxmgmt.topic_thread_middleware import TopicThreadMiddleware  # noqa: E402
from langchain_ctxmgmt.topic_thread_selector import TopicThreadSelector  # noqa: E402

__all__ = [
    "ACMTieredBuffer",
    "ACMTieredMiddleware",
    "ACMTieredSelector",
    "DiscourseTreeMemory",
    "DiscourseTreeMiddleware",
    "DiscourseTreeSelector",
    "KadaneDialMemory",
    "KadaneDialMiddleware",
    "KadaneDialSelector",
    "SWinSummaryBuffer",
    "SWinSummaryMiddleware",
    "SWinSummarySelector",
    "StrategyMemory",
    "StrategyMiddleware",
    "StrategySelector",
    "TopicThreadMemory",
    "TopicThreadMiddleware",
    "TopicThreadSelector",
]

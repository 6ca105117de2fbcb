"""LangChain adapters of ctxmgmt: classic memories and ``create_agent`` middlewares.

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

from langchain_ctxmgmt.kadanedial_memory import KadaneDialMemory  # noqa: E402
from langchain_ctxmgmt.kadanedial_middleware import KadaneDialMiddleware  # noqa: E402
from langchain_ctxmgmt.swin_memory import SWinSummaryBuffer  # noqa: E402
from langchain_ctxmgmt.swin_middleware import SWinSummaryMiddleware  # noqa: E402

__all__ = ["KadaneDialMemory", "KadaneDialMiddleware", "SWinSummaryBuffer", "SWinSummaryMiddleware"]

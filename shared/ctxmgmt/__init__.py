"""ctxmgmt: choose the right part of a long conversation for the next LLM call.

The framework-free core. Adapters live in ``langchain_ctxmgmt`` and ``llamaindex_ctxmgmt``.

The core comes in eight parts, each a package, listed from the bottom up; a part imports only
the parts below it (``docs/architecture.md`` draws them, ``tests/unit/test_import_loops.py``
holds the order):

- ``messages``: messages, turns, contexts and their pictures, text bounds, dates, errors;
- ``scoring``: relevance of past turns (BM25, vectors, dense fusion, Kadane spans);
- ``components``: token counters and budgets, embedders, summarisers, entity extractors, deciders;
- ``strategies``: the five methods, their parameters and registry;
- ``adapter``: the kit both framework adapters are built from (fields, thread pools, copies);
- ``store``: where derived state is kept (memory, SQLite, PostgreSQL);
- ``session``: one conversation over time (history, derived state, background index, selection);
- ``app``: the ``ctxmgmt`` command, the benchmark, and the shared test doubles.

Modules that lived at the top level before round 4 are still importable by their old names
(``ctxmgmt.conversation`` is ``ctxmgmt.session.conversation``, the same module object); every old
name but ``ctxmgmt.testing`` warns with a ``DeprecationWarning`` and goes in the next release.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types as _types
import warnings

from ctxmgmt.components.embedder import warm_up
from ctxmgmt.messages.context import Block, Context
from ctxmgmt.messages.exceptions import (
    BudgetExceededError,
    ComponentError,
    ConfigurationError,
    CtxMgmtError,
    InvalidMessageError,
)
from ctxmgmt.messages.history import History, group_turns
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.scoring.kadane import KadaneResult, kadane_dial
from ctxmgmt.session.memory import ConversationMemory
from ctxmgmt.session.selection import build_context
from ctxmgmt.strategies import (
    ACMStrategy,
    DiscourseTreeStrategy,
    KadaneDialStrategy,
    Strategy,
    SWinStrategy,
    TopicThreadStrategy,
)
from ctxmgmt.strategies.params import StrategyConfig

__version__ = "0.1.0"

#: Old top-level module name -> its module in the parts layout (round 4).
MOVED_MODULES: dict[str, str] = {
    "ctxmgmt.backlog": "ctxmgmt.session.backlog",
    "ctxmgmt.bench": "ctxmgmt.app.bench",
    "ctxmgmt.budget": "ctxmgmt.components.budget",
    "ctxmgmt.cli": "ctxmgmt.app.cli",
    "ctxmgmt.components.vectors": "ctxmgmt.scoring.vectors",
    "ctxmgmt.context": "ctxmgmt.messages.context",
    "ctxmgmt.conversation": "ctxmgmt.session.conversation",
    "ctxmgmt.converted": "ctxmgmt.session.converted",
    "ctxmgmt.copying": "ctxmgmt.adapter.copying",
    "ctxmgmt.data": "ctxmgmt.app.data",
    "ctxmgmt.dates": "ctxmgmt.messages.dates",
    "ctxmgmt.demo": "ctxmgmt.app.demo",
    "ctxmgmt.exceptions": "ctxmgmt.messages.exceptions",
    "ctxmgmt.forest_render": "ctxmgmt.strategies.forest_render",
    "ctxmgmt.framing": "ctxmgmt.messages.framing",
    "ctxmgmt.kadane": "ctxmgmt.scoring.kadane",
    "ctxmgmt.layout": "ctxmgmt.session.layout",
    "ctxmgmt.lexical": "ctxmgmt.scoring.lexical",
    "ctxmgmt.memory": "ctxmgmt.session.memory",
    "ctxmgmt.offload": "ctxmgmt.adapter.offload",
    "ctxmgmt.params": "ctxmgmt.strategies.params",
    "ctxmgmt.plot": "ctxmgmt.messages.plot",
    "ctxmgmt.registry": "ctxmgmt.strategies.registry",
    "ctxmgmt.relevance": "ctxmgmt.scoring.relevance",
    "ctxmgmt.rows": "ctxmgmt.scoring.rows",
    "ctxmgmt.selection": "ctxmgmt.session.selection",
    "ctxmgmt.spans": "ctxmgmt.messages.spans",
    "ctxmgmt.stored_state": "ctxmgmt.session.stored_state",
    "ctxmgmt.testing": "ctxmgmt.app.testing",
    "ctxmgmt.text_bounds": "ctxmgmt.messages.text_bounds",
    "ctxmgmt.timestamps": "ctxmgmt.messages.timestamps",
    "ctxmgmt.tool_args": "ctxmgmt.messages.tool_args",
    "ctxmgmt.types": "ctxmgmt.messages.types",
    "ctxmgmt.vector_text": "ctxmgmt.scoring.vector_text",
}
#: Old names that stay without a warning: public paths.
KEPT_NAMES = frozenset({"ctxmgmt.testing"})


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import an old module name as its moved module (the same object, so settings stick)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> _types.ModuleType:
        return _types.ModuleType(spec.name)

    def exec_module(self, module: _types.ModuleType) -> None:
        new = MOVED_MODULES[module.__name__]
        if module.__name__ not in KEPT_NAMES:
            warnings.warn(
                f"{module.__name__} moved to {new}; the old name goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
        # the import system returns whatever sys.modules holds once this returns
        sys.modules[module.__name__] = importlib.import_module(new)


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())

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

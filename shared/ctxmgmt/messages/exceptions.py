"""Errors raised by ctxmgmt.

Every error derives from :class:`CtxMgmtError`; usage mistakes are also ``ValueError``
so that callers who already catch ``ValueError`` keep working.
"""

from __future__ import annotations


class CtxMgmtError(Exception):
    """Base class of every error ctxmgmt raises."""


class ConfigurationError(CtxMgmtError, ValueError):
    """A parameter is invalid (wrong range, wrong type, unknown option)."""


class InvalidMessageError(CtxMgmtError, ValueError):
    """A message cannot be used: None content, no text and no media, unknown block, unknown role.

    Text is required unless the message carries media, tool calls or is a tool result;
    images, audio, video and files are valid content.
    """


class BudgetExceededError(CtxMgmtError, ValueError):
    """What must be sent (the current turn) does not fit in the token budget."""


class CorruptStateError(CtxMgmtError, ValueError):
    """Saved derived state cannot be used (a vector that is not finite, of another size, ...).

    A session restoring from a store treats it as a corrupt record: it warns and rebuilds.
    """


class ComponentError(CtxMgmtError, RuntimeError):
    """A component backend (embedder, token counter, model weights) failed to load or run."""

"""How the ``as_*`` functions turn what users pass as a component into one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxmgmt.messages.exceptions import ConfigurationError


def as_component(
    obj: Any,
    kind: Any,
    default: Callable[[], Any],
    wrap: Callable[[Any], Any],
    what: str,
) -> Any:
    """``default()`` for None, ``obj`` if it is a ``kind`` (an instance), ``wrap(obj)`` for a callable.

    A class is neither a component nor a callable to wrap.

    Args:
        obj: What the user passed.
        kind: The component's runtime-checkable protocol.
        default: Builds the default component.
        wrap: Wraps a callable as the component.
        what: The parameter and what it accepts, for the error: ``"decider must be a Decider,
            a prompt -> text callable or None"``.

    Returns:
        The component (typed by the caller's ``as_*`` function).

    Raises:
        ConfigurationError: For anything else.
    """
    if obj is None:
        return default()
    if not isinstance(obj, type):
        if isinstance(obj, kind):
            return obj
        if callable(obj):
            return wrap(obj)
    raise ConfigurationError(f"{what}; got {type(obj).__name__}")


def component_name(component: Any) -> str:
    """How errors and stored states name a component.

    Its ``name`` attribute, else a tokenizer's ``encoding_name``, else its class name.
    """
    for attribute in ("name", "encoding_name"):
        value = getattr(component, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(component).__name__


def check_int(value: Any, name: str, minimum: int = 1) -> int:
    """``value`` when it is an int (not a bool) of at least ``minimum``.

    Raises:
        ConfigurationError: ``"<name> must be an int >= <minimum>, got <value!r>"``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value

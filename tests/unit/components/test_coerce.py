"""How the ``as_*`` functions turn what users pass into a component (``ctxmgmt.components._coerce``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pytest

from ctxmgmt.components._coerce import as_component, check_int, component_name
from ctxmgmt.components.tokens import TiktokenCounter
from ctxmgmt.messages.exceptions import ConfigurationError, CtxMgmtError


@runtime_checkable
class Greeter(Protocol):
    def greet(self, name: str) -> str: ...


class Hello:
    def greet(self, name: str) -> str:
        return f"hello {name}"


class Wrapped:
    def __init__(self, fn) -> None:
        self.fn = fn

    def greet(self, name: str) -> str:
        return self.fn(name)


WHAT = "greeter must be a Greeter, a name -> text callable or None"


def coerce(obj):
    return as_component(obj, Greeter, Hello, Wrapped, WHAT)


def test_none_is_the_default() -> None:
    assert isinstance(coerce(None), Hello)


def test_a_component_is_used_as_it_is() -> None:
    hello = Hello()
    assert coerce(hello) is hello


def test_a_callable_is_wrapped() -> None:
    greeter = coerce(lambda name: f"hi {name}")
    assert isinstance(greeter, Wrapped) and greeter.greet("Ana") == "hi Ana"


@pytest.mark.parametrize("bad", [Hello, 42, "hello"])
def test_a_class_or_anything_else_is_a_configuration_error(bad) -> None:
    with pytest.raises(ConfigurationError, match=f"{WHAT}; got"):
        coerce(bad)
    with pytest.raises(CtxMgmtError):
        coerce(bad)


def test_component_name_prefers_name_then_encoding_name_then_the_class() -> None:
    named = type("Named", (), {"name": "my-model"})()
    assert component_name(named) == "my-model"
    assert component_name(TiktokenCounter()) == TiktokenCounter().encoding_name
    assert component_name(Hello()) == "Hello"
    assert component_name(type("Blank", (), {"name": ""})()) == "Blank"


@pytest.mark.parametrize(("value", "minimum"), [(0, 1), (-1, 0), (True, 0), (1.0, 1), ("3", 1), (None, 1)])
def test_check_int_refuses_anything_but_an_int_at_or_above_the_minimum(value, minimum) -> None:
    with pytest.raises(ConfigurationError, match=rf"size must be an int >= {minimum}, got {value!r}"):
        check_int(value, "size", minimum)


def test_check_int_returns_the_value() -> None:
    assert check_int(1, "size") == 1 and check_int(0, "size", 0) == 0

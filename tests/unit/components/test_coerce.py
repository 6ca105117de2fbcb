"""How the ``as_*`` functions turn what users pass into a component (``ctxmgmt.components._coerce``)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pytest

from ctxmgmt.components._coerce import as_component, component_name
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

"""The errors every part raises (``ctxmgmt.messages.exceptions``)."""

from __future__ import annotations

import pytest

import ctxmgmt
from ctxmgmt.messages.exceptions import (
    BudgetExceededError,
    ComponentError,
    ConfigurationError,
    CorruptStateError,
    CtxMgmtError,
    InvalidMessageError,
)

USAGE_ERRORS = [ConfigurationError, InvalidMessageError, BudgetExceededError, CorruptStateError]


@pytest.mark.parametrize("error", [*USAGE_ERRORS, ComponentError])
def test_every_error_is_a_ctxmgmt_error(error) -> None:
    assert issubclass(error, CtxMgmtError)
    with pytest.raises(CtxMgmtError, match="boom"):
        raise error("boom")


@pytest.mark.parametrize("error", USAGE_ERRORS)
def test_usage_mistakes_are_also_value_errors(error) -> None:
    with pytest.raises(ValueError):
        raise error("bad value")


def test_a_backend_failure_is_a_runtime_error_not_a_value_error() -> None:
    assert issubclass(ComponentError, RuntimeError)
    assert not issubclass(ComponentError, ValueError)


def test_a_bad_parameter_raises_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        ctxmgmt.KadaneDialStrategy(keep_last=-1)


def test_a_message_without_content_raises_an_invalid_message_error() -> None:
    with pytest.raises(InvalidMessageError):
        ctxmgmt.Message("user", None)  # type: ignore[arg-type]


def test_the_public_errors_are_the_package_names() -> None:
    assert ctxmgmt.CtxMgmtError is CtxMgmtError
    assert ctxmgmt.ConfigurationError is ConfigurationError
    assert ctxmgmt.BudgetExceededError is BudgetExceededError

"""Self-describing strategy parameters (``ctxmgmt.strategies.params``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from ctxmgmt.messages.exceptions import ConfigurationError, CtxMgmtError
from ctxmgmt.messages.framing import DEFAULT_MEMORY_ROLE, MEMORY_ROLES
from ctxmgmt.strategies.params import (
    LLM_CALL_PARAMS,
    MemoryConfig,
    Param,
    StrategyConfig,
    format_args,
    param,
)


@dataclass(frozen=True, kw_only=True)
class DemoConfig(StrategyConfig):
    window: int = param(4, "turns per window; 4 for the test", ge=1)
    overlap: int = param(1, "turns two windows share; 1 for the test", ge=0)
    gain: float = param(0.5, "a weight; 0.5 for the test", gt=0, le=1)
    label: str = param("a", "one of two labels", choices=("a", "b"))
    limit: int | None = param(None, "an optional cap", kind=int, ge=0)
    verbose: bool = param(False, "a switch")

    def check(self) -> None:
        if self.overlap >= self.window:
            raise ConfigurationError("overlap must be smaller than window")


def test_defaults_and_declared_params_in_order() -> None:
    config = DemoConfig()
    assert (config.window, config.gain, config.limit) == (4, 0.5, None)
    assert [p.name for p in DemoConfig.params()] == ["window", "overlap", "gain", "label", "limit", "verbose"]
    assert DemoConfig.param("limit").optional and DemoConfig.param("limit").annotation == int | None
    with pytest.raises(KeyError):
        DemoConfig.param("nope")


def test_values_are_converted_to_their_kind() -> None:
    config = DemoConfig(gain=1)
    assert config.gain == 1.0 and isinstance(config.gain, float)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"window": 0}, "window must be an int >= 1, got 0"),
        ({"window": 2.5}, "window must be an int >= 1"),
        ({"window": True}, "window must be an int"),
        ({"gain": 0}, "gain must be a finite number > 0 and <= 1, got 0"),
        ({"gain": math.nan}, "gain must be a finite number"),
        ({"label": "c"}, "label must be one of 'a', 'b', got 'c'"),
        ({"limit": -1}, "limit must be an int >= 0 or None"),
        ({"verbose": 1}, "verbose must be True or False"),
        ({"overlap": 4}, "overlap must be smaller than window"),
    ],
)
def test_bad_values_are_configuration_errors_that_state_the_bounds(values, message) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        DemoConfig(**values)


def test_build_replaces_values_and_refuses_unknown_names_and_other_configs() -> None:
    base = DemoConfig(window=6)
    assert DemoConfig.build(base, gain=0.25) == DemoConfig(window=6, gain=0.25)
    assert DemoConfig.build() == DemoConfig()
    assert DemoConfig.build(base) is base
    with pytest.raises(ConfigurationError, match="unexpected parameters for DemoConfig: \\['windw'\\]"):
        DemoConfig.build(windw=3)
    with pytest.raises(CtxMgmtError, match="config must be a DemoConfig"):
        DemoConfig.build(MemoryConfig())  # type: ignore[arg-type]


def test_dict_round_trip_and_changed_values() -> None:
    config = DemoConfig(window=8, label="b")
    assert DemoConfig.from_dict(config.to_dict()) == config
    assert config.changed() == {"window": 8, "label": "b"}
    assert DemoConfig().changed() == {}
    with pytest.raises(ConfigurationError):
        DemoConfig.from_dict({**config.to_dict(), "extra": 1})


def test_param_needs_a_kind_for_a_none_default() -> None:
    with pytest.raises(TypeError, match="kind="):
        param(None, "no kind")


def test_memory_config_declares_the_memory_role() -> None:
    assert MemoryConfig().memory_role == DEFAULT_MEMORY_ROLE
    assert MemoryConfig.param("memory_role").choices == MEMORY_ROLES
    with pytest.raises(ConfigurationError, match="memory_role must be one of"):
        MemoryConfig(memory_role="narrator")


def test_llm_call_params_bound_timeout_and_prompt_size() -> None:
    timeout, chars = LLM_CALL_PARAMS
    assert timeout.validate(None) is None and timeout.validate(5) == 5.0
    with pytest.raises(ConfigurationError):
        timeout.validate(0)
    assert chars.validate(200) == 200
    with pytest.raises(ConfigurationError, match="llm_max_input_chars must be an int >= 200 or None"):
        chars.validate(199)


def test_format_args_writes_one_google_style_line_per_param() -> None:
    spec = Param("k", int, 3, "how many.", ge=1)
    assert format_args((spec,)) == "    k: how many. Default 3; an int >= 1."
    optional = Param("cap", float, None, "a cap.", optional=True, gt=0)
    assert format_args((optional,), indent="") == "cap: a cap. Default None; a finite number > 0 or None."

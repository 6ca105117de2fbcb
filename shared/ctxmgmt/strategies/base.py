"""The :class:`Strategy` base: incremental ``add`` of turns, ``select`` of a context."""

from __future__ import annotations

import dataclasses
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from ctxmgmt.components._coerce import component_name
from ctxmgmt.components.budget import message_tokens, messages_tokens, turn_tokens
from ctxmgmt.components.tokens import CachedTokenCounter, TokenCounter, as_token_counter
from ctxmgmt.messages.context import Block, BlockKind, Context
from ctxmgmt.messages.exceptions import ConfigurationError, CorruptStateError
from ctxmgmt.messages.framing import DEFAULT_MEMORY_ROLE
from ctxmgmt.messages.types import Message, Turn, memory_message
from ctxmgmt.scoring.lexical import match_share
from ctxmgmt.scoring.vector_text import USER_PART_MATCH, WINDOW_CHARS
from ctxmgmt.strategies.params import StrategyConfig
from ctxmgmt.strategies.state import jsonable

_S = TypeVar("_S", bound="Strategy")

TOKEN_CHUNK = 64
"""Turn token counts per record of the derived state (kept so a restore counts nothing)."""


class Strategy(ABC):
    """A context-selection method over the completed turns of one conversation.

    ``add``/``add_many`` receive completed turns in order and update derived state
    incrementally; ``select`` chooses what to show for a query. Turns are re-indexed to
    their position in the strategy (0-based).

    Parameters are declared once, in the strategy's ``config_class`` (a frozen
    :class:`~ctxmgmt.strategies.params.StrategyConfig`); ``components`` names the pluggable components
    the constructor takes besides ``token_counter`` (``embedder``, ``summarizer``,
    ``decider``, ``entity_extractor``). Adapters build their parameters from both.
    Parameter values are readable as attributes (``strategy.tau``) and as ``strategy.config``.
    """

    name: ClassVar[str] = "strategy"
    config_class: ClassVar[type[StrategyConfig]] = StrategyConfig
    components: ClassVar[tuple[str, ...]] = ()
    llm_component: ClassVar[str | None] = None
    """The component an adapter's ``llm=`` stands in for (``"summarizer"``/``"decider"``); None: no LLM."""
    derive_turns: ClassVar[int] = 0
    """Turns a call always derives before its time limit starts, however long they take. Set by
    the memories that embed nothing (SWin, ACM: about 1-3 ms a turn), so their first answer over
    a history of up to that many turns is the one they give once everything is derived on any
    machine, fast or busy (the time limit alone made it depend on the machine's speed)."""
    derive_seconds: ClassVar[float] = 0.0
    """Seconds a call may derive a long history before leaving a backlog, when more than the
    conversation's default (:data:`ctxmgmt.session.conversation.INDEX_SECONDS`). Set by the memories
    that embed nothing (SWin, ACM): they derive a few hundred turns in about a second, so their
    first answer over such a history is the one they give once everything is derived."""
    defer_work: bool = False
    """Whether ``add`` may leave slow follow-up work for later (:meth:`pending_work`), and
    ``select`` answer without it (its context then says so). Set by a conversation while its
    calls answer within a time limit and a background worker finishes the rest; False for a
    strategy used on its own, whose ``add`` does everything."""
    budget_only_trims: ClassVar[bool] = False
    """True when ``select(q, budget=b)`` is ``select(q)`` whenever that fits in ``b`` tokens (the
    budget only cuts, never adds), so a caller with a cap selects once, within it, instead of
    selecting unbounded and then again within the cap."""

    def __init__(
        self,
        config: StrategyConfig | None = None,
        *,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        self.config = self.config_class.build(config, **params)
        counter = as_token_counter(token_counter)  # a cached one (a twin's source's) is shared
        self.token_counter = (
            counter if isinstance(counter, CachedTokenCounter) else CachedTokenCounter(counter)
        )
        self._llm_calls = 0
        self._turns: list[Turn] = []
        self._turn_tokens: list[int] = []

    def __getattr__(self, name: str) -> Any:
        # Parameter values read as attributes (self.tau); only reached when no attribute exists.
        config = self.__dict__.get("config")
        if config is not None and name in config.__dataclass_fields__:
            return getattr(config, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def from_paper(cls: type[_S], **kwargs: Any) -> _S:
        """The method as published (``config_class.paper()``); ``kwargs`` override it."""
        names = {p.name for p in cls.config_class.params()}
        params = {k: v for k, v in kwargs.items() if k in names}
        others = {k: v for k, v in kwargs.items() if k not in names}
        return cls(cls.config_class.build(cls.config_class.paper(), **params), **others)

    @property
    def llm_calls(self) -> int:
        """LLM calls made on this strategy's behalf (summaries, decisions); 0 with the defaults.

        Exact for the LLM components (:class:`~ctxmgmt.components.llm_call.LLMCaller`): every
        started call counts once (failed and timed-out ones too), counted per strategy even
        when one component is shared. A custom component that declares ``uses_llm = True``
        without calling through :func:`~ctxmgmt.components.llm_call.call_llm` counts one call
        per use. Persisted with the derived state.
        """
        return self._llm_calls

    def fast_twin(self, questions: Any = None) -> Strategy | None:
        """A fast stand-in of this strategy that chooses among the turns it has not derived yet.

        A long history delivered at once leaves turns waiting to be derived
        (:mod:`ctxmgmt.session.backlog`); meanwhile the twin indexes every turn of the history
        and, once it holds them all, answers alone (its whole context) until this strategy has
        derived everything, so an answer given before then is this method's, not another's. The twin
        keeps the strategy's parameters and token counter and embeds turns with the shipped
        static encoder (no LLM, no transformer: hundreds of turns in a call).

        Args:
            questions: The bundled MiniLM when this strategy embeds with it: it embeds the
                questions (:class:`~ctxmgmt.components.static_turns.StaticTurns`). None: the
                static encoder embeds them too.

        Returns:
            A new strategy with no turns, or None (the default): the backlog is chosen from by
            KadaneDial over the static encoder (:class:`ctxmgmt.session.backlog.BacklogIndex`).
        """
        del questions
        return None

    def shared_components(self) -> list[Any]:
        """The components a deep copy of the strategy shares instead of copying.

        Its :attr:`components` and token counter: read-only models and clients (an embedder,
        spaCy, an LLM), some of them hundreds of megabytes (:mod:`ctxmgmt.adapter.copying`).
        """
        return [*(self.__dict__.get(name) for name in self.components), self.token_counter.counter]

    @property
    def turns(self) -> tuple[Turn, ...]:
        """Turns added so far, in order."""
        return tuple(self._turns)

    def __len__(self) -> int:
        return len(self._turns)

    def prepare(self, turns: Sequence[Turn]) -> None:
        """Get ready to add ``turns`` one by one (e.g. embed them in one batch); no-op by default."""
        del turns

    # -- deferred work (a call answers before a slow enrichment of its turns is done) ----------
    def pending_work(self) -> int:
        """Turns added whose slow follow-up work was left for later (:attr:`defer_work`); 0 by default."""
        return 0

    def pending_job(self, limit: int) -> Callable[[], None] | None:
        """The slow part of finishing up to ``limit`` pending turns, as a call that reads no strategy state.

        Run outside the conversation's lock (it fills a content-keyed cache, e.g. spaCy's), so
        :meth:`finish_pending` under the lock is quick. None: nothing to run outside.
        """
        del limit
        return None

    def finish_pending(self, limit: int | None = None) -> int:
        """Finish the deferred work of up to ``limit`` turns (None = all), oldest first; turns finished."""
        del limit
        return 0

    def add(self, turn: Turn) -> None:
        """Add one completed turn."""
        self.add_many([turn])

    def add_many(self, turns: Sequence[Turn]) -> None:
        """Add completed turns in order (batched where the strategy can)."""
        start = len(self._turns)
        new = [Turn(start + i, t.messages) for i, t in enumerate(turns)]
        if not new:
            return
        self._on_add(new)
        self._turns.extend(new)
        self._turn_tokens.extend(turn_tokens(self.token_counter, t) for t in new)

    def reset(self) -> None:
        """Forget every turn (caches that are keyed by content may be kept)."""
        self._clear_turns()
        self._on_reset()

    def _clear_turns(self) -> None:
        """Forget the turns only, keeping derived state (e.g. a memory carried to a new session)."""
        self._turns.clear()
        self._turn_tokens.clear()

    def tokens_of(self, indices: Sequence[int]) -> int:
        """Tokens of the given turns."""
        return sum(self._turn_tokens[i] for i in indices)

    @property
    def total_tokens(self) -> int:
        """Tokens of every turn added."""
        return sum(self._turn_tokens)

    # -- blocks ---------------------------------------------------------------------------
    def turns_block(self, indices: Sequence[int], reason: str = "") -> Block:
        """A ``"turns"`` block showing the turns ``indices`` verbatim, in the order given."""
        indices = tuple(indices)
        return Block(
            kind="turns",
            turns=indices,
            messages=tuple(m for i in indices for m in self._turns[i].messages),
            tokens=self.tokens_of(indices),
            reason=reason,
        )

    def user_part_tokens(self, index: int) -> int | None:
        """Tokens of turn ``index``'s :attr:`~ctxmgmt.messages.types.Turn.user_part`.

        None when the turn has no reply to leave out (no user part, or nothing after it).
        """
        turn = self._turns[index]
        part = turn.user_part
        if not part or len(part) == len(turn.messages):
            return None
        return messages_tokens(self.token_counter, part)

    def long_user_part(
        self,
        index: int,
        window_chars: int | None = WINDOW_CHARS,
        weights: Mapping[str, float] | None = None,
    ) -> int | None:
        """:meth:`user_part_tokens` of turn ``index`` when it is longer than ``window_chars`` (None: never).

        Such a turn is embedded as its user message alone (:func:`ctxmgmt.scoring.vector_text.vector_text`),
        and a budget may send that message without the reply. With the query's term ``weights``
        (:meth:`~ctxmgmt.scoring.lexical.BM25Index.term_weights`), only when the user message
        holds at least :data:`~ctxmgmt.scoring.vector_text.USER_PART_MATCH` of the weight the
        turn matches (or the turn matches none): else the reply is what the query asks about.
        """
        turn = self._turns[index]
        if window_chars is None or len(turn.text) <= window_chars:
            return None
        if weights:
            user = " ".join(m.text for m in turn.user_part)
            share = match_share(weights, user, turn.text)
            if share is not None and share < USER_PART_MATCH:
                return None
        return self.user_part_tokens(index)

    def user_part_block(self, index: int, reason: str = "") -> Block:
        """A ``"turns"`` block of turn ``index``'s user message(s) alone, its reply left out."""
        part = self._turns[index].user_part
        return Block(
            kind="turns",
            turns=(index,),
            messages=part,
            tokens=messages_tokens(self.token_counter, part),
            reason=reason,
            reply_left_out=True,
        )

    @property
    def memory_role(self) -> str:
        """Role of the text blocks' messages: the config's ``memory_role``, else ``"user"``."""
        return str(getattr(self.config, "memory_role", DEFAULT_MEMORY_ROLE))

    def memory_tokens(self, text: str, kind: BlockKind = "summary") -> int:
        """Tokens of ``text`` sent as a text block: its framed memory message, overhead included."""
        return message_tokens(self.token_counter, memory_message(text, role=self.memory_role, kind=kind))

    def text_block(self, kind: BlockKind, text: str, *, turns: Sequence[int] = (), reason: str = "") -> Block:
        """A text block (``"summary"``, ``"entities"``) sent as one framed memory message.

        The message is in the strategy's ``memory_role`` (:func:`ctxmgmt.messages.types.memory_message`);
        ``turns`` is its provenance; ``tokens`` counts that message (:meth:`memory_tokens`).
        """
        return Block(
            kind=kind,
            turns=tuple(turns),
            text=text,
            tokens=self.memory_tokens(text, kind),
            reason=reason,
            role=self.memory_role,
        )

    # -- persistence ------------------------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """JSON-serialisable state: name, config, turns, LLM calls and derived state.

        The derived state is the strategy's :meth:`_state`; :meth:`load_state` restores it all.
        """
        return {
            "strategy": self.name,
            "config": self.config.to_dict(),
            "turns": [[m.to_dict() for m in t.messages] for t in self._turns],
            **jsonable(self.derived_state()),
        }

    def stored_config(self) -> dict[str, Any]:
        """What a stored state must have been built with to be restored here (JSON data).

        The parameters (:attr:`config`), plus under ``"built_with"`` the names of the
        components whose output a state keeps as is: the embedder (vectors) and the token
        counter (per-turn counts). A session whose stored state was built otherwise rebuilds
        it, with a warning, instead of mixing it with new output.
        """
        built_with = {"token_counter": component_name(self.token_counter.counter)}
        embedder = getattr(self, "embedder", None)
        if embedder is not None:
            built_with["embedder"] = component_name(embedder)
        stored: dict[str, Any] = json.loads(json.dumps(self.config.to_dict()))  # tuples become lists
        stored["built_with"] = built_with
        return stored

    def derived_state(self) -> dict[str, Any]:
        """What the strategy derived from its turns (:meth:`_state` plus ``llm_calls``).

        Vectors are ``numpy`` arrays here, capped logs :class:`~ctxmgmt.strategies.state.CappedLog` s
        and unchanging items may be frozen dataclass instances (:meth:`to_state` turns them
        into lists and dicts). Stores write it as records (:func:`ctxmgmt.store.records.flatten`);
        :meth:`restore` reads it back.
        """
        counts = self._turn_tokens
        seen = [_seen_of(t) for t in self._turns]
        state: dict[str, Any] = {
            "llm_calls": self._llm_calls,
            # token counts of the turns, in chunks (a store writes only the newest chunk per turn)
            "turn_tokens": [counts[i : i + TOKEN_CHUNK] for i in range(0, len(counts), TOKEN_CHUNK)],
        }
        if any(seen):  # when each message without a timestamp was first seen, chunked the same way
            state["turn_seen"] = [seen[i : i + TOKEN_CHUNK] for i in range(0, len(seen), TOKEN_CHUNK)]
        return {**state, **self._state()}

    def restore(self, turns: Sequence[Turn], derived: dict[str, Any]) -> None:
        """Replace every turn by ``turns`` and the derived state by ``derived``, computing nothing.

        ``derived`` is what :meth:`derived_state` returned after exactly these turns.
        """
        self.reset()
        seen = [s for chunk in derived.get("turn_seen") or () for s in chunk]
        if len(seen) != len(turns):  # a state from before first-seen stamps were kept
            seen = [None] * len(turns)
        turns = [
            Turn(i, _with_seen(t.messages, stamps))
            for i, (t, stamps) in enumerate(zip(turns, seen, strict=True))
        ]
        self._turns.extend(turns)
        counts = [int(n) for chunk in derived.get("turn_tokens") or () for n in chunk]
        if len(counts) == len(turns):  # counted when they were added
            self._turn_tokens.extend(counts)
        else:  # a state from before counts were kept
            self._turn_tokens.extend(turn_tokens(self.token_counter, t) for t in turns)
        self._llm_calls = int(derived.get("llm_calls", 0))
        self._load(derived)

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output, replacing every turn, without recomputing what it holds.

        The strategy keeps its own parameters (``state["config"]`` records those the state was
        built with) unless its :meth:`_load` restores some of them.

        Raises:
            ConfigurationError: the state is another strategy's.
        """
        if state.get("strategy") != self.name:
            raise ConfigurationError(f"state is for {state.get('strategy')!r}, not {self.name!r}")
        turns = [Turn(i, tuple(Message.from_dict(d) for d in ms)) for i, ms in enumerate(state["turns"])]
        self.restore(turns, state)

    def _state(self) -> dict[str, Any]:
        """The strategy's derived state for :meth:`to_state` (plain JSON data; none by default)."""
        return {}

    def _load(self, state: dict[str, Any]) -> None:
        """Restore the derived state of :meth:`_state`; the turns are already restored.

        The default recomputes it from the turns (as if they were added again).
        """
        turns = list(self._turns)
        self._turns.clear()
        self._turn_tokens.clear()
        self.add_many(turns)

    @abstractmethod
    def _on_add(self, turns: list[Turn]) -> None:
        """Update derived state for new turns (already re-indexed)."""

    @abstractmethod
    def _on_reset(self) -> None:
        """Drop derived state of the turns."""

    @abstractmethod
    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Choose past turns (and/or derived blocks) for ``query`` within ``budget`` tokens."""


def _seen_of(turn: Turn) -> list[str | None] | None:
    """The first-seen stamps of a turn's messages (None when no message has one)."""
    stamps = [m.seen if not m.timestamp else None for m in turn.messages]
    return stamps if any(stamps) else None


def _with_seen(messages: tuple[Message, ...], stamps: Any) -> tuple[Message, ...]:
    """``messages`` with the stored first-seen stamps put back (messages with a timestamp keep it)."""
    if not isinstance(stamps, list) or len(stamps) != len(messages):
        return messages
    return tuple(
        dataclasses.replace(m, seen=stamp) if isinstance(stamp, str) and not m.timestamp else m
        for m, stamp in zip(messages, stamps, strict=True)
    )


_FIELD_CHECKS: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "int | None": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    "float | None": lambda v: (
        v is None or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))
    ),
    "bool": lambda v: isinstance(v, bool),
}


def checked_fields(item: Any, what: str) -> Any:
    """``item`` (a dataclass instance restored from saved state) if each field has its declared type.

    Fields declared ``str``, ``int``, ``float``, ``bool`` (or ``... | None``) are checked
    (floats finite), ``list[...]`` ones must be lists, ``dict[...]`` ones dicts; others pass.

    Raises:
        CorruptStateError: a field holds another type (a stored record was altered).
    """
    for spec in dataclasses.fields(item):
        value = getattr(item, spec.name)
        kind = str(spec.type)
        check = _FIELD_CHECKS.get(kind)
        if check is None and kind.startswith("list["):
            check = _is_list
        elif check is None and kind.startswith("dict["):
            check = _is_dict
        if check is not None and not check(value):
            raise CorruptStateError(f"saved {what}: field {spec.name!r} holds {value!r:.40}, not {kind}")
    return item


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)

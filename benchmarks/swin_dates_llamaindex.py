"""SWin with message dates through the LlamaIndex interface, beside the core on the same data.

Run: ``python benchmarks/swin_dates_llamaindex.py [DATA ...] [--limit N] [--json PATH]``
(default data ``../shared/data/locomo_dev.json``).

Each LoCoMo dialogue is replayed into ``llamaindex_ctxmgmt.SWinSummaryBuffer`` as a chat store
user would put it: one ``ChatMessage`` per message, the session date in
``additional_kwargs["timestamp"]`` (the LoCoMo form, "1:56 pm on 8 May, 2023"), then every
question is asked with ``get(input=question)``. Three rows:

- ``core SWinStrategy``: the core benchmark's replay (:func:`ctxmgmt.app.bench.runner.run_memory`),
  the reference figure;
- ``LlamaIndex, dated``: the adapter with each message's date in ``additional_kwargs``;
- ``LlamaIndex, undated``: the same messages without dates (what an adapter that drops the
  time gives: relative dates stay unanchored).

Measured as the core benchmark measures (:mod:`ctxmgmt.app.bench.metrics`): answer containment
in what the model receives (the returned messages' text), evidence recall (a turn counts when
all its messages are returned verbatim; messages carry their turn index in
``additional_kwargs``), token ratio (returned messages' tokens by the default counter over the
whole history's). The adapter uses its defaults (``token_limit`` 3,000, above what SWin
selects, so the budget does not bind). The last line counts the questions whose containment
differs between the core and the dated adapter: 0 means the interface loses nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ctxmgmt.session.conversation
from ctxmgmt.app.bench.data import Dialogue, load_dialogues
from ctxmgmt.app.bench.metrics import answer_contained, evidence_recall
from ctxmgmt.app.bench.runner import MemoryResult, QuestionRecord, run_memory
from ctxmgmt.components.budget import message_tokens, turn_tokens
from ctxmgmt.components.tokens import CachedTokenCounter, default_token_counter
from ctxmgmt.strategies.swin import SWinStrategy

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo_dev.json"
TURN_KEY = "bench_turn"
"""``additional_kwargs`` key holding a message's turn index (for evidence recall)."""


def replay_llamaindex(dialogues: Sequence[Dialogue], *, dated: bool) -> MemoryResult:
    """Replay every dialogue into a fresh ``SWinSummaryBuffer`` and ask its questions."""
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    from llamaindex_ctxmgmt import SWinSummaryBuffer
    from llamaindex_ctxmgmt._convert import to_message

    roles = {"user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}
    counter = CachedTokenCounter(default_token_counter())
    result = MemoryResult(f"LlamaIndex SWinSummaryBuffer, {'dated' if dated else 'undated'}", kind="memory")
    for dialogue in dialogues:
        memory = SWinSummaryBuffer.from_defaults()
        for turn in dialogue.turns:
            batch = []
            for m in turn.messages:
                extra: dict[str, Any] = {TURN_KEY: turn.index}
                if dated and m.timestamp:
                    extra["timestamp"] = m.timestamp
                if m.name:
                    extra["name"] = m.name
                batch.append(ChatMessage(role=roles[m.role], content=m.text, additional_kwargs=extra))
            start = time.perf_counter()
            memory.put_messages(batch)
            result.add_ms.append((time.perf_counter() - start) * 1000)
        result.turns += len(dialogue.turns)
        history = sum(turn_tokens(counter, t) for t in dialogue.turns)
        sizes = {t.index: len(t.messages) for t in dialogue.turns}
        for question in dialogue.questions:
            start = time.perf_counter()
            sent = memory.get(input=question.text)
            ms = (time.perf_counter() - start) * 1000
            returned: dict[int, int] = {}
            for m in sent:
                index = (m.additional_kwargs or {}).get(TURN_KEY)
                if isinstance(index, int):
                    returned[index] = returned.get(index, 0) + 1
            shown = [i for i, n in returned.items() if n == sizes.get(i)]
            text = "\n".join(m.content or "" for m in sent)
            result.questions.append(
                QuestionRecord(
                    memory=result.memory,
                    dialogue=dialogue.id,
                    category=question.category,
                    recall=evidence_recall(question.evidence, shown),
                    contained=answer_contained(question.answer, text),
                    tokens=sum(message_tokens(counter, to_message(m)) for m in sent),
                    history_tokens=history,
                    select_ms=ms,
                )
            )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three rows and print (and optionally save) their figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("data", nargs="*", help=f"LoCoMo-format files (default {DEFAULT_DATA})")
    parser.add_argument("--limit", type=int, default=0, help="only the first N dialogues")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)
    # the interface's fidelity is measured: each first get() derives the whole dialogue
    ctxmgmt.session.conversation.INDEX_SECONDS = None
    paths = [Path(p) for p in (args.data or [DEFAULT_DATA])]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(f"data file not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    dialogues = [d for p in paths for d in load_dialogues(p)]
    if args.limit:
        dialogues = dialogues[: args.limit]
    rows = [
        run_memory("core SWinStrategy", SWinStrategy, dialogues),
        replay_llamaindex(dialogues, dated=True),
        replay_llamaindex(dialogues, dated=False),
    ]
    questions = sum(len(d.questions) for d in dialogues)
    print(
        f"{', '.join(p.name for p in paths)}: {len(dialogues)} dialogues, "
        f"{sum(len(d.turns) for d in dialogues)} turns, {questions} questions; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'memory':<40} {'evidence recall':>16} {'answer containment':>19} {'token ratio':>12}")
    summaries = [r.summary() for r in rows]
    for s in summaries:
        print(
            f"{s['memory']:<40} {s['evidence_recall']:>16.3f} {s['answer_containment']:>19.3f} "
            f"{s['token_ratio']:>12.3f}"
        )
    differ = sum(
        a.contained != b.contained for a, b in zip(rows[0].questions, rows[1].questions, strict=True)
    )
    print(f"questions whose containment differs, core vs LlamaIndex dated: {differ}")
    if args.json:
        payload = {"data": [str(p) for p in paths], "rows": summaries, "containment_differs": differ}
        Path(args.json).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

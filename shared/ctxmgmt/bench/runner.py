"""Replay dialogues through memories and measure them (DESIGN.md, evaluation protocol)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxmgmt.bench.data import Dialogue
from ctxmgmt.bench.metrics import answer_contained, evidence_recall, mean, percentile
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


@dataclass
class MemoryResult:
    """Everything measured for one memory over all dialogues."""

    memory: str
    questions: list[QuestionRecord] = field(default_factory=list)
    add_ms: list[float] = field(default_factory=list)
    llm_calls: int = 0
    turns: int = 0

    def summary(self) -> dict[str, Any]:
        """Aggregate metrics: means over questions, overhead percentiles in ms."""
        ratios = [q.tokens / q.history_tokens for q in self.questions if q.history_tokens]
        selects = [q.select_ms for q in self.questions]
        return {
            "memory": self.memory,
            "questions": len(self.questions),
            "evidence_recall": mean(q.recall for q in self.questions),
            "answer_containment": mean(
                None if q.contained is None else float(q.contained) for q in self.questions
            ),
            "token_ratio": mean(ratios),
            "add_ms_p50": percentile(self.add_ms, 50),
            "add_ms_p95": percentile(self.add_ms, 95),
            "select_ms_p50": percentile(selects, 50),
            "select_ms_p95": percentile(selects, 95),
            "llm_calls_per_turn": self.llm_calls / self.turns if self.turns else 0.0,
        }

    def by_category(self) -> dict[str, dict[str, float]]:
        """Recall, containment and token ratio per question category."""
        out: dict[str, dict[str, float]] = {}
        for cat in sorted({q.category for q in self.questions}):
            qs = [q for q in self.questions if q.category == cat]
            out[cat] = {
                "questions": len(qs),
                "evidence_recall": mean(q.recall for q in qs),
                "answer_containment": mean(None if q.contained is None else float(q.contained) for q in qs),
                "token_ratio": mean(q.tokens / q.history_tokens for q in qs if q.history_tokens),
            }
        return out


def run_memory(
    name: str,
    factory: Callable[[], Strategy] | None,
    dialogues: Sequence[Dialogue],
    *,
    on_step: Callable[[int], None] | None = None,
) -> MemoryResult:
    """Replay every dialogue turn by turn into a fresh strategy, then ask its questions.

    ``factory=None`` measures the full history. Each turn is added on its own (as a chat
    adds them) and timed; each question is answered after the whole dialogue, as in LoCoMo.
    """
    result = MemoryResult(name)
    for dialogue in dialogues:
        strategy = factory() if factory is not None else None
        history_tokens = 0
        if strategy is not None:
            for turn in dialogue.turns:
                start = time.perf_counter()
                strategy.add(turn)
                result.add_ms.append((time.perf_counter() - start) * 1000)
                if on_step:
                    on_step(1)
            history_tokens = strategy.total_tokens
            result.llm_calls += int(getattr(strategy, "llm_calls", 0))
        elif on_step:
            on_step(len(dialogue.turns))
        result.turns += len(dialogue.turns)
        all_text = "\n".join(m.text for t in dialogue.turns for m in t.messages)
        for question in dialogue.questions:
            if strategy is None:
                shown: Iterable[int] = range(len(dialogue.turns))
                text, tokens, total, ms = all_text, 1, 1, 0.0
            else:
                start = time.perf_counter()
                context = strategy.select(question.text)
                ms = (time.perf_counter() - start) * 1000
                shown, text, tokens, total = (
                    context.turn_indices,
                    context.text(),
                    context.tokens,
                    history_tokens,
                )
            result.questions.append(
                QuestionRecord(
                    memory=name,
                    dialogue=dialogue.id,
                    category=question.category,
                    recall=evidence_recall(question.evidence, shown),
                    contained=answer_contained(question.answer, text),
                    tokens=tokens,
                    history_tokens=total,
                    select_ms=ms,
                )
            )
            if on_step:
                on_step(1)
    return result


def to_json(results: Sequence[MemoryResult], *, data: Sequence[str]) -> dict[str, Any]:
    """Machine-readable results."""
    return {
        "data": list(data),
        "memories": [
            {
                "summary": r.summary(),
                "by_category": r.by_category(),
                "questions": [asdict(q) for q in r.questions],
            }
            for r in results
        ],
    }

"""EntityTier: ACM's oldest tier, the de-duplicated entities of the turns collapsed into it."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxmgmt.components.entities import Entity
from ctxmgmt.components.llm_call import meter_calls
from ctxmgmt.messages.dates import anchor_dates
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.lexical import STOPWORDS

logger = logging.getLogger("ctxmgmt.strategies.acm")  # one logger for ACM, as before the split

ENTITY_HEADER = "Entities mentioned in the oldest turns (type; turn; time; mentions):"
"""First line of the entity tier's block."""
CONTEXT_LABELS = frozenset({"DATE", "TIME"})
"""Entity labels whose meaning depends on when they were said ("yesterday"): not merged
across different timestamps."""
NAME_LABELS = frozenset(
    {
        "PERSON",
        "ORG",
        "GPE",
        "LOC",
        "NORP",
        "FAC",
        "EVENT",
        "WORK_OF_ART",
        "PRODUCT",
        "LAW",
        "LANGUAGE",
        "MISC",
    }
)
"""Labels whose single words may match a query ("Caroline" for "Caroline Smith")."""
FACT_LABELS = frozenset({"DATE", "TIME", "CARDINAL", "QUANTITY", "MONEY", "PERCENT", "GPE", "LOC", "FAC"})
"""Labels of the facts (numbers, dates, places) kept with the names they were said with."""
MAX_FACTS = 3
"""Facts kept per entity record (the newest distinct ones)."""
LOW_VALUE_LABELS = frozenset({"CARDINAL", "ORDINAL"})
"""Labels shown last ("one", "first" are rarely worth their tokens)."""
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class EntityRecord:
    """One de-duplicated entity of the entity tier.

    Attributes:
        text: The entity as first written.
        label: Its type (spaCy OntoNotes labels by default).
        count: Mentions over every collapsed turn.
        turns: The turns that mention it, ascending.
        times: Timestamp of the first and of the last mentioning turn ("" if none).
        facts: For a name (not itself a fact), the numbers, dates and places said in the same
            turns (the newest :data:`MAX_FACTS` distinct ones; relative dates anchored).
    """

    text: str
    label: str
    count: int = 0
    turns: list[int] = field(default_factory=list)
    times: list[str] = field(default_factory=lambda: ["", ""])
    facts: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The entity as one line of the entity block."""
        first, last = self.turns[0], self.turns[-1]
        span = f"turn {first}" if first == last else f"turns {first}-{last}"
        parts = [self.label, span]
        if self.times[0]:
            parts.append(self.times[0])  # when it was first mentioned
        if self.count > 1:
            parts.append(f"x{self.count}")
        # a relative date keeps the day it meant: "yesterday (7 May 2023)"
        text = anchor_dates(self.text, self.times[0]) if self.label in CONTEXT_LABELS else self.text
        if self.facts:
            parts.append("with " + ", ".join(self.facts))
        return f"- {text} ({'; '.join(parts)})"


class EntityTier:
    """ACM's entity tier: the entities of the oldest turns.

    Turns collapse into it in groups (:meth:`collapse`); their entities are extracted once and
    merged (:meth:`merge_pending`), de-duplicated by (text, label) -- and by timestamp for
    DATE/TIME, since "yesterday" means a different day in each session -- with mention
    counts, source turns, timestamps and, for names, the facts said with them.

    Args:
        records: The entities by key ``"text|label"`` (``"text|label|time"`` for DATE/TIME),
            restored state; none by default.
        calls: Extractions so far, one per collapse (restored state); 0 by default.
        pending: Collapsed groups whose entities are not merged yet (restored state); none by default.
    """

    def __init__(
        self,
        records: dict[str, EntityRecord] | None = None,
        calls: int = 0,
        pending: list[list[int]] | None = None,
    ) -> None:
        self.records: dict[str, EntityRecord] = records if records is not None else {}
        self.calls = calls
        self._pending: list[list[int]] = pending or []  # groups collapsed, their entities not merged yet

    # -- upkeep ---------------------------------------------------------------------------------
    def collapse(self, indices: list[int]) -> None:
        """Queue the turns ``indices`` (ascending) for one extraction; :meth:`merge_pending` merges them."""
        self.calls += 1
        self._pending.append(indices)

    @property
    def pending(self) -> list[list[int]]:
        """The collapsed groups (turn indices) whose entities are not merged yet, oldest first."""
        return self._pending

    def pending_turns(self) -> int:
        """Turns collapsed whose entities are not merged yet."""
        return sum(len(group) for group in self._pending)

    def next_groups(self, limit: int | None) -> list[list[int]]:
        """The oldest queued groups covering at most ``limit`` turns (at least one group; None = all)."""
        if limit is None:
            return list(self._pending)
        groups: list[list[int]] = []
        covered = 0
        for group in self._pending:
            if groups and covered + len(group) > limit:
                break
            groups.append(group)
            covered += len(group)
        return groups

    def merge_pending(
        self, turns: Sequence[Turn], extractor: Any, limit: int | None = None
    ) -> tuple[list[str], int]:
        """Extract and merge the entities of the queued groups, in order.

        ``limit``: only the oldest groups covering at most that many turns (at least one);
        None = every group. Returns one log line per group and the LLM calls made. The merged
        groups leave the queue.
        """
        pending = self.next_groups(limit)
        self._pending = self._pending[len(pending) :]
        found, llm_calls = self._entities_of(turns, pending, extractor) if pending else ([], 0)
        lines: list[str] = []
        for indices, entities_of_turns in zip(pending, found, strict=True):
            added = self._merge(turns, indices, entities_of_turns)
            lines.append(f"collapsed turns {indices[0]}-{indices[-1]} to entities (+{added} new)")
        return lines, llm_calls

    def _merge(self, turns: Sequence[Turn], indices: list[int], found: list[list[Entity]]) -> int:
        """Merge the entities ``found`` in turns ``indices`` into the tier; the number of new records."""
        added = 0
        for index, entities in zip(indices, found, strict=False):
            time = turn_time(turns[index])
            facts = facts_of(entities, time)
            for entity in entities:
                text = " ".join(entity.text.split())
                if not text:
                    continue
                key = f"{text.casefold()}|{entity.label}"
                if entity.label in CONTEXT_LABELS:
                    key += f"|{time}"
                record = self.records.get(key)
                if record is None:
                    record = self.records[key] = EntityRecord(text, entity.label, times=[time, time])
                    added += 1
                record.count += 1
                if not record.turns or record.turns[-1] != index:
                    record.turns.append(index)
                record.times[1] = time
                if entity.label not in FACT_LABELS:
                    kept = [f for f in record.facts if f not in facts] + facts
                    record.facts = kept[-MAX_FACTS:]
        return added

    def _entities_of(
        self, turns: Sequence[Turn], groups: list[list[int]], extractor: Any
    ) -> tuple[list[list[list[Entity]]], int]:
        """The entities of each group of turns (one list per turn), each turn extracted once; LLM calls.

        An extractor whose result for a text does not depend on the other texts of the call
        (``per_text``, as spaCy's) is asked once for every group (restoring a long conversation
        makes one batched call instead of one call per collapse, with the same entities); any
        other once per group, as each collapse asked it. A call that fails leaves its turns
        without entities (they stay in the history), after a per-group retry of a batched call.
        """
        llm_calls = 0
        if len(groups) > 1 and getattr(extractor, "per_text", False):
            flat = [i for group in groups for i in group]
            found, llm_calls = _extract(turns, flat, extractor, log_failure=False)
            if found is not None:
                out: list[list[list[Entity]]] = []
                position = 0
                for group in groups:
                    out.append(found[position : position + len(group)])
                    position += len(group)
                return out, llm_calls
        result: list[list[list[Entity]]] = []
        for group in groups:
            found, calls = _extract(turns, group, extractor)
            llm_calls += calls
            result.append(found or [[] for _ in group])
        return result, llm_calls

    # -- reading --------------------------------------------------------------------------------
    def mentioned(self, query: str) -> dict[str, EntityRecord]:
        """The entities ``query`` mentions: their whole text, or for a name one of its words."""
        padded = f" {' '.join(_words(query))} "
        query_words = set(padded.split())
        out: dict[str, EntityRecord] = {}
        for key, record in self.records.items():
            words = _words(record.text)
            if not words or all(w in STOPWORDS for w in words):
                continue
            if f" {' '.join(words)} " in padded:
                out[key] = record
            elif record.label in NAME_LABELS and any(
                len(w) > 2 and w not in STOPWORDS and w in query_words for w in words
            ):
                out[key] = record
        return out

    def ranked(self, mentioned: dict[str, EntityRecord], turn_count: int) -> list[EntityRecord]:
        """Every record, best first: the ``mentioned`` ones, then by label value, mentions and recency.

        ``turn_count`` (turns in the conversation) scales recency; ties go to the earlier entity.
        """
        newest = max(1, turn_count)

        def score(item: tuple[str, EntityRecord]) -> float:
            key, record = item
            value = 0.3 if record.label in LOW_VALUE_LABELS else 1.0
            return (1000.0 if key in mentioned else 0.0) + value * (
                1.0 + math.log(record.count) + 0.5 * record.turns[-1] / newest
            )

        return [r for _, r in sorted(self.records.items(), key=lambda kv: (-score(kv), kv[1].turns[0]))]


def recall_order(mentioned: dict[str, EntityRecord], exclude: set[int]) -> list[int]:
    """The turns behind the ``mentioned`` entities, best first, leaving out ``exclude``.

    A turn scores the sum over its entities of 1 / (turns that entity is in): a rare entity
    points at its turns precisely. Ties go to the newer turn.
    """
    scores: dict[int, float] = {}
    for record in mentioned.values():
        weight = 1.0 / len(record.turns)
        for t in record.turns:
            if t not in exclude:
                scores[t] = scores.get(t, 0.0) + weight
    return sorted(scores, key=lambda t: (-scores[t], -t))


def facts_of(entities: Sequence[Any], time: str) -> list[str]:
    """The distinct numbers, dates and places among one turn's ``entities`` (dates anchored to ``time``)."""
    facts: list[str] = []
    for entity in entities:
        if entity.label in FACT_LABELS:
            text = " ".join(entity.text.split())
            if entity.label in CONTEXT_LABELS:
                text = anchor_dates(text, time)
            if text and text not in facts:
                facts.append(text)
    return facts


def turn_time(turn: Turn) -> str:
    """The turn's own time (a message's ``timestamp``), shown in entity and summary lines; "" when undated.

    A first-seen stamp is not shown: it would cost every entity line tokens for a time the
    conversation never stated.
    """
    return next((m.timestamp for m in turn.messages if m.timestamp), "") or ""


def entity_text(turn: Turn) -> str:
    """The text of ``turn`` the entity extractor reads: its non-empty messages, one per line."""
    return "\n".join(m.text for m in turn.messages if m.text.strip())


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _extract(
    turns: Sequence[Turn], indices: list[int], extractor: Any, *, log_failure: bool = True
) -> tuple[list[list[Entity]] | None, int]:
    """The entities of turns ``indices`` in one extractor call (None if it failed); LLM calls made."""
    texts = [entity_text(turns[i]) for i in indices]
    found: list[list[Entity]] | None
    with meter_calls() as meter:
        try:
            found = list(extractor.extract(texts))
        except Exception as exc:  # keep the cascade going; the turns stay in history
            if log_failure:
                logger.warning("entity extractor failed on turns %d-%d (%s)", indices[0], indices[-1], exc)
            found = None
    return found, meter.calls_of(extractor, uses=len(texts))

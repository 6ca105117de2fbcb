"""Loaders that turn dialogue datasets into ctxmgmt turns with gold questions.

Formats:
- LoCoMo (``conversation.session_N`` utterances, ``qa`` with ``evidence`` dia ids). LoCoMo is
  human-human: a turn is a consecutive utterance pair within a session; the first utterance
  of a pair gets the user role, the second the assistant role; the speaker's name and the
  session date are kept on each message.
- MT-Bench+ (``conversations`` of human/chatbot messages with ``turn-info``); the final probe
  (``...-Q``) is the question; its gold evidence are the earlier human turns of the topics it
  names.
- LongMemEval (``haystack_sessions`` with ``haystack_dates``, one question per item, plain or
  gzipped JSON): a user chatting with an assistant over dated sessions. A turn starts at every
  user message and at every session start; each message carries its session's date as its
  timestamp; the question is dated ``question_date`` (the "now" of relative dates). Evidence
  are the turns holding a ``has_answer`` message (those messages are the gold ones), and the
  answer sessions are kept for session recall. Abstention items (``_abs``) and answers of 3
  characters or fewer have no gold answer string (they are left out of answer containment).
- Generic JSONL, one dialogue per line:
  ``{"id": str, "turns": [{"user": str, "assistant": str, "date"?: str}],
  "questions": [{"question": str, "answer"?: str, "evidence"?: [turn index], "category"?: str}]}``.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message, Turn


@dataclass(frozen=True)
class Question:
    """A question asked after the whole dialogue, with gold labels.

    Attributes:
        text: The question.
        answer: Gold answer string ("" when unknown).
        evidence: Turn indices holding the evidence (may be empty).
        category: Dataset category label as a string.
        date: When the question is asked (a timestamp string), or None. A dated question is
            asked as the user message in progress (put, then ``get``), as a chat asks it.
        sessions: Turn indices of each gold evidence session (for session recall; may be empty).
        evidence_messages: For each turn of ``evidence``, the positions of its gold messages in
            the turn (LoCoMo: the evidence utterances; MT-Bench+: the human message; LongMemEval:
            the ``has_answer`` messages); empty: every message of the turn is gold.
    """

    text: str
    answer: str = ""
    evidence: tuple[int, ...] = ()
    category: str = ""
    date: str | None = None
    sessions: tuple[tuple[int, ...], ...] = ()
    evidence_messages: tuple[tuple[int, ...], ...] = ()


@dataclass
class Dialogue:
    """One conversation as turns, with its questions."""

    id: str
    turns: list[Turn]
    questions: list[Question] = field(default_factory=list)


_SESSION = re.compile(r"^session_(\d+)$")


def load_locomo(path: str | Path, *, categories: tuple[int, ...] = (1, 2, 3, 4)) -> list[Dialogue]:
    """Load a LoCoMo-format file; questions of other categories (5: adversarial) are skipped."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    dialogues: list[Dialogue] = []
    for sample in raw:
        conv = sample["conversation"]
        sessions = sorted(
            (int(m.group(1)), key)
            for key in conv
            if (m := _SESSION.match(key)) and isinstance(conv[key], list)
        )
        messages: list[Message] = []
        turn_of: dict[str, int] = {}
        position_of: dict[str, int] = {}  # the utterance's message in its turn
        turn = -1
        for number, key in sessions:
            date = conv.get(f"session_{number}_date_time")
            for pos, utt in enumerate(conv[key]):
                if pos % 2 == 0:
                    turn += 1
                text = utt.get("text") or ""
                if utt.get("blip_caption"):
                    text = f"{text} [shares a photo of {utt['blip_caption']}]".strip()
                messages.append(
                    Message(
                        "user" if pos % 2 == 0 else "assistant",
                        text or "(no text)",
                        name=utt.get("speaker"),
                        timestamp=date,
                        metadata={"dia_id": utt.get("dia_id")},
                    )
                )
                turn_of[utt.get("dia_id", "")] = turn
                position_of[utt.get("dia_id", "")] = pos % 2
        turns = group_turns(messages)
        questions = []
        for qa in sample.get("qa", []):
            if int(qa.get("category", 0)) not in categories or "answer" not in qa:
                continue
            gold: dict[int, set[int]] = {}
            for e in _evidence_ids(qa.get("evidence", [])):
                if e in turn_of:
                    gold.setdefault(turn_of[e], set()).add(position_of[e])
            evidence = tuple(sorted(gold))
            questions.append(
                Question(
                    qa["question"],
                    str(qa["answer"]),
                    evidence,
                    str(qa.get("category", "")),
                    evidence_messages=tuple(tuple(sorted(gold[t])) for t in evidence),
                )
            )
        dialogues.append(Dialogue(str(sample.get("sample_id", len(dialogues))), turns, questions))
    return dialogues


def _evidence_ids(evidence: list[str]) -> list[str]:
    ids: list[str] = []
    for item in evidence:
        # a few LoCoMo items pack several ids into one string ("D8:6; D9:17")
        ids.extend(part.strip() for part in re.split(r"[;,\s]+", str(item)) if part.strip())
    return ids


def load_mtbenchplus(path: str | Path) -> list[Dialogue]:
    """Load an MT-Bench+-format file: the ``-Q`` probe becomes the question."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    dialogues: list[Dialogue] = []
    for item in raw:
        messages: list[Message] = []
        prefixes: list[str] = []
        probe: tuple[str, str] | None = None
        for msg in item["conversations"]:
            info = str(msg.get("turn-info", ""))
            if msg["from"] == "human":
                if info.endswith("-Q"):
                    probe = (msg["value"], info)
                    continue
                messages.append(Message("user", msg["value"] or "(empty)", metadata={"turn-info": info}))
                prefixes.append("-".join(info.split("-")[:2]))
            elif messages:
                messages.append(Message("assistant", msg["value"] or "(no reply)"))
        turns = group_turns(messages)
        questions = []
        if probe is not None:
            topics = _probe_topics(probe[1])
            evidence = tuple(i for i, p in enumerate(prefixes) if p in topics)
            gold = ((0,),) * len(evidence)  # the human message of each turn
            questions.append(Question(probe[0], "", evidence, "probe", evidence_messages=gold))
        dialogues.append(Dialogue(str(item.get("id", len(dialogues))), turns, questions))
    return dialogues


def _probe_topics(info: str) -> set[str]:
    """Topics ``{category}-{question id}`` named by a probe's turn-info."""
    body = info[: -len("-Q")]
    parts = body.split("-")
    topics = set()
    for i in range(0, len(parts) - 1, 2):
        topics.add(f"{parts[i]}-{parts[i + 1]}")
    return topics


SHORTEST_ANSWER = 4
"""LongMemEval answers shorter than this (in characters) are not checked for containment: "25"
or "six" turns up in almost any long context."""


def load_longmemeval(path: str | Path) -> list[Dialogue]:
    """Load a LongMemEval file (plain or gzipped JSON list of items), one dialogue per item."""
    dialogues: list[Dialogue] = []
    for item in _read_json(Path(path)):
        turns: list[Turn] = []
        evidence: dict[int, tuple[int, ...]] = {}
        session_turns: dict[str, list[int]] = {}
        for session_id, date, session in zip(
            item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"], strict=True
        ):
            groups: list[list[dict[str, object]]] = []
            for message in session:
                if message["role"] == "user" or not groups:
                    groups.append([])
                groups[-1].append(message)
            for group in groups:
                gold = tuple(k for k, m in enumerate(group) if m.get("has_answer"))
                if gold:
                    evidence[len(turns)] = gold
                session_turns.setdefault(session_id, []).append(len(turns))
                turns.append(Turn(len(turns), tuple(_longmemeval_message(m, date) for m in group)))
        answer = str(item.get("answer", ""))
        if str(item["question_id"]).endswith("_abs") or len(answer.strip()) < SHORTEST_ANSWER:
            answer = ""
        sessions = tuple(
            tuple(session_turns[s]) for s in item.get("answer_session_ids", ()) if s in session_turns
        )
        question = Question(
            item["question"],
            answer,
            tuple(sorted(evidence)),
            str(item.get("question_type", "")),
            date=item.get("question_date"),
            sessions=sessions,
            evidence_messages=tuple(evidence[t] for t in sorted(evidence)),
        )
        dialogues.append(Dialogue(str(item["question_id"]), turns, [question]))
    return dialogues


def _longmemeval_message(message: dict[str, object], date: str) -> Message:
    role = "user" if message["role"] == "user" else "assistant"
    return Message(role, str(message["content"] or "(no text)"), timestamp=date)


def _read_json(path: Path) -> Any:
    """A JSON file, gunzipped first when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as stream:
            return json.load(stream)
    return json.loads(path.read_text(encoding="utf-8"))


def load_jsonl(path: str | Path) -> list[Dialogue]:
    """Load the generic JSONL format described in this module's docstring."""
    dialogues = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        item = json.loads(line)
        messages: list[Message] = []
        for t in item["turns"]:
            messages.append(Message("user", t["user"], timestamp=t.get("date")))
            if t.get("assistant"):
                messages.append(Message("assistant", t["assistant"], timestamp=t.get("date")))
        questions = [
            Question(
                q["question"],
                str(q.get("answer", "")),
                tuple(q.get("evidence", ())),
                str(q.get("category", "")),
            )
            for q in item.get("questions", [])
        ]
        dialogues.append(Dialogue(str(item.get("id", n)), group_turns(messages), questions))
    return dialogues


def load_dialogues(path: str | Path) -> list[Dialogue]:
    """Load any supported format, told apart by extension and shape."""
    path = Path(path)
    if not path.exists():
        raise ConfigurationError(f"no such data file: {path}")
    if path.suffix == ".jsonl":
        return load_jsonl(path)
    head = _read_json(path)
    first = head[0] if isinstance(head, list) and head else {}
    if isinstance(first, dict) and "haystack_sessions" in first:
        return load_longmemeval(path)
    if isinstance(first, dict) and "conversation" in first and "qa" in first:
        return load_locomo(path)
    if isinstance(first, dict) and "conversations" in first:
        return load_mtbenchplus(path)
    raise ConfigurationError(f"{path}: not a LoCoMo, MT-Bench+, LongMemEval or generic JSONL file")

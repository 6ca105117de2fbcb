"""Benchmark: replay dialogue data with gold labels through memories and measure them."""

from ctxmgmt.app.bench.data import Dialogue, Question, load_dialogues, load_locomo, load_mtbenchplus
from ctxmgmt.app.bench.metrics import answer_contained, evidence_recall, percentile

__all__ = [
    "Dialogue",
    "Question",
    "answer_contained",
    "evidence_recall",
    "load_dialogues",
    "load_locomo",
    "load_mtbenchplus",
    "percentile",
]

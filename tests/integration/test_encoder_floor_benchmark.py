"""``benchmarks/encoder_floor.py``: its work count is torch's own, and a tiny run reports every figure."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tests.helpers import load_benchmark
from tests.unit.app.test_bench_data import LOCOMO


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("encoder_floor")


@pytest.mark.parametrize("tokens", [12, 96, 200])
def test_work_count_matches_torchs_flop_counter(bench: ModuleType, default_embedder, tokens: int) -> None:
    """The floor's multiply-adds are those torch counts in a forward pass of the model's transformer."""
    encoder = default_embedder.model[0].auto_model
    ids = torch.full((1, tokens), 1000, dtype=torch.long)
    fused = encoder.config._attn_implementation
    encoder.config._attn_implementation = "eager"  # the counter does not see fused attention
    try:
        with torch.inference_mode(), FlopCounterMode(display=False) as counter:
            encoder(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        encoder.config._attn_implementation = fused
    counted = counter.get_total_flops()
    d = encoder.config.hidden_size
    pooler = 2 * d * d  # BertModel's pooler (one d x d layer on the first token), unused for embeddings
    assert bench.flops(tokens, encoder.config) == pytest.approx(counted - pooler, rel=1e-9)


def test_tiny_run_reports_floor_and_measured(bench: ModuleType, default_embedder, tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    figures = bench.main(["--turns", "24", "--repeats", "1", "--json", str(out)])
    assert figures["turns"] == 24 and figures["data"] == "demo"
    assert figures["matmul_gflops"] > 0 and figures["gflop_per_turn_median"] > 0
    assert 0 < figures["conversation_floor_s"] and 0 < figures["conversation_measured_s"]
    assert 0 < figures["turn_floor_ms"] and 0 < figures["turn_measured_p50_ms"]
    assert json.loads(out.read_text()) == figures


def test_locomo_texts_repeat_the_dialogues_turns(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    texts = bench.texts_of("locomo", 7, str(path))
    assert len(texts) == 7 and texts[0] == texts[3] == texts[6] and "Miso" in texts[1]

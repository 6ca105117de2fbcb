"""Summariser cost of SWinSummaryBuffer vs the frameworks' summarising memories.

Run: ``python benchmarks/swin_calls.py [--turns 300] [--token-limit 2000]``.
Replays a conversation of ``--turns`` turns (the shipped demo conversation, repeated with a
numbered suffix) through:
- SWin with its LLM summariser on a call-counting fake model (window=6, overlap=2);
- LlamaIndex ``ChatSummaryMemoryBuffer`` (``token_limit``) with a call-counting fake LLM;
- LangChain ``SummarizationMiddleware`` (``trigger=("tokens", token_limit)``) with a
  call-counting ``GenericFakeChatModel``.
It prints summariser calls (and, for SWin, summariser input tokens) every 50 turns, the calls
per turn, and the least-squares slope of SWin's cumulative input tokens per turn.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from overhead import conversation  # noqa: E402

from ctxmgmt.app.bench.framework_baselines import (  # noqa: E402
    LangChainSummarizationStrategy,
    LlamaIndexSummaryStrategy,
)
from ctxmgmt.app.testing import FakeLLM  # noqa: E402
from ctxmgmt.components.llm_summarizer import LLMSummarizer  # noqa: E402
from ctxmgmt.components.tokens import default_token_counter  # noqa: E402
from ctxmgmt.strategies.swin import SWinStrategy  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--token-limit", type=int, default=2000)
    args = parser.parse_args()
    turns = conversation(args.turns)
    model = FakeLLM(lambda prompt: f"- Fact number {model.calls} from the conversation.")
    counter = default_token_counter()
    input_tokens = counted = 0  # summariser input tokens; prompts counted so far
    swin = SWinStrategy(summarizer=LLMSummarizer(model))
    llama = LlamaIndexSummaryStrategy(token_limit=args.token_limit)
    lc = LangChainSummarizationStrategy(trigger_tokens=args.token_limit)
    points: list[tuple[int, int]] = []
    header = ("turns", "SWin calls", "SWin input tok", "LI summary calls", "LC summary calls")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (6, 11, 15, 17, 17), strict=True)))
    for n, turn in enumerate(turns, start=1):
        for strategy in (swin, llama, lc):
            strategy.add(turn)
        input_tokens += sum(counter.count(p) for p in model.prompts[counted:])
        counted = len(model.prompts)
        points.append((n, input_tokens))
        if n % 50 == 0 or n == len(turns):
            print(f"{n:>6} {model.calls:>11} {input_tokens:>15} {llama.llm_calls:>17} {lc.llm_calls:>17}")
    n = len(turns)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    print(
        f"SWin: {model.calls / n:.3f} calls/turn (bound 1/(window-overlap) = {1 / (6 - 2):.3f}); "
        f"input tokens grow {slope:.1f} per turn (least squares over all {n} turns)"
    )
    print(
        f"LlamaIndex ChatSummaryMemoryBuffer: {llama.llm_calls / n:.3f} calls/turn; "
        f"LangChain SummarizationMiddleware: {lc.llm_calls / n:.3f} calls/turn"
    )


if __name__ == "__main__":
    main()

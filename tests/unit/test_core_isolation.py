"""The framework-free core imports no framework and no model runtime."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

FORBIDDEN = ["langchain_core", "langchain", "llama_index", "torch", "psycopg", "psycopg_pool"]

SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import numpy as np

    import ctxmgmt
    import ctxmgmt.session.conversation
    import ctxmgmt.store
    from ctxmgmt import ConversationMemory, KadaneDialStrategy, Message, build_context


    def embed(texts):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % 16] += 1.0
        return out


    strategy = KadaneDialStrategy(embedder=embed, keep_last=1)
    messages = [Message("system", "be brief")]
    for k in range(8):
        messages.append(Message("user", f"question {k} about topic {k % 3}"))
        messages.append(Message("assistant", f"answer {k}"))
    messages.append(Message("user", "back to topic 1"))
    context = build_context(strategy, messages, budget=200)
    memory = ConversationMemory(KadaneDialStrategy(embedder=embed))
    memory.add_messages(messages)
    memory.select().explain()
    prefixes = PREFIXES
    loaded = sorted(
        name for name in sys.modules
        if any(name == p or name.startswith(p + ".") for p in prefixes)
    )
    print(json.dumps({"loaded": loaded, "blocks": [b.kind for b in context.blocks]}))
    """
)


def test_core_imports_no_framework() -> None:
    script = SCRIPT.replace("PREFIXES", repr(FORBIDDEN))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    assert report["blocks"][0] == "system" and report["blocks"][-1] == "current"


def test_plain_import_imports_no_framework() -> None:
    code = (
        "import sys, json, ctxmgmt; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []

"""Test doubles that the tests, the examples and the benchmarks share: no model weights, no network.

- :class:`HashingEmbedder`: a deterministic bag-of-words embedder; texts sharing words get
  similar vectors, so relevance still behaves sensibly without a model.
- :class:`CountingEmbedder`, :class:`CachingEmbedder` and :class:`CountingExtractor`: wrappers
  around a real component that count what it was asked to do, or remember its vectors.
- :class:`FakeLLM`: a ``prompt -> text`` completion function (what ``LLMSummarizer``,
  ``LLMDecider`` and ``LLMEntityExtractor`` call) with a fixed or computed answer, which records
  every prompt and can be made slow or failing; :class:`HangingLLM` waits until released.
- :func:`plausible_answer`: an answer, deterministic in the prompt, that the summariser, the
  topic decider and the branch decider all accept.

Nothing here is used by the memories themselves, and nothing imports a framework. The
framework fakes (chat models, LLMs) live in ``langchain_ctxmgmt.testing`` and
``llamaindex_ctxmgmt.testing``.

Example::

    from ctxmgmt import KadaneDialStrategy
    from ctxmgmt.app.testing import CountingEmbedder, HashingEmbedder

    embedder = CountingEmbedder(HashingEmbedder())
    strategy = KadaneDialStrategy(embedder=embedder)
    ...
    assert embedder.texts == 12
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ctxmgmt.components.embedder_protocol import embedder_dimension
from ctxmgmt.messages.types import Message
from ctxmgmt.scoring.vectors import normalise
from ctxmgmt.session.conversation import Codec, ConversationPool
from ctxmgmt.session.stored_state import StoredState
from ctxmgmt.store.base import StateStore
from ctxmgmt.strategies.base import Strategy

__all__ = [
    "CachingEmbedder",
    "CountingEmbedder",
    "CountingExtractor",
    "FakeLLM",
    "HangingLLM",
    "HashingEmbedder",
    "StatePool",
    "plausible_answer",
]

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Deterministic bag-of-words embedder: each word adds to one dimension picked by its MD5.

    Every row also gets 0.01 in dimension 0 (so no row is all zeros), then rows are scaled to
    unit length. Texts sharing words get similar vectors; texts sharing none are orthogonal but
    for that constant (unsigned) or near-orthogonal (signed).

    Args:
        dim: Vector dimension; default 256 (384 matches all-MiniLM-L6-v2, for load tests
            whose memory and store sizes should look like the real model's).
        signed: Add +1 or -1 per word (a bit of its hash picks which) instead of +1, so the
            cosine of unrelated texts centres on 0 rather than staying positive. Default
            False.

    Attributes:
        calls: The number of texts of every ``embed`` call, in order.
    """

    def __init__(self, dim: int = 256, *, signed: bool = False) -> None:
        self.dim = dim
        self.signed = signed
        self.calls: list[int] = []

    @property
    def dimension(self) -> int:
        """Dimension of the vectors (``dim``)."""
        return self.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-length float32 row per text; shape (len(texts), dim)."""
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                h = int(hashlib.md5(word.encode()).hexdigest(), 16)  # noqa: S324 - not security
                out[row, h % self.dim] += -1.0 if self.signed and (h >> 40) & 1 else 1.0
            out[row, 0] += 0.01
        return normalise(out)


def _default_embedder() -> Any:
    from ctxmgmt.components.embedder import default_embedder

    return default_embedder()


class CountingEmbedder:
    """Counts what another embedder is asked to embed: documents (``embed``) and queries (``embed_query``).

    Args:
        inner: The embedder doing the work; default the bundled all-MiniLM-L6-v2
            (:func:`ctxmgmt.components.embedder.default_embedder`).

    Attributes:
        calls: ``embed`` calls.
        texts: Texts embedded through ``embed``.
        queries: Queries embedded through ``embed_query``, one each.
    """

    def __init__(self, inner: Any = None) -> None:
        self.inner = _default_embedder() if inner is None else inner
        self.calls = 0
        self.texts = 0
        self.queries = 0

    @property
    def dimension(self) -> int | None:
        """The inner embedder's declared dimension (see ``embedder_dimension``)."""
        return embedder_dimension(self.inner)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents with the inner embedder (counted in ``calls`` and ``texts``)."""
        self.calls += 1
        self.texts += len(texts)
        return np.asarray(self.inner.embed(texts))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query (counted in ``queries``): the inner embedder's query path if it has one."""
        self.queries += 1
        query = getattr(self.inner, "embed_query", None)
        return np.asarray(query(text) if callable(query) else self.inner.embed([text]))


class CachingEmbedder:
    """Remembers another embedder's vector of every text it embedded, and embeds each text once.

    For runs that embed the same texts many times (tuning, building stored conversations).
    Nothing is ever evicted; each call embeds its not-yet-seen texts in one batch.

    Args:
        inner: The embedder doing the work; default the bundled all-MiniLM-L6-v2.
    """

    def __init__(self, inner: Any = None) -> None:
        self.inner = _default_embedder() if inner is None else inner
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts``, as the inner embedder returned them; shape (len(texts), dim)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self.cache[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


class CountingExtractor:
    """Counts the calls made to another entity extractor, and the texts it was given.

    Args:
        inner: The extractor doing the work; default spaCy's small English model
            (``as_entity_extractor(None)``).

    Attributes:
        calls: ``extract`` calls.
        texts: Texts passed to ``extract``.
    """

    def __init__(self, inner: Any = None) -> None:
        if inner is None:
            from ctxmgmt.components.entities import as_entity_extractor

            inner = as_entity_extractor(None)
        self.inner = inner
        self.uses_llm: bool = bool(getattr(inner, "uses_llm", False))
        self.calls = 0
        self.texts = 0

    def extract(self, texts: Sequence[str]) -> Any:
        """The inner extractor's entities of ``texts`` (counted)."""
        self.calls += 1
        self.texts += len(texts)
        return self.inner.extract(texts)


def plausible_answer(prompt: str) -> str:
    """An LLM's answer to ``prompt``, deterministic in it, that every ctxmgmt prompt accepts.

    A topic-decider prompt gets ``create`` (about one in five, and always when there is no
    topic yet), ``switch`` to a listed topic (one in five) or ``continue``; a branch-decider
    prompt gets ``create_branch`` at its first node (one in seven) or ``continue``; anything
    else (a summariser prompt) gets two bullet points, the first quoting words of the
    ``<conversation>`` excerpt. Which answer is picked follows the prompt's SHA-1.
    """
    h = int(hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:8], 16)  # noqa: S324 - not security
    if "Decide where the user's new message belongs" in prompt:
        others = re.findall(r"^- topic (\d+): ", prompt, re.M)
        if "- topic " not in prompt or h % 5 == 0:
            return '{"action": "create", "topic": null}'
        if h % 5 == 1 and others:
            return json.dumps({"action": "switch", "topic": int(others[h % len(others)])})
        return '{"action": "continue", "topic": null}'
    if "a conversation can branch" in prompt:
        nodes = re.findall(r"^- node (\d+) \(", prompt, re.M)
        if h % 7 == 0 and nodes:
            return json.dumps({"action": "create_branch", "node": int(nodes[0])})
        return '{"action": "continue", "node": null}'
    excerpt = prompt.rsplit("<conversation>", 1)[-1].split("</conversation>", 1)[0]
    words = re.findall(r"[A-Za-z0-9']+", excerpt)
    return f"- The conversation mentions {' '.join(words[3:15]) or 'nothing new'}.\n- Fact {h % 997}."


class FakeLLM:
    """A ``prompt -> text`` completion function that records every prompt and counts its calls.

    Each call first records the prompt (so ``calls`` already counts it), then waits ``delay``,
    then raises ``error`` if one is given, else returns the answer.

    Args:
        answer: The answer to every prompt, or a function of the prompt returning it. It may
            read ``calls`` (the current call's number from 1). Default :func:`plausible_answer`.
        delay: Seconds each call sleeps before answering (a slow model); default 0.
        error: Raised by every call instead of answering (a failing provider); default None.

    Attributes:
        prompts: Every prompt received, in order.
    """

    def __init__(
        self,
        answer: str | Callable[[str], str] = plausible_answer,
        *,
        delay: float = 0.0,
        error: BaseException | None = None,
    ) -> None:
        self.answer = answer
        self.delay = delay
        self.error = error
        self.prompts: list[str] = []

    @property
    def calls(self) -> int:
        """Calls received so far (failed ones included)."""
        return len(self.prompts)

    def __call__(self, prompt: str) -> str:
        """Record ``prompt``, wait ``delay``, then raise ``error`` or answer."""
        self.prompts.append(prompt)
        if self.delay:
            time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.answer(prompt) if callable(self.answer) else self.answer


class HangingLLM(FakeLLM):
    """A :class:`FakeLLM` whose calls block until ``release`` is set (a model that never answers).

    Once ``release.set()`` is called, every waiting and later call answers at once with
    ``answer``. Set it when done (e.g. in a fixture's teardown), or the calling threads stay
    blocked until the process exits.

    Args:
        answer: What a call answers once released; default a summary item no test should see.

    Attributes:
        release: The ``threading.Event`` the calls wait for.
    """

    def __init__(self, answer: str | Callable[[str], str] = "- a late answer that must be ignored") -> None:
        super().__init__(answer)
        self.release = threading.Event()

    def __call__(self, prompt: str) -> str:
        """Record ``prompt``, wait for ``release``, then answer."""
        self.prompts.append(prompt)
        self.release.wait()
        return self.answer(prompt) if callable(self.answer) else self.answer


class StatePool:
    """Stored states of conversations of core turns, by id, as the adapters' pools keep them.

    For tests and benchmarks of the store sync without a framework: ``get(id)`` is the
    :class:`~ctxmgmt.session.stored_state.StoredState` of that conversation in a
    :class:`~ctxmgmt.session.conversation.ConversationPool` (its key ``"<strategy>:<surface>:<id>"``),
    whose ``sync(turns)`` derives and persists the completed turns given.

    Args:
        factory: Builds a new, empty strategy.
        store: Where derived state persists; None = in process only.
        max_sessions: Live conversations kept (least recently used evicted); 1000.
        surface: Middle part of every key; ``"test"``.
    """

    def __init__(
        self,
        factory: Callable[[], Strategy],
        *,
        store: StateStore | None = None,
        max_sessions: int = 1000,
        surface: str = "test",
    ) -> None:
        codec: Codec[Message] = Codec(to_core=lambda m: m, snapshot=None, memory_message=lambda m: m)
        self.pool: ConversationPool[Message] = ConversationPool(
            factory, codec, surface=surface, store=store, max_conversations=max_sessions
        )

    def get(self, conversation_id: str) -> StoredState:
        """The stored state of ``conversation_id`` (created or reloaded)."""
        return self.pool.get(conversation_id).state

    def __len__(self) -> int:
        return len(self.pool)

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self.pool

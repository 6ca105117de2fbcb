"""``SWinSummaryBuffer``: classic LangChain memory with a sliding-window summary plus recent turns."""

from __future__ import annotations

from typing import Any

from ctxmgmt import Strategy
from ctxmgmt.strategies.swin import GAMMA, OVERLAP, RECENT_TURNS, WINDOW, SWinStrategy
from langchain_ctxmgmt._base import CtxMgmtMemory
from langchain_ctxmgmt._llm import resolve_summarizer


class SWinSummaryBuffer(CtxMgmtMemory):
    r"""SWin sliding-window summarisation as a classic ``BaseMemory`` (``langchain_classic``).

    Saved turns are cut into overlapping windows of ``window`` turns (consecutive windows
    share ``overlap`` turns); each window is summarised once, conditioned on the memory so
    far, and its items join a deduplicated memory of at most ``gamma`` items (least
    recent/salient forgotten first). ``load_memory_variables`` returns the memory as one
    ``SystemMessage`` (string form: a ``System:`` line) followed by the recent turns verbatim,
    within ``max_token_limit``. The full history stays in ``chat_memory`` / :attr:`messages`.

    With the default extractive summariser there is no LLM call; with ``llm=`` (any
    LangChain ``BaseChatModel``) about one call per ``window - overlap`` turns.

    Attributes:
        window: Turns per window; 6 per SWin 4.5.
        overlap: Turns shared by consecutive windows (< window); 2 per SWin 4.5.
        gamma: Memory capacity in items; default 48 (about 12 windows of extractive items).
        recent_turns: Newest turns always returned verbatim besides the open window; 0.
        background: Summarise windows in a worker thread (``flush()`` waits); default False.
        llm: A LangChain chat model to summarise with; None = the offline extractive summariser.
        summarizer: Any ctxmgmt Summarizer (instead of ``llm``).

    The shared fields (``memory_key``, ``input_key``, ``output_key``, ``return_messages``,
    ``human_prefix``, ``ai_prefix``, ``max_token_limit``, ``token_counter``, ``chat_memory``)
    are described on :class:`~langchain_ctxmgmt._base.CtxMgmtMemory`; ``embedder`` is unused.

    Example:
        >>> from langchain_ctxmgmt import SWinSummaryBuffer
        >>> memory = SWinSummaryBuffer(max_token_limit=2000)
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]
        'Human: My cat is Miso.\nAI: Cute!'
    """

    window: int = WINDOW
    overlap: int = OVERLAP
    gamma: int = GAMMA
    recent_turns: int = RECENT_TURNS
    background: bool = False
    llm: Any = None
    summarizer: Any = None

    def _make_strategy(self) -> Strategy:
        return SWinStrategy(
            summarizer=resolve_summarizer(self.llm, self.summarizer),
            token_counter=self.token_counter,
            window=self.window,
            overlap=self.overlap,
            gamma=self.gamma,
            recent_turns=self.recent_turns,
            background=self.background,
        )

    @property
    def swin(self) -> SWinStrategy:
        """The SWinStrategy (memory items, windows, forgotten items)."""
        strategy = self.strategy
        assert isinstance(strategy, SWinStrategy)
        return strategy

    @property
    def llm_calls(self) -> int:
        """LLM calls made by the summariser so far."""
        return self.swin.llm_calls

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        self.swin.flush()

    def new_session(self) -> None:
        """Start a new conversation that remembers this one: clear ``chat_memory``, keep the memory."""
        with self._lock:
            self.swin.new_session()
            self.chat_memory.clear()
            self._last_context = None

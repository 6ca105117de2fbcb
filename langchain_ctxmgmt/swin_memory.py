"""``SWinSummaryBuffer``: classic LangChain memory with a sliding-window summary plus recent turns."""

from __future__ import annotations

from ctxmgmt.strategies.swin import SWinStrategy
from langchain_ctxmgmt._base import StrategyMemory


class SWinSummaryBuffer(StrategyMemory, strategy=SWinStrategy):
    r"""SWin sliding-window summarisation as a classic ``BaseMemory`` (``langchain_classic``).

    Saved turns are cut into overlapping windows of ``window`` turns (consecutive windows
    share ``overlap`` turns); each window is summarised once, conditioned on the memory so
    far, and its items join a deduplicated memory of at most ``gamma`` items (least
    recent/salient forgotten first). ``load_memory_variables`` returns the memory as one
    framed memory message (a ``HumanMessage`` by default) followed by the recent turns verbatim,
    within ``max_token_limit``. The full history stays in ``chat_memory`` / :attr:`messages`.

    With the default extractive summariser there is no LLM call; with ``llm=`` (any
    LangChain ``BaseChatModel``) about one call per ``window - overlap`` turns.

    Example:
        >>> from langchain_ctxmgmt import SWinSummaryBuffer
        >>> memory = SWinSummaryBuffer(max_token_limit=2000)
        >>> memory.save_context({"input": "My cat is Miso."}, {"output": "Cute!"})
        >>> memory.load_memory_variables({"input": "What is my cat called?"})["history"]
        'Human: My cat is Miso.\nAI: Cute!'
    """

    def flush(self) -> None:
        """Wait until background summaries are merged (no-op in the default sync mode)."""
        self.strategy.flush()

    def new_session(self) -> None:
        """Start a new conversation that remembers this one: clear ``chat_memory``, keep the memory."""
        conversation = self._conversation()
        with conversation.lock:
            conversation.carry_over()
            self.chat_memory.clear()

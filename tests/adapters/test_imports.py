"""Each package's public surface, pinned (as LangChain partner packages pin theirs)."""

from __future__ import annotations

import ctxmgmt
import langchain_ctxmgmt
import llamaindex_ctxmgmt

MEMORIES = [
    "ACMTieredBuffer",
    "DiscourseTreeMemory",
    "KadaneDialMemory",
    "SWinSummaryBuffer",
    "TopicThreadMemory",
]

LANGCHAIN = sorted(
    [
        *MEMORIES,
        "ACMTieredMiddleware",
        "DiscourseTreeMiddleware",
        "KadaneDialMiddleware",
        "SWinSummaryMiddleware",
        "TopicThreadMiddleware",
        "ACMTieredSelector",
        "DiscourseTreeSelector",
        "KadaneDialSelector",
        "SWinSummarySelector",
        "TopicThreadSelector",
        "StrategyMemory",
        "StrategyMiddleware",
        "StrategySelector",
    ]
)

LLAMAINDEX = sorted(
    [
        *MEMORIES,
        "ACMTieredBlock",
        "DiscourseTreeBlock",
        "KadaneDialBlock",
        "SWinSummaryBlock",
        "TopicThreadBlock",
        "StrategyMemory",
        "StrategyMemoryBlock",
        "erase_from_blocks",
        "flush_early",
    ]
)

CORE = """
    ACMStrategy Block BudgetExceededError ComponentError ConfigurationError Context
    ConversationMemory CtxMgmtError DiscourseTreeStrategy History InvalidMessageError
    KadaneDialStrategy KadaneResult Message SWinStrategy Strategy StrategyConfig
    TopicThreadStrategy Turn __version__ build_context group_turns kadane_dial warm_up
""".split()


def test_langchain_all():
    assert langchain_ctxmgmt.__all__ == LANGCHAIN
    assert all(hasattr(langchain_ctxmgmt, name) for name in LANGCHAIN)


def test_llamaindex_all():
    assert llamaindex_ctxmgmt.__all__ == LLAMAINDEX
    assert all(hasattr(llamaindex_ctxmgmt, name) for name in LLAMAINDEX)


def test_core_all():
    assert sorted(ctxmgmt.__all__) == sorted(CORE)
    assert all(hasattr(ctxmgmt, name) for name in CORE)


def test_generic_bases_have_matching_names():
    assert langchain_ctxmgmt.StrategyMemory.__name__ == llamaindex_ctxmgmt.StrategyMemory.__name__


TESTING = """
    CachingEmbedder CountingEmbedder CountingExtractor FakeLLM HangingLLM HashingEmbedder
    StatePool plausible_answer
""".split()


def test_testing_doubles_all():
    import ctxmgmt.app.testing
    import langchain_ctxmgmt.testing
    import llamaindex_ctxmgmt.testing

    assert sorted(ctxmgmt.app.testing.__all__) == sorted(TESTING)
    assert all(hasattr(ctxmgmt.app.testing, name) for name in TESTING)
    assert langchain_ctxmgmt.testing.__all__ == ["RecordingChatModel", "RecordingListChatModel"]
    assert llamaindex_ctxmgmt.testing.__all__ == ["PromptRecordingLLM", "RecordingFunctionLLM"]

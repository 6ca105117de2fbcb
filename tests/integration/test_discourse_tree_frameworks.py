"""Discourse-tree memories in real framework runs with fake models.

``create_agent`` through ``DiscourseTreeMiddleware`` (embedded and LLM decider), the classic
memory in a loop, a LlamaIndex ``SimpleChatEngine`` with ``DiscourseTreeMemory``, a
``FunctionAgent`` with a tool call, and ``Memory`` with ``DiscourseTreeBlock``; each asserts what
the model actually received.
"""

from __future__ import annotations

from langchain_core.messages import SystemMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import MockLLM

from langchain_ctxmgmt import DiscourseTreeMemory as LCDiscourseTreeMemory
from langchain_ctxmgmt import DiscourseTreeMiddleware
from langchain_ctxmgmt.testing import RecordingListChatModel
from llamaindex_ctxmgmt import DiscourseTreeBlock
from llamaindex_ctxmgmt import DiscourseTreeMemory as LIDiscourseTreeMemory
from llamaindex_ctxmgmt.testing import PromptRecordingLLM
from tests.adapters.test_llamaindex_contract import (
    SOURDOUGH,
    SOURDOUGH_QUERY,
    TOPIC_TURNS,
    WEATHER_QUERY,
    conversation,
    turns_present,
)
from tests.helpers import is_lc_memory, is_li_memory, memory_body, no_system_text
from tests.integration.test_langchain_agent import (
    CAT,
    arun_agent,
    run_agent,
    sent_turn_indices,
)
from tests.integration.test_llamaindex_engines import (
    WeatherLLM,
    ask_block,
    chat_once,
    weather_agent,
)

CAT_QUESTION = "What name did I give the grey cat from the shelter?"
FAITHFUL = {"recall_topics": 0, "summary_sections": None, "summary_share": None, "key_terms": 0}
"""Context-Agent's layout (``DiscourseTreeConfig.paper()``): the path only, every other topic summarised."""


# -- LangChain -----------------------------------------------------------------------------------


def test_agent_model_receives_summaries_then_the_cat_thread(hashing_embedder):
    middleware = DiscourseTreeMiddleware(embedder=hashing_embedder, **FAITHFUL)
    # history(): 8 one-topic turns, turn 3 a tool-call turn; run_agent checks the system prompt,
    # the question last, whole turns in order, tool calls paired, the state keeping everything
    received, full, _ = run_agent(middleware, CAT_QUESTION)

    # the summaries: a framed user-role memory message (ctxmgmt.messages.framing), never a system message
    summary = received[1]
    assert is_lc_memory(summary) and memory_body(summary.content).startswith("Summaries of the other topics")
    assert "Lisbon" in summary.content and "Miso" not in summary.content  # the cat topic is verbatim
    assert [type(m) for m in received].count(SystemMessage) == 1  # the app's system prompt only
    assert sent_turn_indices(received[2:], full) == [CAT, 8]
    context = middleware.last_context
    assert [b.kind for b in context.blocks] == ["system", "summary", "turns", "current"]
    assert context.details["plan"]["topic"]["action"] == "switch"
    assert "topic decision (embedded): switch" in middleware.explain()
    assert middleware.llm_calls == 0


async def test_agent_async_with_an_llm_decider(hashing_embedder):
    decider_model = RecordingListChatModel(responses=['{"action": "switch", "topic": 0}'])
    middleware = DiscourseTreeMiddleware(
        embedder=hashing_embedder, llm=decider_model, max_tokens=2000, **FAITHFUL
    )

    received = (await arun_agent(middleware, CAT_QUESTION)).received

    assert received[2].id == f"t{CAT}-h"  # the LLM sent the query back to topic 1 (the cat)
    # 8 history turns placed (7 decisions after the first) plus the query: FakeListChatModel cycles
    assert middleware.llm_calls == len(decider_model.prompts) >= 8
    assert any(CAT_QUESTION in p and "Topics so far" in p for p in decider_model.prompts)
    assert middleware.last_context.tokens <= 2000


def test_classic_memory_in_a_loop_branches_and_returns(default_embedder):
    memory = LCDiscourseTreeMemory(embedder=default_embedder, return_messages=True)
    exchanges = [
        ("Plan a trip to Rome in May for a week", "Rome in May is warm; see the Colosseum."),
        ("Which hotels near the Colosseum in Rome", "Hotel Forum is near the Colosseum."),
        ("Python pandas merge raises KeyError in pandas", "Check the pandas merge key columns."),
        ("Python pandas groupby two columns in pandas", "Use groupby with a list in pandas."),
    ]
    for user, answer in exchanges:
        memory.save_context({"input": user}, {"output": answer})
    sent = memory.load_memory_variables({"input": "Back to Rome: hotels near the Colosseum in May"})[
        "history"
    ]
    assert is_lc_memory(sent[0]) and "pandas" in memory_body(sent[0].content)
    assert no_system_text(sent, "pandas")
    assert [m.content for m in sent[1::2]] == [exchanges[0][0], exchanges[1][0]]
    assert [n.tree for n in memory.strategy.nodes] == [0, 0, 1, 1]


# -- LlamaIndex ------------------------------------------------------------------------------------


def test_simple_chat_engine_receives_summaries_and_the_sourdough_thread(default_embedder):
    memory = LIDiscourseTreeMemory.from_defaults(chat_history=conversation(), embed_model=default_embedder)

    sent = chat_once(memory)  # checks the system prompt, the question last, the store lossless

    # the summaries: a framed user-role memory message; the app's system prompt is the only system one
    assert is_li_memory(sent[1]) and memory_body(sent[1].content).startswith("Summaries of the other topics")
    assert "marathon" in sent[1].content.lower()
    assert [m.role for m in sent].count(MessageRole.SYSTEM) == 1
    assert turns_present(sent) == SOURDOUGH
    assert memory.llm_calls == 0


def test_llamaindex_llm_decider_with_mock_llm(hashing_embedder):
    llm = PromptRecordingLLM(answer='{"action": "create"}')
    memory = LIDiscourseTreeMemory.from_defaults(llm=llm, embed_model=hashing_embedder)
    memory.put_messages(conversation()[:6])  # 3 turns
    memory.put(ChatMessage(role="user", content=SOURDOUGH_QUERY))
    selected = memory.get()
    # turns 1 and 2 and the query each asked once ("create": no branch decision)
    assert memory.llm_calls == len(llm.prompts) == 3
    assert [n.tree for n in memory.strategy.nodes] == [0, 1, 2]
    assert is_li_memory(selected[0]) and selected[-1].content == SOURDOUGH_QUERY  # summaries first
    assert not any(m.role == MessageRole.SYSTEM for m in selected)
    assert memory.token_limit == int(llm.metadata.context_window * 0.75)


def test_plain_mock_llm_echo_falls_back_to_the_embedded_decider(hashing_embedder, caplog):
    # 3 turns: the topic id in the prompt's JSON example (2) is never a valid tree here, so
    # every echoed prompt is an unusable answer (more topics would make the echo valid)
    memory = LIDiscourseTreeMemory.from_defaults(
        llm=MockLLM(), chat_history=conversation()[:6], embed_model=hashing_embedder
    )
    memory.get(input="x")
    assert {d.topic_source for d in memory.strategy.decisions[1:]} == {"fallback"}
    assert "embedded decider" in caplog.text


async def test_function_agent_with_a_tool_call(hashing_embedder):
    memory = LIDiscourseTreeMemory.from_defaults(chat_history=conversation(), embed_model=hashing_embedder)
    llm = WeatherLLM()
    result = await weather_agent(llm).run(user_msg=WEATHER_QUERY, memory=memory)
    assert str(result) == "Weather report: Oslo: -2 C, heavy snow"
    first, second = llm.received
    assert first[-1].content == WEATHER_QUERY
    assert 6 in turns_present(first)  # the old Oslo weather turn, with its call and result
    calls = [b.tool_call_id for m in first for b in m.blocks if getattr(b, "block_type", "") == "tool_call"]
    results = [m.additional_kwargs.get("tool_call_id") for m in first if m.role == MessageRole.TOOL]
    assert calls == results
    assert [m.role for m in second[-3:]] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL]
    assert len(memory.get_all()) == 28 + 4


async def test_memory_block_returns_summaries_and_the_thread(default_embedder):
    block = DiscourseTreeBlock(embed_model=default_embedder)
    result = await ask_block(block)
    # default output "messages": the summaries as a framed user-role memory message, then the
    # sourdough thread verbatim as messages; nothing with system authority
    assert is_li_memory(result[0]) and "Topic" in memory_body(result[0].content)
    assert TOPIC_TURNS[0][0] in [m.content for m in result[1:]]  # the sourdough thread, verbatim
    assert not any(m.role == MessageRole.SYSTEM for m in result)
    assert result[-1].content == SOURDOUGH_QUERY
    assert block.llm_calls == 0
    assert DiscourseTreeBlock().output == "messages"
    # output="text" (asked for): Memory puts the escaped text into its system message
    result = await ask_block(DiscourseTreeBlock(embed_model=default_embedder, output="text"))
    assert result[0].role == MessageRole.SYSTEM
    assert "<discourse_tree>" in result[0].content and "Topic" in result[0].content
    assert TOPIC_TURNS[0][0] in result[0].content  # the sourdough thread, verbatim in the text

"""A real ``create_agent`` run with a fake chat model, through KadaneDialMiddleware.

The fake model records the messages of every call, so the tests assert exactly what the
model received, while the agent state must still hold the whole conversation.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, NamedTuple

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxmgmt import BudgetExceededError, KadaneDialStrategy
from langchain_ctxmgmt import KadaneDialMiddleware, testing
from tests.helpers import is_lc_memory

SYSTEM_PROMPT = "You are a helpful personal assistant."


class RecordingChatModel(testing.RecordingChatModel):
    """The shared recording model, not streaming unless told (``disable_streaming=False``)."""

    disable_streaming: bool = True


def recording_model(replies: list[AIMessage | str]) -> RecordingChatModel:
    return RecordingChatModel(messages=iter(replies))


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"Sunny and 24 degrees in {city}."


def checkpointed_agent(
    model: Any, middleware: Any, *, system_prompt: str = SYSTEM_PROMPT, store: Any = None
) -> Any:
    """A ``create_agent`` graph of ``model``, the weather tool, ``middleware`` and a fresh checkpointer.

    ``store`` is the graph's long-term store (none by default).
    """
    return create_agent(
        model,
        [get_weather],
        system_prompt=system_prompt,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        store=store,
    )


def weather_turn(tag: str, city: str = "Lisbon") -> list[BaseMessage]:
    """One turn with a tool call: question, AI tool call, tool result, final answer."""
    call_id = f"call-{tag}"
    return [
        HumanMessage(f"What is the weather forecast in {city} today?", id=f"{tag}-h"),
        AIMessage(
            "", id=f"{tag}-call", tool_calls=[{"id": call_id, "name": "get_weather", "args": {"city": city}}]
        ),
        ToolMessage(
            f"Sunny and 24 degrees in {city}.", tool_call_id=call_id, name="get_weather", id=f"{tag}-tool"
        ),
        AIMessage(f"The forecast in {city} is sunny, 24 degrees.", id=f"{tag}-a"),
    ]


PAIRS: list[tuple[str, str]] = [
    ("I adopted a grey cat named Miso from the shelter.", "Miso is a lovely name for a grey shelter cat!"),
    (
        "My sourdough starter smells like acetone.",
        "An acetone smell means the starter is hungry; feed it more often.",
    ),
    (
        "The car engine makes a rattling noise when cold.",
        "A cold engine rattle often comes from a loose heat shield.",
    ),
    (
        "I am learning guitar chords for a folk song.",
        "Start with G, C and D chords; most folk songs use them.",
    ),
    (
        "My tax return needs receipts for charity donations.",
        "Keep donation receipts for the deduction on your return.",
    ),
    ("We are repainting the kitchen walls grey.", "Grey kitchen walls pair well with white cabinets."),
    (
        "My marathon training plan peaks at 32 kilometres.",
        "A 32 kilometre long run is a sensible marathon peak.",
    ),
]
CAT, WEATHER = 0, 3  # turn indices in HISTORY


def history() -> list[BaseMessage]:
    """Eight completed turns, one topic each; turn 3 is a tool-call turn about Lisbon's weather."""
    messages: list[BaseMessage] = []
    for i, (human, ai) in enumerate(PAIRS):
        if i == WEATHER:
            messages.extend(weather_turn("w"))
        messages.extend([HumanMessage(human, id=f"t{i}-h"), AIMessage(ai, id=f"t{i}-a")])
    return messages


def turns_of(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    """Group messages into turns (a turn starts at each human message)."""
    out: list[list[BaseMessage]] = []
    for m in messages:
        if isinstance(m, HumanMessage) or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out


def assert_received_whole_turns_in_order(received: list[BaseMessage], full: list[BaseMessage]) -> None:
    """Every received conversation message is from ``full``, chronological, whole turns only.

    A turn may also come as its leading human message(s) alone (KadaneDial over budget leaves a
    long reply out). System messages and the memory's framed memory messages (summaries, entity
    tiers, topic outlines: :func:`tests.helpers.is_lc_memory`) are not conversation messages.
    """
    position = {m.id: i for i, m in enumerate(full)}
    ids = [m.id for m in received if not isinstance(m, SystemMessage) and not is_lc_memory(m)]
    assert all(i in position for i in ids), ids
    assert [position[i] for i in ids] == sorted(position[i] for i in ids)
    by_id = set(ids)
    for turn in turns_of(full):
        present = [m.id in by_id for m in turn]
        user_part = len(list(itertools.takewhile(lambda m: isinstance(m, HumanMessage), turn)))
        alone = present == [k < user_part for k in range(len(turn))]  # its user message(s) alone
        assert all(present) or not any(present) or alone, f"half a turn sent: {[m.id for m in turn]}"


def assert_tool_calls_paired(received: list[BaseMessage]) -> None:
    """Every tool result follows its tool call and every tool call has its result."""
    calls = [c["id"] for m in received if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in received if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results)


def sent_turn_indices(received: list[BaseMessage], full: list[BaseMessage]) -> list[int]:
    ids = {m.id for m in received}
    return [i for i, turn in enumerate(turns_of(full)) if any(m.id in ids for m in turn)]


class AgentRun(NamedTuple):
    received: list[BaseMessage]  # what the model was sent (its only call)
    full: list[BaseMessage]  # the conversation: the past, then the question
    result: dict[str, Any]  # the agent's final state


def _agent(middleware: Any, question: str, past: list[BaseMessage] | None, reply: str):
    full = [*(history() if past is None else past), HumanMessage(question, id="q")]
    model = recording_model([reply])
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])
    return model, agent, full


def _checked(model: RecordingChatModel, full: list[BaseMessage], result: dict[str, Any]) -> AgentRun:
    """What every middleware must do in a one-call agent run; the run, for the test's own checks."""
    (received,) = model.received
    assert isinstance(received[0], SystemMessage) and received[0].content == SYSTEM_PROMPT
    assert received[-1].id == "q"
    assert_received_whole_turns_in_order(received, full)
    assert_tool_calls_paired(received)
    assert [m.id for m in result["messages"][: len(full)]] == [m.id for m in full]  # the state keeps all
    return AgentRun(received, full, result)


def run_agent(
    middleware: Any, question: str, past: list[BaseMessage] | None = None, reply: str = "Miso."
) -> AgentRun:
    """``create_agent`` (system prompt, ``get_weather``) through ``middleware`` on ``past`` (default
    :func:`history`) and the question (id ``q``), answered by a recording model in one call.

    Asserts what holds for every middleware: the system prompt first, the question last, whole
    turns of the conversation in order, tool calls paired, the whole conversation in the state.
    """
    model, agent, full = _agent(middleware, question, past, reply)
    return _checked(model, full, agent.invoke({"messages": full}))


async def arun_agent(
    middleware: Any, question: str, past: list[BaseMessage] | None = None, reply: str = "Miso."
) -> AgentRun:
    """:func:`run_agent` through ``ainvoke``."""
    model, agent, full = _agent(middleware, question, past, reply)
    return _checked(model, full, await agent.ainvoke({"messages": full}))


@pytest.fixture
def middleware(hashing_embedder):
    return KadaneDialMiddleware(embedder=hashing_embedder)


def test_model_receives_only_the_relevant_turns_and_the_state_keeps_everything(middleware):
    question = "What name did I give the grey cat I adopted from the shelter?"
    # run_agent checks the system prompt first, the question last, whole turns, the state
    received, full, result = run_agent(middleware, question, reply="Your grey cat is called Miso.")

    assert [type(m) for m in received].count(SystemMessage) == 1  # the system prompt exactly once
    # the cat turn is there, verbatim; at most one other turn (KadaneDial's last span)
    sent = sent_turn_indices(received[:-1], full)
    assert CAT in sent
    assert len(sent) <= 2, sent
    assert WEATHER not in sent
    # what was sent is the original objects' content, ids and all
    originals = {m.id: m for m in full}
    assert all(m == originals[m.id] for m in received[1:])
    # the agent state keeps the whole history plus the answer
    assert len(result["messages"]) == len(full) + 1
    assert result["messages"][-1].content == "Your grey cat is called Miso."
    # inspection
    assert middleware.last_context.query == question
    assert "kadanedial" in middleware.explain()
    assert middleware.last_context.tokens < middleware.last_context.history_tokens / 2


def test_tool_call_and_result_are_kept_together(middleware):
    question = "Will it be sunny in Lisbon today? What was the weather forecast?"
    received, full, _ = run_agent(middleware, question, reply="Yes, sunny.")  # checks calls paired

    ids = [m.id for m in received]
    assert ["w-h", "w-call", "w-tool", "w-a"] == [i for i in ids if i and i.startswith("w-")]
    assert WEATHER in sent_turn_indices(received, full)


def test_tool_call_and_result_are_dropped_together(middleware):
    question = "Which guitar chords should I learn first for the folk song?"
    received = run_agent(middleware, question, reply="G, C and D.").received  # checks calls paired

    ids = {m.id for m in received}
    assert not ids & {"w-h", "w-call", "w-tool", "w-a"}
    assert "t3-h" in ids and "t3-a" in ids  # the guitar turn
    assert not any(isinstance(m, ToolMessage) for m in received)


def test_tool_loop_in_the_current_turn_is_sent_whole(middleware):
    past = history()
    query = HumanMessage("My grey cat Miso wants to know the weather in Porto.", id="q")
    model = recording_model(
        [
            AIMessage(
                "",
                id="call-now",
                tool_calls=[{"id": "c-now", "name": "get_weather", "args": {"city": "Porto"}}],
            ),
            "Sunny in Porto, Miso.",
        ]
    )
    agent = create_agent(model, [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware])

    result = agent.invoke({"messages": [*past, query]})

    first, second = model.received
    assert first[-1].id == "q"
    # the second call gets the same past selection, then the turn in progress whole
    assert [m.id for m in second[: len(first)]] == [m.id for m in first]
    tail = second[len(first) :]
    assert [type(m) for m in tail] == [AIMessage, ToolMessage]
    assert tail[1].content == "Sunny and 24 degrees in Porto."
    assert_tool_calls_paired(second)
    assert len(result["messages"]) == len(past) + 4


def test_checkpointed_conversation_over_several_invokes(middleware):
    """The history builds up in the checkpointer; each call sends only what is relevant."""
    replies: list[AIMessage | str] = [ai for _, ai in PAIRS[:3]]
    replies += [
        AIMessage("", tool_calls=[{"id": "c-1", "name": "get_weather", "args": {"city": "Lisbon"}}]),
        "The forecast in Lisbon is sunny, 24 degrees.",
    ]
    replies += [ai for _, ai in PAIRS[3:]]
    replies += ["Your grey cat is called Miso."]
    model = recording_model(replies)
    agent = checkpointed_agent(model, middleware)
    config = {"configurable": {"thread_id": "conversation-1"}}
    questions = [human for human, _ in PAIRS[:3]]
    questions += ["What is the weather forecast in Lisbon today?"]
    questions += [human for human, _ in PAIRS[3:]]
    for question in questions:
        agent.invoke({"messages": [HumanMessage(question)]}, config)

    agent.invoke(
        {"messages": [HumanMessage("What name did I give the grey cat I adopted from the shelter?")]}, config
    )

    state = agent.get_state(config).values["messages"]
    assert len(state) == 2 * len(PAIRS) + 4 + 2  # every message, the tool turn's four included
    received = model.received[-1]
    assert received[0].content == SYSTEM_PROMPT
    assert received[-1].content.startswith("What name did I give")
    contents = [m.content for m in received]
    assert PAIRS[CAT][0] in contents and PAIRS[CAT][1] in contents
    sent = sent_turn_indices(received[1:-1], state)
    assert len(sent) <= 2, sent
    assert_tool_calls_paired(received)
    assert_received_whole_turns_in_order(received, state[:-1])  # the model saw all but its answer
    # every call along the way saw whole turns and paired tool calls
    for call in model.received:
        assert_tool_calls_paired(call)


async def test_async_agent(middleware, monkeypatch):
    threads: list[threading.Thread] = []
    select = middleware._select  # what both wrap_model_call and awrap_model_call run

    def recording_select(request):
        threads.append(threading.current_thread())
        return select(request)

    monkeypatch.setattr(middleware, "_select", recording_select)

    question = "What name did I give the grey cat I adopted from the shelter?"
    received, full, result = await arun_agent(middleware, question)  # checks whole turns in order

    # awrap_model_call selects off the loop, on ctxmgmt's long-lived pool (warm torch threads)
    assert threads and threads[0] is not threading.main_thread()
    assert threads[0].name.startswith("ctxmgmt") and threads[0].is_alive()
    assert CAT in sent_turn_indices(received[1:-1], full)
    assert len(sent_turn_indices(received[1:-1], full)) <= 2
    assert len(result["messages"]) == len(full) + 1


async def test_async_and_sync_send_the_same(hashing_embedder):
    query = HumanMessage("Why does my sourdough starter smell like acetone?", id="q")
    sent: list[list[str | None]] = []
    for run_async in (False, True):
        model = recording_model(["Feed it."])
        agent = create_agent(
            model, [get_weather], middleware=[KadaneDialMiddleware(embedder=hashing_embedder)]
        )
        inputs = {"messages": [*history(), query]}
        if run_async:
            await agent.ainvoke(inputs)
        else:
            agent.invoke(inputs)
        sent.append([m.id for m in model.received[0]])
    assert sent[0] == sent[1]
    assert "t1-h" in sent[0]


def test_no_system_prompt(middleware):
    model = recording_model(["Miso."])
    agent = create_agent(model, [get_weather], middleware=[middleware])
    agent.invoke({"messages": [*history(), HumanMessage("What is my grey cat called?", id="q")]})
    (received,) = model.received
    assert not any(isinstance(m, SystemMessage) for m in received)
    assert received[-1].id == "q"


def test_budget_is_respected(hashing_embedder):
    def words(text: str) -> int:
        return len(text.split())

    budget = 60
    middleware = KadaneDialMiddleware(
        embedder=hashing_embedder, max_tokens=budget, token_counter=words, tau=0.0
    )
    received = run_agent(middleware, "What is my grey cat called?").received  # system prompt to question
    assert sum(words(m.content) + 4 for m in received) <= budget
    assert middleware.last_context.tokens <= budget
    assert middleware.last_context.details["dropped"]  # the budget did cut something
    assert [m.id for m in received[1:3]] == ["t0-h", "t0-a"]  # the most relevant turn survives


def test_budget_too_small_for_the_current_turn_raises(hashing_embedder):
    middleware = KadaneDialMiddleware(embedder=hashing_embedder, max_tokens=5)
    agent = create_agent(
        recording_model(["x"]), [get_weather], system_prompt=SYSTEM_PROMPT, middleware=[middleware]
    )
    with pytest.raises(BudgetExceededError):
        agent.invoke({"messages": [HumanMessage("a long question " * 10)]})


def test_works_with_no_arguments():
    middleware = KadaneDialMiddleware()
    assert middleware.max_tokens is None
    assert middleware.name == "KadaneDialMiddleware"
    assert "no context" in middleware.explain()


def test_parameters_reach_the_strategy(hashing_embedder):
    from tests.adapters.test_langchain_contract import KADANEDIAL_DEFAULTS

    names = tuple(KADANEDIAL_DEFAULTS)
    strategy = KadaneDialMiddleware().strategy
    assert {n: getattr(strategy, n) for n in names} == KADANEDIAL_DEFAULTS
    assert {
        n: getattr(KadaneDialStrategy(embedder=hashing_embedder), n) for n in names
    } == KADANEDIAL_DEFAULTS
    params = dict(zip(names, (0.2, 0.5, 2, 0.7, 2.0, 0.1, None), strict=True))
    strategy = KadaneDialMiddleware(embedder=hashing_embedder, **params).strategy
    assert {n: getattr(strategy, n) for n in names} == params
    assert strategy.embedder is hashing_embedder


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"max_tokens": -1}, {"keep_last": -1}, {"sharpness": 0}])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        KadaneDialMiddleware(**bad)


def test_real_embeddings_select_the_relevant_turn(default_embedder):
    """Paraphrased query, no shared keywords: only the bundled sentence embedder can tell."""
    conversation = [
        ("We finally brought home a little tabby from the animal rescue last Saturday.", "How exciting!"),
        ("My sourdough starter smells like nail polish remover.", "It is hungry; feed it more often."),
        ("The car makes a clunk when I go over speed bumps.", "That could be worn suspension bushings."),
        ("I am practising barre chords on my acoustic guitar.", "Keep your thumb behind the neck."),
        ("How much can I deduct for charity donations this year?", "Keep receipts for every donation."),
        ("We are painting the living room a dark green.", "Use a primer first on light walls."),
        ("My half-marathon is in three weeks.", "Start tapering your long runs now."),
    ]
    past: list[BaseMessage] = []
    for i, (human, ai) in enumerate(conversation):
        past += [HumanMessage(human, id=f"r{i}-h"), AIMessage(ai, id=f"r{i}-a")]
    middleware = KadaneDialMiddleware(embedder=default_embedder)
    question = "Which vaccinations does a young kitten need at the vet?"
    received = run_agent(middleware, question, past=past, reply="Core vaccines.").received

    ids = [m.id for m in received[1:]]
    assert ids[:2] == ["r0-h", "r0-a"]
    assert len(ids) <= 5  # the pet turn, at most one more turn, the question
    assert ids[-1] == "q"


def test_over_budget_a_long_reply_is_left_out_and_its_question_still_sent(hashing_embedder):
    """Assistant chats: the model receives an old user message without its 1,000-character reply."""

    def words(text: str) -> int:
        return len(text.split())

    past: list[BaseMessage] = []
    for i, (human, ai) in enumerate(PAIRS):
        past += [HumanMessage(human, id=f"t{i}-h"), AIMessage(" ".join([ai] * 30), id=f"t{i}-a")]
    budget = 150  # the cat turn whole is about 300 words
    middleware = KadaneDialMiddleware(embedder=hashing_embedder, max_tokens=budget, token_counter=words)
    received, full, result = run_agent(middleware, "What name did I give the grey cat I adopted?", past=past)

    ids = [m.id for m in received]
    assert "t0-h" in ids and "t0-a" not in ids  # the user's own message, its long reply left out
    originals = {m.id: m for m in full}
    assert all(m == originals[m.id] for m in received[1:])  # the caller's objects, unchanged
    assert sum(words(str(m.content)) + 4 for m in received) <= budget
    context = middleware.last_context
    assert 0 in context.user_only_turns and 0 not in context.turn_indices
    assert len(result["messages"]) == len(full) + 1  # the state keeps every reply

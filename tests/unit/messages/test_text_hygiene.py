"""Text hygiene at the boundary: :func:`ctxmgmt.messages.types.clean_text`.

A lone surrogate ("my cat \\ud83d is ill") used to be stored, then make ``Turn.fingerprint``
raise UnicodeEncodeError on every later call of the conversation. Now every string of a core
``Message`` is cleaned when the message is built; the framework's own objects are untouched.
"""

from __future__ import annotations

import copy
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from ctxmgmt import KadaneDialStrategy, Message
from ctxmgmt.app.testing import HashingEmbedder
from ctxmgmt.messages.types import REPLACEMENT_CHARACTER, Turn, clean_text
from ctxmgmt.session.selection import build_context
from langchain_ctxmgmt import KadaneDialMemory as LCKadaneDialMemory
from langchain_ctxmgmt import KadaneDialMiddleware
from llamaindex_ctxmgmt import KadaneDialMemory as LIKadaneDialMemory
from tests.integration.test_langchain_agent import recording_model

LONE = "my cat \ud83d is ill"
hostile_text = st.text(
    st.one_of(
        st.characters(codec=None, exclude_categories=()),
        st.characters(categories=["Cs"]),
        st.sampled_from(["\x00", "\x1b", "\ufffe", "\U0010ffff"]),
    )
)


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    assert clean_text(LONE) == f"my cat {REPLACEMENT_CHARACTER} is ill"
    assert clean_text("\udc00") == REPLACEMENT_CHARACTER
    assert clean_text("a\ud83d") == f"a{REPLACEMENT_CHARACTER}"
    assert clean_text("\udc00\ud83d") == REPLACEMENT_CHARACTER * 2  # wrong order: two lone ones
    assert clean_text("\ud83d\ud83d\ude00") == f"{REPLACEMENT_CHARACTER}\U0001f600"


def test_a_surrogate_pair_becomes_the_character_it_encodes() -> None:
    assert clean_text("cat \ud83d\ude00") == "cat \U0001f600"


def test_text_utf8_can_encode_comes_back_unchanged_as_the_same_object() -> None:
    for text in [
        "",
        "plain",
        "café ☕ \U0001f600",
        "nul \x00 esc \x1b bom \ufeff",
        "\ufffe\U0010ffff",
        "x" * 10_000,
    ]:
        assert clean_text(text) is text


@settings(max_examples=500, deadline=None, database=None)
@given(hostile_text)
def test_clean_text_always_encodes_keeps_valid_text_and_is_idempotent(text: str) -> None:
    cleaned = clean_text(text)
    cleaned.encode("utf-8")  # never raises
    assert clean_text(cleaned) is cleaned
    assert len(cleaned) <= len(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert cleaned != text
    else:
        assert cleaned is text


def test_every_string_of_a_message_is_cleaned_and_the_callers_objects_are_not() -> None:
    args = {"city": "Par\udcc3is", "tags": ["\ud83d", "ok"]}
    call = {"id": "c\ud800", "name": "weather", "args": args}
    metadata = {"note": "\udfff"}
    message = Message("assistant", LONE, name="Bo\ud83d", tool_calls=(call,), metadata=metadata)
    assert message.text == clean_text(LONE)
    assert message.name == f"Bo{REPLACEMENT_CHARACTER}"
    cleaned_call = message.tool_calls[0]
    assert cleaned_call["id"] == f"c{REPLACEMENT_CHARACTER}"
    assert cleaned_call["args"] == {
        "city": f"Par{REPLACEMENT_CHARACTER}is",
        "tags": [REPLACEMENT_CHARACTER, "ok"],
    }
    assert message.metadata == {"note": REPLACEMENT_CHARACTER}
    # the caller's containers keep their surrogates: copies were cleaned, not them
    assert args == {"city": "Par\udcc3is", "tags": ["\ud83d", "ok"]} and call["id"] == "c\ud800"
    assert metadata == {"note": "\udfff"}
    message.render().encode("utf-8")


def test_clean_values_are_kept_as_the_same_objects() -> None:
    call = {"id": "c1", "name": "weather", "args": {"city": "Paris"}}
    message = Message("assistant", "", tool_calls=(call,))
    assert message.tool_calls[0] is call


def test_a_message_of_only_a_lone_surrogate_is_not_empty() -> None:
    assert Message("user", "\ud83d").text == REPLACEMENT_CHARACTER


def test_fingerprints_of_valid_text_are_unchanged() -> None:
    """Persisted chain hashes are built from fingerprints: valid text keeps its old one."""
    turn = Turn(
        0,
        (Message("user", "Where did we land on the budget? café ☕"), Message("assistant", "At 4,000 EUR.")),
    )
    assert turn.fingerprint == hashlib.sha1(turn.text.encode("utf-8")).hexdigest()
    assert turn.fingerprint == "05d5e9275d9c3ab10f437c831493a43be7e3cada"  # as before this change


def test_fingerprints_never_fail() -> None:
    turn = Turn(0, (Message("user", LONE), Message("assistant", "Oh no \udc00")))
    assert (
        turn.fingerprint
        == Turn(0, (Message("user", clean_text(LONE)), Message("assistant", "Oh no \ufffd"))).fingerprint
    )


def test_a_query_with_a_lone_surrogate_is_cleaned() -> None:
    strategy = KadaneDialStrategy(embedder=HashingEmbedder())
    messages = [Message("user", "my cat is ill"), Message("assistant", "See a vet."), Message("user", "hi")]
    context = build_context(strategy, messages, query="cat \ud83d?")
    assert context.query == f"cat {REPLACEMENT_CHARACTER}?"


# -- the scenario, through every adapter ----------------------------------------------
def test_langchain_classic_memory_keeps_working_after_a_lone_surrogate() -> None:
    memory = LCKadaneDialMemory(embedder=HashingEmbedder(), return_messages=True)
    memory.save_context({"input": LONE}, {"output": "Oh no, see a vet."})
    memory.save_context({"input": "What about pasta?"}, {"output": "Boil it nine minutes."})
    first = memory.chat_memory.messages[0]
    for _ in range(2):  # every later call works too
        selected = memory.load_memory_variables({"input": "my cat is ill"})["history"]
        assert selected[0] is first and first.content == LONE  # the raw message, as saved


def test_langchain_middleware_keeps_working_after_a_lone_surrogate() -> None:
    middleware = KadaneDialMiddleware(embedder=HashingEmbedder())
    model = recording_model(["See a vet.", "Still see a vet."])
    agent = create_agent(model, [], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage(LONE)]})
    history = [*state["messages"], HumanMessage("Is my cat ill?", id="q2")]  # LangGraph sets missing ids
    snapshot = copy.deepcopy(history)
    agent.invoke({"messages": history})
    assert history == snapshot
    sent = model.received[-1]
    assert [m.content for m in sent] == [LONE, "See a vet.", "Is my cat ill?"]
    assert isinstance(sent[1], AIMessage)


def test_llamaindex_memory_keeps_working_after_a_lone_surrogate() -> None:
    memory = LIKadaneDialMemory.from_defaults(embed_model=HashingEmbedder())
    memory.put(ChatMessage(role=MessageRole.USER, content=LONE))
    memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="Oh no, see a vet."))
    memory.put(ChatMessage(role=MessageRole.USER, content="Is my cat \udc00 ill?"))
    for _ in range(2):
        selected = memory.get()
        assert [m.content for m in selected] == [LONE, "Oh no, see a vet.", "Is my cat \udc00 ill?"]
        assert selected[0] is memory.get_all()[0]
    assert memory.get(input="cat \ud83d")[0].content == LONE

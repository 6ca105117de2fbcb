"""A classic LangChain chain (``langchain_classic``) with KadaneDialMemory and a fake chat model."""

from __future__ import annotations

import pytest
from langchain_classic.chains import ConversationChain, LLMChain
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_ctxmgmt import KadaneDialMemory
from langchain_ctxmgmt.testing import RecordingChatModel
from tests.integration.test_langchain_agent import PAIRS

QUERY = "What name did I give the grey cat I adopted from the shelter?"
ANSWER = "Your grey cat is called Miso."


def scripted_model() -> RecordingChatModel:
    return RecordingChatModel(messages=iter([ai for _, ai in PAIRS] + [ANSWER]))


def turns_in(text: str) -> list[int]:
    """Which PAIRS turns appear (both messages) in a prompt text."""
    return [i for i, (human, ai) in enumerate(PAIRS) if human in text and ai in text]


def partial_turns_in(text: str) -> list[int]:
    return [i for i, (human, ai) in enumerate(PAIRS) if (human in text) != (ai in text)]


@pytest.fixture
def memory(hashing_embedder):
    return KadaneDialMemory(embedder=hashing_embedder)


def test_conversation_chain_prompt_holds_the_relevant_turn(memory):
    model = scripted_model()
    chain = ConversationChain(llm=model, memory=memory)
    for human, _ in PAIRS:
        chain.invoke({"input": human})

    result = chain.invoke({"input": QUERY})

    assert result["response"] == ANSWER
    prompt = model.received[-1][0].content
    assert prompt.rstrip().endswith(f"Human: {QUERY}\nAI:")
    history = prompt.split("Current conversation:\n", 1)[1]
    kept = turns_in(history)
    assert 0 in kept
    assert len(kept) <= 2, kept  # the cat turn, at most one more span; the rest are gone
    assert partial_turns_in(history) == []
    assert f"Human: {PAIRS[0][0]}\nAI: {PAIRS[0][1]}" in history
    # the memory still holds everything, the last exchange included
    assert len(memory.messages) == 2 * (len(PAIRS) + 1)
    assert memory.messages[-1].content == ANSWER
    # the first call had no history at all
    assert "Current conversation:\n\nHuman:" in model.received[0][0].content


async def test_conversation_chain_async(memory):
    model = scripted_model()
    chain = ConversationChain(llm=model, memory=memory)
    for human, _ in PAIRS:
        await chain.ainvoke({"input": human})

    result = await chain.ainvoke({"input": QUERY})

    assert result["response"] == ANSWER
    history = model.received[-1][0].content.split("Current conversation:\n", 1)[1]
    assert 0 in turns_in(history) and len(turns_in(history)) <= 2
    assert len(memory.messages) == 2 * (len(PAIRS) + 1)


def test_chat_prompt_with_messages(hashing_embedder):
    memory = KadaneDialMemory(embedder=hashing_embedder, return_messages=True, memory_key="chat_history")
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a helpful assistant."),
            MessagesPlaceholder("chat_history"),
            ("human", "{question}"),
        ]
    )
    model = scripted_model()
    chain = LLMChain(llm=model, prompt=prompt, memory=memory)
    for human, _ in PAIRS:
        chain.invoke({"question": human})

    chain.invoke({"question": QUERY})

    received = model.received[-1]
    assert isinstance(received[0], SystemMessage)
    assert isinstance(received[-1], HumanMessage) and received[-1].content == QUERY
    history = received[1:-1]
    # the very objects saved in the memory were sent
    assert all(any(m is saved for saved in memory.messages) for m in history)
    contents = [m.content for m in history]
    assert contents[:2] == list(PAIRS[0])
    assert len(history) <= 4

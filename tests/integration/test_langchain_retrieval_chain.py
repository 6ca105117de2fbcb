"""``ConversationalRetrievalChain`` (langchain_classic) with every classic ctxmgmt memory.

The chat model is a fake that records its prompts: it condenses a follow-up question to the
question itself and answers everything else with one fixed answer.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_classic.chains import ConversationalRetrievalChain
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from tests.adapters.test_interface_parity import LC_MEMORIES, lc_components
from tests.adapters.test_langchain_contract import CAT_QUERY, TURNS

ANSWER = "Your grey cat is called Miso."
SHELTER_DOC = "Shelter records: a grey cat named Miso was adopted in May."


class CondensingChatModel(BaseChatModel):
    """Fake chat model: answers a condense prompt with the follow-up, anything else with ANSWER."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        self.received.append(list(messages))
        match = re.search(r"Follow Up Input: (.*)\n", str(messages[-1].content))
        reply = match.group(1) if match else ANSWER
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "condensing-fake"


class ShelterRetriever(BaseRetriever):
    """Returns the one shelter document for any query."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=SHELTER_DOC)]


@pytest.fixture(params=LC_MEMORIES, ids=lambda cls: cls.__name__)
def memory(request, hashing_embedder):
    """A classic memory configured as ConversationalRetrievalChain expects, holding TURNS."""
    memory = request.param(
        memory_key="chat_history",
        input_key="question",
        output_key="answer",
        return_messages=True,
        max_token_limit=120,
        **lc_components(request.param, hashing_embedder),
    )
    for human, ai in TURNS:
        memory.save_context({"question": human}, {"answer": ai})
    return memory


@pytest.fixture
def loads(memory, monkeypatch) -> list[list[BaseMessage]]:
    """Every history the chain loaded from the memory (sync and async), in order."""
    calls: list[list[BaseMessage]] = []
    cls = type(memory)
    load, aload = cls.load_memory_variables, cls.aload_memory_variables

    def spy(self: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        out = load(self, inputs)
        calls.append(list(out["chat_history"]))
        return out

    async def aspy(self: Any, inputs: dict[str, Any]) -> dict[str, Any]:
        out = await aload(self, inputs)
        calls.append(list(out["chat_history"]))
        return out

    monkeypatch.setattr(cls, "load_memory_variables", spy)
    monkeypatch.setattr(cls, "aload_memory_variables", aspy)
    return calls


def check_run(memory: Any, model: CondensingChatModel, result: dict[str, Any], loads: list) -> None:
    assert result["answer"] == ANSWER
    (selected,) = loads
    assert memory.last_context is not None and memory.last_context.query == CAT_QUERY
    assert 0 < len(selected) < 2 * len(TURNS)  # a selection within max_token_limit, not everything

    condense, answer = model.received
    prompt = str(condense[-1].content)
    assert f"Follow Up Input: {CAT_QUERY}" in prompt
    for message in selected:  # the selected turns (or summaries), and nothing else of the history
        assert str(message.content) in prompt
    texts = [str(m.content) for m in selected]
    for human, _ in TURNS:
        if not any(human in t for t in texts):
            assert human not in prompt
    # the answering call: the retrieved document and the condensed question
    answer_prompt = "\n".join(str(m.content) for m in answer)
    assert SHELTER_DOC in answer_prompt and CAT_QUERY in answer_prompt

    # the memory saved the question and the answer; the history is whole
    assert memory.messages[-2:] == [HumanMessage(content=CAT_QUERY), AIMessage(content=ANSWER)]
    assert len(memory.messages) == 2 * len(TURNS) + 2
    assert memory.buffer_as_messages == memory.messages


def test_conversational_retrieval_chain(memory, loads):
    model = CondensingChatModel()
    chain = ConversationalRetrievalChain.from_llm(llm=model, retriever=ShelterRetriever(), memory=memory)
    check_run(memory, model, chain.invoke({"question": CAT_QUERY}), loads)


async def test_conversational_retrieval_chain_async(memory, loads):
    model = CondensingChatModel()
    chain = ConversationalRetrievalChain.from_llm(
        llm=model, retriever=ShelterRetriever(), memory=memory, return_source_documents=True
    )
    result = await chain.ainvoke({"question": CAT_QUERY})
    assert [d.page_content for d in result["source_documents"]] == [SHELTER_DOC]
    check_run(memory, model, result, loads)

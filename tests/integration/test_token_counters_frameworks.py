"""The frameworks' token counters through every surface: used as given, refused when unusable."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from llama_index.core.base.llms.types import ChatMessage

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import ConfigurationError
from ctxmgmt.app.testing import HashingEmbedder
from langchain_ctxmgmt.testing import RecordingChatModel

FACTS = [
    (f"Fact {i}: my {animal} is called {name}.", f"Noted, {name}.")
    for i, (animal, name) in enumerate(
        [("cat", "Miso"), ("dog", "Rex"), ("fish", "Bubbles"), ("horse", "Star")] * 3
    )
]


def split_tokenizer(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def lc_history() -> list:
    return [m for user, answer in FACTS for m in (HumanMessage(user), AIMessage(answer))]


def test_count_tokens_approximately_works_in_the_middleware_selector_and_classic_memory():
    embedder = HashingEmbedder()
    question = HumanMessage("What is my cat called?")
    selector = lc.KadaneDialSelector(
        embedder=embedder, token_counter=count_tokens_approximately, max_tokens=200
    )
    selected = selector.invoke([*lc_history(), question])
    assert selected[-1] is question and 2 < len(selected) < len(lc_history()) + 1
    assert "Miso" in " ".join(str(m.content) for m in selected)

    middleware = lc.KadaneDialMiddleware(
        embedder=embedder, token_counter=count_tokens_approximately, max_tokens=200
    )
    from langchain.agents import create_agent

    model = RecordingChatModel(messages=iter(["Miso."]))
    create_agent(model, [], middleware=[middleware]).invoke({"messages": [*lc_history(), question]})
    assert "Miso" in " ".join(str(m.content) for m in model.received[0])

    memory = lc.KadaneDialMemory(
        embedder=embedder, token_counter=count_tokens_approximately, max_token_limit=200
    )
    for user, answer in FACTS:
        memory.save_context({"input": user}, {"output": answer})
    assert "Miso" in memory.load_memory_variables({"input": "What is my cat called?"})["history"]


def test_a_chat_model_that_counts_its_own_tokens_is_a_counter():
    class CountingModel(RecordingChatModel):
        def get_num_tokens_from_messages(self, messages, tools=None):  # type: ignore[override]
            return sum(len(str(m.content).split()) + 3 for m in messages)

    model = CountingModel(messages=iter(["ok"]))
    selector = lc.KadaneDialSelector(embedder=HashingEmbedder(), token_counter=model, max_tokens=60)
    selected = selector.invoke([*lc_history(), HumanMessage("What is my cat called?")])
    assert 1 < len(selected) < len(lc_history())


@pytest.mark.parametrize(
    "bad",
    [lambda text: -1, lambda text: "many", lambda text: len(text) * 50],
    ids=["negative", "not-a-number", "more-than-characters"],
)
def test_unusable_counters_are_refused_when_configured(bad):
    for make in (
        lambda: lc.KadaneDialMiddleware(token_counter=bad),
        lambda: lc.KadaneDialSelector(token_counter=bad),
        lambda: lc.KadaneDialMemory(token_counter=bad),
        lambda: li.KadaneDialMemory.from_defaults(token_counter=bad),
        lambda: li.KadaneDialBlock(token_counter=bad),
    ):
        with pytest.raises(ConfigurationError):
            make()


def test_a_llamaindex_tokenizer_counts_for_the_memory():
    memory = li.KadaneDialMemory.from_defaults(
        tokenizer_fn=split_tokenizer, embed_model=HashingEmbedder(), token_limit=120
    )
    for user, answer in FACTS:
        memory.put_messages(
            [ChatMessage(role="user", content=user), ChatMessage(role="assistant", content=answer)]
        )
    memory.put(ChatMessage(role="user", content="What is my cat called?"))
    sent = memory.get()
    assert 1 < len(sent) < len(memory.get_all()) and "Miso" in " ".join(m.content or "" for m in sent)

"""Token counters the frameworks' ways become checked ctxmgmt counters (``as_counter``)."""

from __future__ import annotations

import functools
import re

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from ctxmgmt.components.budget import message_tokens
from ctxmgmt.components.tokens import TiktokenCounter, as_token_counter, default_token_counter
from ctxmgmt.messages.exceptions import ConfigurationError
from ctxmgmt.messages.history import group_turns
from ctxmgmt.messages.types import Message
from ctxmgmt.strategies.swin import SWinStrategy
from langchain_ctxmgmt._tokens import as_counter as langchain_counter
from llamaindex_ctxmgmt._tokens import as_counter as llamaindex_counter

TEXT = "Priya moved the budget review to Thursday because the venue in Leeds was double-booked."


def split_tokenizer(text: str) -> list[str]:
    """A LlamaIndex-style tokenizer (str -> list of tokens), like get_tokenizer() but offline."""
    return re.findall(r"\w+|[^\w\s]", text)


def conversation(turns: int = 12) -> list[Message]:
    messages = []
    for i in range(turns):
        messages += [
            Message("user", f"Turn {i}: {TEXT} What should we tell the clients about day {i}?"),
            Message("assistant", f"Tell them the review for day {i} is on Thursday in Leeds."),
        ]
    return messages


# -- LangChain --------------------------------------------------------------------------


def test_count_tokens_approximately_counts_one_message_at_a_time():
    counter = langchain_counter(count_tokens_approximately)
    expected = count_tokens_approximately([HumanMessage(TEXT)]) - count_tokens_approximately(
        [HumanMessage("")]
    )
    assert counter.count(TEXT) == expected
    assert counter.count("hello world") == 3  # 11 characters / 4 per token, rounded up; not 55
    assert langchain_counter("approximate").count(TEXT) == expected
    halves = langchain_counter(functools.partial(count_tokens_approximately, chars_per_token=2.0))
    assert halves.count(TEXT) > expected


def test_the_same_function_as_a_plain_counter_is_refused_with_the_fix():
    with pytest.raises(ConfigurationError, match="55 tokens.*function of a message list"):
        as_token_counter(count_tokens_approximately)


def test_wrapped_message_list_counter_lets_the_memory_select():
    turns = group_turns(conversation())
    counted = SWinStrategy(token_counter=langchain_counter(count_tokens_approximately), recent_turns=4)
    counted.add_many(turns[:-1])
    context = counted.select("When is the review?", budget=200)
    assert context.turn_indices and context.tokens <= 200


def test_chat_model_counts_with_its_own_method():
    model = GenericFakeChatModel(messages=iter(["ok"]), custom_get_token_ids=lambda text: text.split())
    counter = langchain_counter(model)
    expected = model.get_num_tokens_from_messages([HumanMessage(TEXT)]) - model.get_num_tokens_from_messages(
        [HumanMessage("")]
    )
    assert counter.count(TEXT) == expected == len(TEXT.split())
    listed = langchain_counter(FakeListChatModel(responses=["ok"], custom_get_token_ids=split_tokenizer))
    assert listed.count(TEXT) == len(split_tokenizer(TEXT))


def test_chat_model_without_counting_of_its_own_is_refused():
    # its counting would download GPT-2's tokenizer: refused before any call
    with pytest.raises(ConfigurationError, match="no token counting of its own.*custom_get_token_ids"):
        langchain_counter(FakeListChatModel(responses=["ok"]))


def test_bound_counting_methods_and_per_message_functions():
    model = GenericFakeChatModel(messages=iter(["ok"]), custom_get_token_ids=lambda text: text.split())
    assert langchain_counter(model.get_num_tokens_from_messages).count(TEXT) == len(TEXT.split())
    assert langchain_counter(model.get_num_tokens).count(TEXT) == len(TEXT.split())  # str -> int

    def per_message(message: BaseMessage) -> int:
        return 2 + len(str(message.content).split())

    assert langchain_counter(per_message).count(TEXT) == len(TEXT.split())


def test_langchain_core_counters_and_bad_values():
    assert langchain_counter(None) is default_token_counter()
    tiktoken = TiktokenCounter()
    assert langchain_counter(tiktoken) is tiktoken
    assert langchain_counter(len).count("abc") == 3
    with pytest.raises(ConfigurationError, match="only name accepted is 'approximate'"):
        langchain_counter("cl100k_base")
    with pytest.raises(ConfigurationError, match="got int"):
        langchain_counter(42)
    with pytest.raises(ConfigurationError, match="got list"):
        langchain_counter([1, 2])  # lists have a .count method, but are no counter


# -- LlamaIndex -------------------------------------------------------------------------


def test_llamaindex_tokenizer_counts_its_tokens():
    counter = llamaindex_counter(split_tokenizer)
    assert counter.count(TEXT) == len(split_tokenizer(TEXT))
    assert message_tokens(counter, Message("user", TEXT)) == len(split_tokenizer(TEXT)) + 4


def test_llamaindex_str_to_int_and_core_counters():
    assert llamaindex_counter(None) is default_token_counter()
    assert llamaindex_counter(lambda text: len(text.split())).count(TEXT) == len(TEXT.split())
    tiktoken = TiktokenCounter()
    assert llamaindex_counter(tiktoken) is tiktoken


def test_llamaindex_unusable_tokenizers_are_refused():
    with pytest.raises(ConfigurationError, match="tokenizer_fn.*too few"):
        llamaindex_counter(lambda text: [text])  # the whole text as one token
    with pytest.raises(ConfigurationError, match="failed on 'hello world'"):
        llamaindex_counter(lambda text: text.nope())
    with pytest.raises(ConfigurationError, match="got str"):
        llamaindex_counter("cl100k_base")
    with pytest.raises(ConfigurationError, match="more tokens than characters"):
        llamaindex_counter(lambda text: list(range(5 * len(text))))

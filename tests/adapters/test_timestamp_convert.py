"""Both converters read a message's time from ``additional_kwargs["timestamp"]``."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage

from ctxmgmt.messages import timestamps
from ctxmgmt.messages.history import group_turns
from langchain_ctxmgmt._convert import to_ctxmgmt
from llamaindex_ctxmgmt._convert import to_message

UTC = dt.UTC


def langchain(text: str, stamp: object) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={"timestamp": stamp})


def llamaindex(text: str, stamp: object) -> ChatMessage:
    return ChatMessage(role="user", content=text, additional_kwargs={"timestamp": stamp})


CONVERTERS = [(langchain, to_ctxmgmt), (llamaindex, to_message)]


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(timestamps, "_warned", set())


@pytest.mark.parametrize(("make", "convert"), CONVERTERS)
@pytest.mark.parametrize(
    ("stamp", "kept"),
    [
        ("1:56 pm on 8 May, 2023", "1:56 pm on 8 May, 2023"),
        ("2023-05-08T13:56:00Z", "2023-05-08T13:56:00Z"),
        (dt.datetime(2023, 5, 8, 13, 56, tzinfo=UTC), "2023-05-08T13:56:00+00:00"),
        (dt.date(2023, 5, 8), "2023-05-08"),
        (1683554160, "2023-05-08T13:56:00+00:00"),
    ],
)
def test_timestamp_travels_with_the_message(make, convert, stamp, kept):
    message = convert(make("I moved yesterday", stamp))
    assert message.timestamp == kept
    assert group_turns([message])[0].text.startswith(f"[{kept}] user: I moved yesterday")


@pytest.mark.parametrize(("make", "convert"), CONVERTERS)
def test_no_or_unreadable_timestamp_is_undated_never_an_error(make, convert, caplog):
    assert convert(make("hi", None)).timestamp is None
    with caplog.at_level(logging.WARNING, logger="ctxmgmt.messages.timestamps"):
        assert convert(make("hi", "whenever")).timestamp is None
        assert convert(make("hi", "at some point")).timestamp is None
        assert convert(make("hi", ["2023"])).timestamp is None
    assert len(caplog.records) == 2  # one per kind of value


def test_a_message_without_additional_kwargs_is_undated():
    assert to_ctxmgmt(AIMessage("hello")).timestamp is None
    assert to_message(ChatMessage(role="assistant", content="hello")).timestamp is None

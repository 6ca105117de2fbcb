"""``from_dict`` and ``from_string`` take parameters and history only; bad input is a ConfigurationError."""

from __future__ import annotations

import json

import pytest

import langchain_ctxmgmt as lc
import llamaindex_ctxmgmt as li
from ctxmgmt import ConfigurationError

MEMORIES = [lc.SWinSummaryBuffer, li.SWinSummaryBuffer]


def saved(cls: type) -> dict:
    memory = cls() if cls is lc.SWinSummaryBuffer else cls.from_defaults()
    return memory.to_dict()


@pytest.mark.parametrize("cls", MEMORIES, ids=lambda c: c.__module__.split(".")[0])
def test_saved_data_cannot_name_a_store_or_components(cls, tmp_path):
    for key, value in [
        ("store", f"sqlite:///{tmp_path}/x.db"),
        ("store", "postgresql://evil/db"),
        ("summarizer", "x"),
    ]:
        with pytest.raises(ConfigurationError, match=key):
            cls.from_dict({**saved(cls), key: value})
    memory = cls.from_dict(saved(cls), store=f"sqlite:///{tmp_path}/ok.db")  # as an argument: fine
    assert memory.store


@pytest.mark.parametrize("cls", MEMORIES, ids=lambda c: c.__module__.split(".")[0])
def test_saved_data_cannot_raise_the_memory_role_to_system(cls):
    with pytest.raises(ConfigurationError, match="memory_role"):
        cls.from_dict({**saved(cls), "memory_role": "system"})
    assert cls.from_dict({**saved(cls), "memory_role": "assistant"}).memory_role == "assistant"
    assert cls.from_dict(saved(cls), memory_role="system").memory_role == "system"  # code may


@pytest.mark.parametrize("cls", MEMORIES, ids=lambda c: c.__module__.split(".")[0])
@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '"a string"',
        "[" * 100_000 + "]" * 100_000,
        json.dumps({"window": "six"}),
        json.dumps({"messages": [{"type": "bogus", "data": {}}], "chat_history": [{"role": 3}]}),
        json.dumps({"chat_store": {"class_name": "RedisChatStore", "redis_url": "redis://evil:6379"}}),
        json.dumps({"custom_components": "nonsense"}),
    ],
    ids=[
        "bad-json",
        "a-list",
        "a-string",
        "deep",
        "bad-value",
        "bad-messages",
        "foreign-store",
        "bad-components",
    ],
)
def test_malformed_saved_data_is_a_configuration_error(cls, text):
    with pytest.raises(ConfigurationError):
        cls.from_string(text)

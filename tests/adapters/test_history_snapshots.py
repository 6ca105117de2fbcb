"""The adapters' codec snapshots see every edit made in place, and only what changed is converted."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

from ctxmgmt.session.converted import ConvertedHistory
from langchain_ctxmgmt._convert import CODEC as LC
from llamaindex_ctxmgmt._convert import CODEC as LI


def test_langchain_view_sees_a_part_edited_inside_a_list_content() -> None:
    plain = [HumanMessage(content="my cat is Miso"), AIMessage(content="Nice!")]
    parts = HumanMessage(
        content=[{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {}}]
    )
    view = ConvertedHistory(LC.to_core, LC.snapshot)
    view.update([*plain, parts])
    first = view.messages[0]
    parts.content[0]["text"] = "[redacted]"  # an edit inside the list, same objects throughout
    view.update([*plain, parts])
    assert view.messages[0] is first  # the untouched prefix is not converted again
    assert "[redacted]" in view.messages[2].text and "look at this" not in view.messages[2].text


def test_llamaindex_view_sees_block_text_and_role_edited_in_place() -> None:
    plain = [
        ChatMessage(role="user", content="my cat is Miso"),
        ChatMessage(role="assistant", content="Nice!"),
    ]
    image = ChatMessage(
        role="user", blocks=[TextBlock(text="look"), ImageBlock(url="https://example.com/a.png")]
    )
    view = ConvertedHistory(LI.to_core, LI.snapshot)
    view.update([*plain, image])
    first, image_core = view.messages[0], view.messages[2]
    plain[1].blocks[0].text = "[redacted]"  # a block rewritten in place
    view.update([*plain, image])
    assert view.messages[0] is first and view.messages[1].text == "[redacted]"
    assert view.messages[2] is not image_core  # converted again: it follows the edited message
    image.blocks[0].text = "look again"  # a text block beside an image
    view.update([*plain, image])
    assert view.messages[2].text == "look again"
    plain[1].role = "user"  # a role reassigned in place
    view.update([*plain, image])
    assert view.messages[1].role == "user"


def test_langchain_classic_add_defers_the_check_and_the_next_load_sees_an_edit(hashing_embedder) -> None:
    """``save_context`` reads only the new turn; ``load_memory_variables`` still finds an earlier edit."""
    from langchain_ctxmgmt import KadaneDialMemory

    memory = KadaneDialMemory(embedder=hashing_embedder, return_messages=True)
    memory.save_context({"input": "My locker code is 4312."}, {"output": "Noted."})
    memory.save_context({"input": "I like hiking."}, {"output": "Nice."})
    memory.chat_memory.messages[0].content = "My locker code is [redacted]."  # edited in place
    memory.save_context({"input": "What is a good trail?"}, {"output": "Try the ridge trail."})

    selected = memory.load_memory_variables({"input": "What is my locker code?"})["history"]

    texts = [m.content for m in selected]
    assert "My locker code is [redacted]." in texts and not any("4312" in t for t in texts)
    assert all("4312" not in t.text for t in memory.strategy.turns)


def test_langchain_snapshot_covers_tool_calls_names_and_tool_call_ids() -> None:
    call = AIMessage(content="", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}])
    result = ToolMessage(content="4 C", tool_call_id="c1")
    user = HumanMessage(content="weather in Oslo?", name="ana")
    view = ConvertedHistory(LC.to_core, LC.snapshot)
    view.update([user, call, result])
    call.tool_calls[0]["args"]["city"] = "Bergen"  # edited in place
    result.tool_call_id = "c2"
    user.name = "bo"
    view.update([user, call, result])
    assert view.messages[0].name == "bo"
    assert view.messages[1].tool_calls[0]["args"] == {"city": "Bergen"}
    assert view.messages[2].tool_call_id == "c2"


def test_llamaindex_snapshot_covers_tool_calls_in_additional_kwargs() -> None:
    call = ChatMessage(
        role="assistant",
        content="",
        additional_kwargs={"tool_calls": [{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}]},
    )
    result = ChatMessage(role="tool", content="4 C", additional_kwargs={"tool_call_id": "c1"})
    view = ConvertedHistory(LI.to_core, LI.snapshot)
    view.update([ChatMessage(role="user", content="weather?"), call, result])
    call.additional_kwargs["tool_calls"][0]["args"]["city"] = "Bergen"
    result.additional_kwargs["tool_call_id"] = "c2"
    view.update(list(view.originals))
    assert view.messages[1].tool_calls[0]["args"] == {"city": "Bergen"}
    assert view.messages[2].tool_call_id == "c2"

"""The adapters' content snapshots see every edit made in place, and only what changed is converted."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

from langchain_ctxmgmt import _base as lc
from llamaindex_ctxmgmt import _base as li


class Session:
    """A stand-in for the session a view belongs to (views are kept by weak reference)."""


def test_langchain_view_sees_a_part_edited_inside_a_list_content() -> None:
    plain = [HumanMessage(content="my cat is Miso"), AIMessage(content="Nice!")]
    parts = HumanMessage(
        content=[{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {}}]
    )
    session = Session()
    view = lc._new_views().of(session)
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
    session = Session()
    view = li._new_views().of(session)
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

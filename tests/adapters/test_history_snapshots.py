"""The adapters' content snapshots: read at C speed for the usual history, exact for edits in place."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock

from langchain_ctxmgmt import _base as lc
from llamaindex_ctxmgmt import _base as li


class Session:
    """A stand-in for the session a view belongs to (views are kept by weak reference)."""


def test_langchain_snapshots_are_the_same_on_both_paths_and_see_part_edits() -> None:
    plain = [HumanMessage(content="my cat is Miso"), AIMessage(content="Nice!")]
    parts = HumanMessage(
        content=[{"type": "text", "text": "look at this"}, {"type": "image_url", "image_url": {}}]
    )
    fast = lc._snapshots(plain)
    mixed = lc._snapshots([*plain, parts])
    assert mixed[0][:2] == fast[0] == ["my cat is Miso", "Nice!"]
    view = lc._new_views().of(Session())
    view.update([*plain, parts])
    first = view.messages[0]
    parts.content[0]["text"] = "[redacted]"  # an edit inside the list, same objects throughout
    view.update([*plain, parts])
    assert view.messages[0] is first  # the untouched prefix is not converted again
    assert view.messages[2].text == "[redacted]"


def test_llamaindex_snapshots_are_the_same_on_both_paths_and_see_block_edits() -> None:
    plain = [
        ChatMessage(role="user", content="my cat is Miso"),
        ChatMessage(role="assistant", content="Nice!"),
    ]
    image = ChatMessage(
        role="user", blocks=[TextBlock(text="look"), ImageBlock(url="https://example.com/a.png")]
    )
    fast = li._snapshots(plain)
    mixed = li._snapshots([*plain, image])
    assert [column[:2] for column in mixed] == list(fast)
    assert [column[2] for column in mixed] == ["user", (TextBlock, ImageBlock), ("look", None)]
    view = li._new_views().of(Session())
    view.update([*plain, image])
    first, image_core = view.messages[0], view.messages[2]
    plain[1].blocks[0].text = "[redacted]"  # a block rewritten in place
    view.update([*plain, image])
    assert view.messages[0] is first and view.messages[1].text == "[redacted]"
    assert view.messages[2] is not image_core  # converted again: it follows the edited message
    plain[1].role = "user"  # a role reassigned in place
    view.update([*plain, image])
    assert view.messages[1].role == "user"

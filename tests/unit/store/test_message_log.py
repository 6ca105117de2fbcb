"""MessageLog: raw messages an adapter keeps itself, appended to a store in order."""

from __future__ import annotations

from ctxmgmt.store import SQLiteStore
from ctxmgmt.store.message_log import MessageLog


def test_message_log_appends_in_order(tmp_path):
    log = MessageLog(SQLiteStore(tmp_path / "s.db"), "flushed:x")
    log.append([{"role": "user", "content": "hi"}])
    log.append([{"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}])
    assert [m["content"] for m in MessageLog(SQLiteStore(tmp_path / "s.db"), "flushed:x").load()] == [
        "hi",
        "hello",
        "again",
    ]

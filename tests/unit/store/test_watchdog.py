"""Deadlines for blocking database calls (``ctxmgmt.store.watchdog``)."""

from __future__ import annotations

import socket
import threading
import time

from ctxmgmt.store import watchdog
from ctxmgmt.store.watchdog import shut_down_socket, watch


def test_a_call_that_overruns_its_deadline_is_broken_once() -> None:
    broken = threading.Event()
    calls: list[int] = []

    def breaker() -> None:
        calls.append(1)
        broken.set()

    with watch(0.02, breaker):
        assert broken.wait(5)
    time.sleep(0.05)
    assert calls == [1]


def test_a_call_that_ends_in_time_is_never_broken() -> None:
    calls: list[int] = []
    with watch(0.2, lambda: calls.append(1)):
        pass
    with watch(0.01, lambda: calls.append(2)):  # an earlier deadline wakes the watchdog
        pass
    time.sleep(0.3)
    assert calls == []


def test_no_deadline_arms_nothing() -> None:
    with watch(None, lambda: (_ for _ in ()).throw(AssertionError("never called"))):
        pass


def test_a_failing_breaker_does_not_stop_the_watchdog() -> None:
    def bad() -> None:
        raise RuntimeError("breaker failed")

    fired = threading.Event()
    with watch(0.01, bad):
        time.sleep(0.05)
    with watch(0.01, fired.set):
        assert fired.wait(5)


def test_a_forked_child_starts_a_fresh_watchdog(monkeypatch) -> None:
    before = watchdog._watchdog
    monkeypatch.setattr(watchdog, "_watchdog", before)
    watchdog._forget_watchdog()
    assert watchdog._watchdog is not before and watchdog._watchdog.thread is None


def test_shutting_a_socket_down_ends_a_blocked_read() -> None:
    left, right = socket.socketpair()
    try:
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(left.recv(10)))
        reader.start()
        time.sleep(0.05)
        shut_down_socket(left.fileno(), left.family)
        reader.join(5)
        assert not reader.is_alive() and got == [b""]
        assert left.fileno() != -1  # the descriptor stays open for its owner
    finally:
        left.close()
        right.close()

"""The background worker and its process hooks, and the settings read through the conversation module."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import ctxmgmt.session.conversation as conversation_module
import ctxmgmt.session.worker as worker_module
from ctxmgmt.session.worker import BacklogWorker


class Backlog:
    """A stand-in conversation with ``left`` steps of backlog."""

    def __init__(self, left: int, *, fails: bool = False) -> None:
        self.key = "k"
        self.closed = False
        self.in_background = True
        self.left = left
        self.fails = fails
        self.steps = 0
        self.done = threading.Event()

    def derive_backlog_step(self, stopping: Callable[[], bool] | None = None) -> bool:
        self.steps += 1
        if self.fails:
            self.done.set()
            raise RuntimeError("broken")
        self.left -= 1
        if not self.left:
            self.done.set()
        return self.left > 0


@pytest.fixture
def worker(monkeypatch) -> Iterator[BacklogWorker]:
    monkeypatch.setattr(worker_module, "REST_SHARE", 0.0)
    monkeypatch.setattr(worker_module, "WORKER_NICE", 0)
    made = BacklogWorker()
    yield made
    made.stop(5)


def test_a_submitted_backlog_is_stepped_until_it_is_gone(worker) -> None:
    backlog = Backlog(3)
    worker.submit(backlog)
    worker.submit(backlog)  # queued once
    assert backlog.done.wait(5)
    deadline = time.monotonic() + 5
    while worker.holds(backlog) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backlog.steps == 3 and not worker.holds(backlog)


def test_a_failing_step_hands_the_backlog_back_to_the_calls(worker) -> None:
    backlog = Backlog(3, fails=True)
    worker.submit(backlog)
    assert backlog.done.wait(5)
    deadline = time.monotonic() + 5
    while backlog.in_background and time.monotonic() < deadline:
        time.sleep(0.01)
    assert backlog.in_background is False and backlog.steps == 1


class StoppedMidStep(Backlog):
    """A backlog whose step asks the worker to stop, as interpreter exit does while a step runs."""

    def __init__(self, worker: BacklogWorker) -> None:
        super().__init__(5)
        self.worker = worker

    def derive_backlog_step(self, stopping: Callable[[], bool] | None = None) -> bool:
        self.worker.stop()  # from the worker's own thread: sets the flag and notifies, no join
        super().derive_backlog_step(stopping)
        return True


def test_a_stop_during_a_step_is_not_lost_in_the_rest_after_it(monkeypatch) -> None:
    # stop() notifies before the step ends; the rest after the step must not wait for a notify
    # that already came (interpreter exit would wait out the rest: up to 1 s).
    monkeypatch.setattr(worker_module, "REST_SHARE", 1e6)
    monkeypatch.setattr(worker_module, "WORKER_NICE", 0)
    made = BacklogWorker()
    waits: list[bool] = []

    class RecordingCondition(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(made._stopping)
            return super().wait(timeout)

    made._cond = RecordingCondition()
    backlog = StoppedMidStep(made)
    made.submit(backlog)
    thread = made._thread
    assert thread is not None
    thread.join(30)
    assert not thread.is_alive() and backlog.steps == 1
    assert True not in waits  # no wait once stopping


def test_a_stopped_worker_takes_nothing_and_cancel_drops_a_queued_one() -> None:
    idle = BacklogWorker()
    idle.stop()
    backlog = Backlog(2)
    idle.submit(backlog)
    assert not idle.holds(backlog) and backlog.steps == 0
    queued = BacklogWorker()
    queued._queue.append(backlog)  # queued without a thread: cancel only edits the queue
    assert queued.holds(backlog)
    queued.cancel(backlog)
    assert not queued.holds(backlog)


def test_after_fork_in_child_renews_the_worker_and_the_registered_locks(monkeypatch) -> None:
    class Owner:
        renewed = 0

        def renew_locks(self) -> None:
            self.renewed += 1

    owner = Owner()
    worker_module.renew_after_fork(owner)
    before = worker_module.worker()
    monkeypatch.setattr(worker_module, "WORKER", before)  # restored after the test
    worker_module.after_fork_in_child()
    assert worker_module.worker() is not before and owner.renewed == 1


@pytest.mark.parametrize("freeze", [True, False])
@pytest.mark.parametrize("module", [worker_module, conversation_module], ids=["worker", "conversation"])
def test_freeze_at_exit_follows_its_setting(monkeypatch, module, freeze: bool) -> None:
    """The setting is the worker module's, also when set on the conversation module."""
    monkeypatch.setattr(module, "FREEZE_AT_EXIT", freeze)
    before = gc.get_freeze_count()
    try:
        worker_module.freeze_at_exit()
        assert (gc.get_freeze_count() > before) is freeze
    finally:
        gc.unfreeze()


def test_the_settings_are_read_and_set_through_the_conversation_module(monkeypatch) -> None:
    """``ctxmgmt.session.conversation.WORKER_NICE = 0`` still sets what the worker reads."""
    monkeypatch.setattr(conversation_module, "WORKER_NICE", 2)
    assert worker_module.WORKER_NICE == 2 and conversation_module.WORKER_NICE == 2
    monkeypatch.setattr(worker_module, "STOP_SECONDS", 7.0)
    assert conversation_module.STOP_SECONDS == 7.0
    assert conversation_module._WORKER is worker_module.worker()
    assert conversation_module._freeze_at_exit is worker_module.freeze_at_exit
    with pytest.raises(AttributeError):
        conversation_module.NOT_A_SETTING  # noqa: B018
    conversation_module.SOMETHING_ELSE = 1  # other names are the module's own
    assert conversation_module.SOMETHING_ELSE == 1 and not hasattr(worker_module, "SOMETHING_ELSE")
    del conversation_module.SOMETHING_ELSE

"""SWinWindows: window arithmetic, summarising into the memory, sessions, reset, snapshot, state."""

from __future__ import annotations

import copy
import json
import pickle
import threading

from ctxmgmt import Message, Turn
from ctxmgmt.strategies.swin import SWinConfig
from ctxmgmt.strategies.swin_memory import SWinMemory
from ctxmgmt.strategies.swin_windows import SWinWindows


def turns(n: int, start: int = 0) -> list[Turn]:
    return [Turn(i, (Message("user", f"Turn {i}: Alice visited city number {i}."),)) for i in range(start, n)]


def turn_numbers(text: str) -> list[int]:
    return [int(line.split("Turn ")[1].split(":")[0]) for line in text.splitlines()]


class Summaries:
    """A summarize callable that records each window and returns one item naming its turns."""

    def __init__(self, gate: threading.Event | None = None, who: str = "Alice") -> None:
        self.calls: list[tuple[list[str], list[int], int]] = []
        self.gate = gate
        self.who = who

    def __call__(self, previous: list[str], text: str, serial: int) -> tuple[list[str], bool]:
        if self.gate is not None:
            self.gate.wait(5)
        numbers = turn_numbers(text)
        self.calls.append((list(previous), numbers, serial))
        return [f"{self.who} visited cities {' '.join(map(str, numbers))}."], serial == 99


def make(**params) -> SWinWindows:
    config = SWinConfig(**params)
    return SWinWindows(config, SWinMemory(config, 200))


def test_each_completed_window_is_summarised_once_in_order():
    windows, summarize = make(window=6, overlap=2), Summaries()
    history = turns(13)
    for n in range(1, 14):  # the strategy hands over every turn so far, one more each time
        windows.add(history[:n], summarize)
    assert [numbers for _, numbers, _ in summarize.calls] == [list(range(0, 6)), list(range(4, 10))]
    assert [serial for _, _, serial in summarize.calls] == [0, 1]
    assert windows.stride == 4 and windows.next_start == 8 and windows.covered == 9
    # each window is conditioned on the memory so far
    assert summarize.calls[1][0] == ["Alice visited cities 0 1 2 3 4 5."]
    assert [(i.start, i.end, i.window) for i in windows.memory.items] == [(0, 5, 0), (4, 9, 1)]


def test_the_tail_is_summarised_as_one_shorter_window():
    windows, summarize = make(window=6, overlap=2), Summaries()
    history = turns(8)
    windows.add(history, summarize)
    windows.summarize_tail(history, summarize)
    assert [numbers for _, numbers, _ in summarize.calls] == [list(range(6)), [4, 5, 6, 7]]
    assert windows.covered == 7
    windows.summarize_tail(history, summarize)  # every turn covered: nothing more
    assert len(summarize.calls) == 2


def test_a_new_session_restarts_the_windows_and_keeps_the_memory():
    windows, summarize = make(window=2, overlap=0, dedup_threshold=1.0), Summaries()
    windows.add(turns(4), summarize)
    windows.next_session()
    assert (windows.session, windows.next_start, windows.covered) == (1, 0, -1)
    windows.add(turns(2), Summaries(who="Bob"))
    assert [(i.session, i.start, i.end) for i in windows.memory.items] == [(0, 0, 1), (0, 2, 3), (1, 0, 1)]
    assert windows.memory.log[-1]["window"] == 2  # serials count over every session


def test_snapshot_shows_the_open_window_and_what_is_not_summarised_yet():
    windows, summarize = make(window=6, overlap=2), Summaries()
    windows.add(turns(11), summarize)
    items, scores, verbatim = windows.snapshot(11, recent_turns=0)
    assert verbatim == [8, 9, 10]  # from the next window's start
    assert [i.window for i in items] == [0, 1] and set(scores) == {id(i) for i in items}
    assert windows.snapshot(11, recent_turns=5)[2] == [6, 7, 8, 9, 10]
    assert make().snapshot(3, recent_turns=0)[2] == [0, 1, 2]  # nothing summarised yet


def test_background_windows_run_in_the_worker_and_reset_drops_them():
    gate = threading.Event()
    windows, summarize = make(window=2, overlap=0, background=True), Summaries(gate)
    windows.add(turns(4), summarize)  # returns at once: the worker waits for the gate
    assert windows.memory.items == [] and windows.snapshot(4, 0)[2] == [0, 1, 2, 3]
    fresh = SWinMemory(windows.config, 200)
    windows.reset(fresh)
    gate.set()
    windows.close()
    assert windows.memory is fresh and fresh.items == [] and windows.session == 0
    windows.add(turns(2), Summaries())  # works again after close
    windows.flush()
    assert len(windows.memory.items) == 1


def test_background_equals_synchronous_after_flush():
    sync, background = make(window=3, overlap=1), make(window=3, overlap=1, background=True)
    history = turns(12)
    sync.add(history, Summaries())
    background.add(history, Summaries())
    background.flush()
    assert [i.to_dict() for i in background.memory.items] == [i.to_dict() for i in sync.memory.items]
    assert background.state() == sync.state()
    background.close()


def test_state_round_trips_through_json():
    windows = make(window=2, overlap=0, gamma=2, forget_batch=0)
    windows.add(turns(8), Summaries())
    state = json.loads(json.dumps({**windows.state(), "forgotten": list(windows.state()["forgotten"])}))
    assert set(state) == {
        "items",
        "windows",
        "forgotten",
        "session",
        "serial",
        "last_serial",
        "next_start",
        "covered",
    }
    restored = make(window=2, overlap=0, gamma=2, forget_batch=0)
    restored.restore(state, turns=8)
    assert restored.memory.items == windows.memory.items and restored.memory.log == windows.memory.log
    assert (restored.session, restored.next_start, restored.covered) == (0, 8, 7)
    assert list(restored.memory.forgotten) == list(windows.memory.forgotten)


def test_a_copy_has_its_own_lock_and_worker():
    windows = make(window=2, overlap=0, background=True)
    windows.add(turns(4), Summaries())
    for other in (copy.deepcopy(windows), pickle.loads(pickle.dumps(windows))):
        assert other.lock is not windows.lock
        assert [i.text for i in other.memory.items] == [i.text for i in windows.memory.items]
        other.add(turns(6), Summaries())
        other.flush()
        assert len(other.memory.items) == 3 and len(windows.memory.items) == 2
        other.close()
    windows.close()

"""How many torch threads a short call runs on (``ctxmgmt.components.threads``)."""

from __future__ import annotations

import sys
import threading

import pytest

from ctxmgmt.components import threads
from ctxmgmt.components.threads import SMALL_CALL_THREADS, background_threads, small_call_threads


class FakeTorch:
    """Stands in for ``torch``: only the thread setting (no weights load)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.calls: list[int] = []

    def get_num_threads(self) -> int:
        return self.count

    def set_num_threads(self, count: int) -> None:
        self.calls.append(count)
        self.count = count


@pytest.fixture
def torch(monkeypatch) -> FakeTorch:
    fake = FakeTorch(4)
    monkeypatch.setitem(sys.modules, "torch", fake)
    return fake


def test_a_small_call_runs_on_few_threads_and_restores_them(torch) -> None:
    with small_call_threads():
        assert torch.count == SMALL_CALL_THREADS
    assert torch.count == 4 and torch.calls == [SMALL_CALL_THREADS, 4]


def test_a_large_call_keeps_torchs_setting(torch) -> None:
    with small_call_threads(small=False):
        assert torch.count == 4
    assert torch.calls == []


def test_in_the_background_every_call_is_small(torch) -> None:
    with background_threads(), small_call_threads(small=False):
        assert torch.count == SMALL_CALL_THREADS
    assert torch.count == 4


def test_the_setting_is_restored_when_the_call_raises(torch) -> None:
    with pytest.raises(RuntimeError), small_call_threads():
        raise RuntimeError("forward pass failed")
    assert torch.count == 4


def test_background_is_per_thread_and_nests(torch) -> None:
    seen: list[int] = []

    def other() -> None:
        with small_call_threads(small=False):
            seen.append(torch.count)

    with background_threads():
        with background_threads():
            pass
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        with small_call_threads(small=False):
            assert torch.count == SMALL_CALL_THREADS
    assert seen == [4]  # another thread is not in the background
    assert getattr(threads._BACKGROUND, "on", False) is False


def test_without_torch_loaded_nothing_happens(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with small_call_threads():
        pass


def test_blas_runs_on_one_thread_within_calls_and_gets_its_setting_back_after_the_last():
    import numpy  # noqa: F401  -- its BLAS is the one lowered
    from threadpoolctl import threadpool_info

    import ctxmgmt.components.threads as threads

    controlled = {lib.filepath for lib in threads._blas()}  # numpy's (found once numpy is loaded)

    def blas_threads() -> list[int]:
        return [info["num_threads"] for info in threadpool_info() if info["filepath"] in controlled]

    before = blas_threads()
    assert before, "numpy's BLAS is found"
    with threads.few_blas_threads():
        assert blas_threads() == [min(n, 1) for n in before]
        with threads.few_blas_threads():  # nested (a worker step beside a call): still one
            pass
        assert blas_threads() == [min(n, 1) for n in before]
    assert blas_threads() == before


def test_blas_is_left_alone_when_switched_off(monkeypatch):
    from threadpoolctl import threadpool_info

    import ctxmgmt.components.threads as threads

    monkeypatch.setattr(threads, "BLAS_THREADS", None)
    before = [info["num_threads"] for info in threadpool_info()]
    with threads.few_blas_threads():
        assert [info["num_threads"] for info in threadpool_info()] == before

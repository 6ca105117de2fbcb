"""ctxmgmt.adapter.copying: deep copies that share components and stores instead of copying them."""

from __future__ import annotations

import copy
import gc
import threading

from ctxmgmt.adapter.copying import deep_copy, share
from ctxmgmt.app.testing import HashingEmbedder


class Holder:
    """An object with configuration, its own data, a shared component and a process resource."""

    def __init__(self, embedder: object, store: object) -> None:
        self.config = {"tau": 0.5}
        self.history = [["a", "b"], ["c"]]
        self.embedder = embedder
        self.store = store
        self.lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, object]) -> Holder:
        state = {k: v for k, v in self.__dict__.items() if k != "lock"}
        clone = Holder.__new__(Holder)
        clone.__dict__.update(deep_copy(state, memo, [self.embedder, self.store]))
        clone.lock = threading.Lock()  # its own resource
        return clone


def test_share_maps_each_object_to_itself_and_keeps_it_alive() -> None:
    memo: dict[int, object] = {}
    first, second = object(), [1, 2]
    assert share(memo, [first, None, second]) is memo
    assert memo[id(first)] is first and memo[id(second)] is second
    assert memo[id(memo)] == [first, second]  # kept alive for as long as the memo is
    assert id(None) not in memo  # None is never shared


def test_share_keeps_an_entry_already_in_the_memo() -> None:
    obj, earlier = [1], [1]
    memo: dict[int, object] = {id(obj): earlier}
    share(memo, [obj, obj])
    assert memo[id(obj)] is earlier
    assert memo[id(memo)] == []


def test_deepcopy_with_a_shared_memo_copies_everything_else() -> None:
    component = HashingEmbedder()
    data = {"component": component, "items": [[1], [2]]}
    clone = copy.deepcopy(data, share({}, [component]))
    assert clone["component"] is component
    assert clone["items"] == data["items"] and clone["items"] is not data["items"]
    assert clone["items"][0] is not data["items"][0]


def test_deep_copy_without_a_memo_shares_the_given_objects() -> None:
    store, component = {"rows": [1, 2]}, HashingEmbedder()
    original = {"store": store, "embedder": component, "history": [["hi"]]}
    clone = deep_copy(original, None, [store, component])
    assert clone["store"] is store and clone["embedder"] is component
    assert clone["history"] == [["hi"]] and clone["history"][0] is not original["history"][0]
    clone["history"].append(["mine"])
    assert original["history"] == [["hi"]]


def test_deep_copy_with_a_memo_keeps_identities_across_the_copy() -> None:
    shared_list = [1, 2]
    memo: dict[int, object] = {}
    a = deep_copy([shared_list, shared_list], memo, [])
    assert a[0] is a[1] and a[0] is not shared_list  # one copy, reused through the memo
    assert memo[id(shared_list)] is a[0]


def test_a_copy_shares_components_and_stores_and_makes_its_own_resources() -> None:
    embedder, store = HashingEmbedder(), object()
    original = Holder(embedder, store)
    clone = copy.deepcopy(original)
    assert clone.embedder is embedder and clone.store is store
    assert clone.config == original.config and clone.config is not original.config
    assert clone.history == original.history and clone.history[0] is not original.history[0]
    assert clone.lock is not original.lock
    clone.history[0].append("only in the copy")
    assert original.history[0] == ["a", "b"]


def test_objects_shared_in_a_nested_copy_stay_shared_and_alive() -> None:
    embedder = HashingEmbedder()
    holders = [Holder(embedder, None), Holder(embedder, None)]
    clones = copy.deepcopy(holders)
    del holders
    gc.collect()
    assert clones[0].embedder is clones[1].embedder is embedder
    assert clones[0].store is None

"""The Embedder protocol, how errors name an embedder, and the dimension it declares."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ctxmgmt.app.testing import CountingEmbedder, HashingEmbedder
from ctxmgmt.components.embedder_protocol import Embedder, embedder_dimension, embedder_name


class Plain:
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


def test_anything_with_embed_is_an_embedder() -> None:
    assert isinstance(Plain(), Embedder)
    assert isinstance(HashingEmbedder(), Embedder)
    assert not isinstance(lambda texts: texts, Embedder)
    assert not isinstance("minilm", Embedder)


def test_an_embedder_is_named_by_its_name_else_its_class() -> None:
    named = Plain()
    named.name = "my-embedder"  # type: ignore[attr-defined]
    assert embedder_name(named) == "my-embedder"
    assert embedder_name(Plain()) == "Plain"


def test_the_declared_dimension_is_read_without_embedding() -> None:
    embedder = HashingEmbedder(dim=64)
    assert embedder_dimension(embedder) == 64 and embedder.calls == []
    assert embedder_dimension(CountingEmbedder(HashingEmbedder(dim=32))) == 32
    assert embedder_dimension(Plain()) is None
    assert embedder_dimension(lambda texts: texts) is None


class Declares:
    def __init__(self, dimension: object) -> None:
        self.dimension = dimension


class Unreadable:
    @property
    def dimension(self) -> int:
        raise RuntimeError("model folder missing")


@pytest.mark.parametrize("value", [0, -3, True, 2.0, "384", None])
def test_a_declaration_that_is_not_a_positive_int_is_none(value: object) -> None:
    assert embedder_dimension(Declares(value)) is None


def test_a_dimension_that_cannot_be_read_is_no_declaration() -> None:
    assert embedder_dimension(Unreadable()) is None
    assert embedder_dimension(Declares(384)) == 384

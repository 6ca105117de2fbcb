"""Pluggable components, each a small protocol with an offline default."""

from ctxmgmt.components.embedder import (
    CallableEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    as_embedder,
    default_embedder,
)
from ctxmgmt.components.tokens import (
    CallableTokenCounter,
    TiktokenCounter,
    TokenCounter,
    as_token_counter,
    default_token_counter,
)

__all__ = [
    "CallableEmbedder",
    "CallableTokenCounter",
    "Embedder",
    "SentenceTransformerEmbedder",
    "TiktokenCounter",
    "TokenCounter",
    "as_embedder",
    "as_token_counter",
    "default_embedder",
    "default_token_counter",
]

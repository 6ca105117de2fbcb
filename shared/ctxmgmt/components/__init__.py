"""Pluggable components, each a small protocol with an offline default."""

from ctxmgmt.components.embedder import (
    CallableEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    as_embedder,
    default_embedder,
)
from ctxmgmt.components.summarizer import (
    ExtractiveSummarizer,
    LLMSummarizer,
    Summarizer,
    as_summarizer,
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
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "SentenceTransformerEmbedder",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "as_embedder",
    "as_summarizer",
    "as_token_counter",
    "default_embedder",
    "default_token_counter",
]

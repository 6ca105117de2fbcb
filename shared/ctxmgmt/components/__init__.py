"""Pluggable components, each a small protocol with an offline default."""

from ctxmgmt.components.brief_summarizer import BriefSummarizer
from ctxmgmt.components.callable_embedder import CallableEmbedder
from ctxmgmt.components.decider import (
    Decider,
    EmbeddedDecider,
    LLMDecider,
    as_decider,
)
from ctxmgmt.components.embedder import as_embedder, default_embedder
from ctxmgmt.components.embedder_protocol import Embedder
from ctxmgmt.components.entities import (
    CallableEntityExtractor,
    Entity,
    EntityExtractor,
    LLMEntityExtractor,
    SpacyEntityExtractor,
    as_entity_extractor,
)
from ctxmgmt.components.extractive_summarizer import ExtractiveSummarizer
from ctxmgmt.components.llm_summarizer import LLMSummarizer
from ctxmgmt.components.sentence_transformer_embedder import SentenceTransformerEmbedder
from ctxmgmt.components.static_embedder import StaticEmbedder
from ctxmgmt.components.static_turns import StaticTurns
from ctxmgmt.components.summarizer import as_summarizer
from ctxmgmt.components.summarizer_protocol import Summarizer
from ctxmgmt.components.tokens import (
    CallableTokenCounter,
    MessageListCounter,
    TiktokenCounter,
    TokenCounter,
    TokenCountError,
    TokenizerCounter,
    as_token_counter,
    check_token_counter,
    default_token_counter,
)

__all__ = [
    "BriefSummarizer",
    "CallableEmbedder",
    "CallableEntityExtractor",
    "CallableTokenCounter",
    "Decider",
    "EmbeddedDecider",
    "Embedder",
    "Entity",
    "EntityExtractor",
    "ExtractiveSummarizer",
    "LLMDecider",
    "LLMEntityExtractor",
    "LLMSummarizer",
    "MessageListCounter",
    "SentenceTransformerEmbedder",
    "SpacyEntityExtractor",
    "StaticEmbedder",
    "StaticTurns",
    "Summarizer",
    "TiktokenCounter",
    "TokenCounter",
    "TokenCountError",
    "TokenizerCounter",
    "as_decider",
    "as_embedder",
    "as_entity_extractor",
    "as_summarizer",
    "as_token_counter",
    "check_token_counter",
    "default_embedder",
    "default_token_counter",
]

"""Relevance of past turns to a question.

BM25, dense-plus-lexical fusion, Kadane spans, and what a turn's vector stands for.
"""

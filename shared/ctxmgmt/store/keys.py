r"""Store keys: how a session's identity becomes the key a store files it under.

Two rules, each in one place:

- :func:`compose_key` joins the parts of an identity (strategy name, adapter surface, instance
  name, session id) with ``":"``, percent-escaping ``"%"`` and ``":"`` inside each part, so no
  two distinct tuples of parts give one key (a block ``facts`` with session ``v2:alice`` and a
  block ``facts:v2`` with session ``alice`` no longer meet). Parts without either character
  come out as they are, so the keys of such identities are byte-identical to the plain
  ``":"``-join earlier versions stored.
- :func:`bounded_key` is what every backend files a key under: the key itself, or
  :data:`HASHED` + the hex SHA-256 digest of the key when it is longer than
  :data:`MAX_KEY_BYTES` UTF-8 bytes or cannot be stored as text (a NUL, a lone surrogate).
  A 100 KB thread id therefore costs 72 bytes per stored row, on every backend.

Example:
    >>> compose_key("kadanedial", "block", "facts", "v2:alice")
    'kadanedial:block:facts:v2%3Aalice'
    >>> compose_key("kadanedial", "block", "facts:v2", "alice")
    'kadanedial:block:facts%3Av2:alice'
    >>> bounded_key("kadanedial:classic:u1")
    'kadanedial:classic:u1'
    >>> len(bounded_key("x" * 100_000))
    72
"""

from __future__ import annotations

import hashlib

SEPARATOR = ":"
"""Between the parts of a composed key."""

MAX_KEY_BYTES = 1024
"""Longest key (UTF-8 bytes) a backend stores as it is; longer ones are stored as a digest.
PostgreSQL's btree index entries are limited to about 2.7 kB; 1 KB keeps every row small."""

HASHED = "\x01sha256:"
"""Starts a stored key that is the digest of the session key (:func:`bounded_key`)."""

_ESCAPES = str.maketrans({"%": "%25", SEPARATOR: "%3A"})


def key_part(text: str) -> str:
    """``text`` as one part of a composed key: ``%`` -> ``%25``, ``:`` -> ``%3A``, the rest as is."""
    return text.translate(_ESCAPES)


def compose_key(*parts: str) -> str:
    """The parts (each escaped by :func:`key_part`) joined by ``":"``; one-to-one on tuples of parts.

    Example:
        >>> compose_key("a", "b:c") != compose_key("a:b", "c")
        True
    """
    return SEPARATOR.join(key_part(part) for part in parts)


def bounded_key(key: str) -> str:
    r"""The key a backend stores for session key ``key``; at most :data:`MAX_KEY_BYTES` bytes.

    ``key`` itself when it is valid UTF-8 (no lone surrogate), holds no NUL, is at most
    :data:`MAX_KEY_BYTES` bytes and does not start with :data:`HASHED`; otherwise
    ``"\x01sha256:"`` + the hex SHA-256 digest of its UTF-8 bytes (lone surrogates kept,
    ``surrogatepass``; 72 characters). A key starting with the marker is hashed too, so the
    mapping stays one-to-one. The same rule serves every backend (it is the rule
    :class:`~ctxmgmt.store.PostgresStore` always used, so its stored keys are unchanged).
    """
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        size = -1
    if 0 <= size <= MAX_KEY_BYTES and "\x00" not in key and not key.startswith(HASHED):
        return key
    return HASHED + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def shown_key(key: str, limit: int = 120) -> str:
    """``key`` for a log message: cut to ``limit`` characters (default 120) with its length noted."""
    return key if len(key) <= limit else f"{key[:limit]}...({len(key)} chars)"

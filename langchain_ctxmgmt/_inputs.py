"""What a classic memory reads from a chain's inputs and outputs: the query and the new turn.

As ``ConversationBufferMemory`` does: the input key is ``input_key`` or the single input that is
not a memory variable or ``"stop"``; the output key is ``output_key``, the single output, or
``"output"`` among several (with a warning).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxmgmt import ConfigurationError, InvalidMessageError
from langchain_ctxmgmt._convert import content_text, to_ctxmgmt


def prompt_input_key(
    inputs: dict[str, Any],
    input_key: str | None,
    memory_variables: Sequence[str],
    *,
    required: bool,
    owner: str,
) -> str | None:
    """The key of the user's message among ``inputs`` (None when there is none and it is not ``required``).

    Raises:
        ConfigurationError: ``input_key`` is missing from ``inputs`` or the key is ambiguous.
    """
    if input_key is not None:
        if required and input_key not in inputs:
            raise ConfigurationError(f"input_key {input_key!r} is not among the inputs {sorted(inputs)}")
        return input_key
    keys = sorted(set(inputs) - {*memory_variables, "stop"})
    if len(keys) == 1:
        return keys[0]
    if not keys and not required:
        return None
    raise ConfigurationError(f"{owner} expects one input key, got {keys}; set input_key to choose one")


def output_key_of(outputs: dict[str, Any], output_key: str | None, *, owner: str) -> str:
    """The key of the model's answer among ``outputs``.

    Raises:
        ConfigurationError: ``output_key`` is missing from ``outputs`` or the key is ambiguous.
    """
    if output_key is not None:
        if output_key not in outputs:
            raise ConfigurationError(f"output_key {output_key!r} is not among the outputs {sorted(outputs)}")
        return output_key
    if len(outputs) == 1:
        return next(iter(outputs))
    if "output" in outputs:
        warnings.warn(
            f"{owner} got several output keys {sorted(outputs)}; using 'output'. "
            "Set output_key to choose another.",
            stacklevel=4,
        )
        return "output"
    raise ConfigurationError(
        f"{owner} got several output keys {sorted(outputs)}; set output_key to choose one"
    )


def query_of(
    inputs: dict[str, Any], input_key: str | None, memory_variables: Sequence[str], *, owner: str
) -> str | None:
    """The text of the user's message in ``inputs`` (None when there is none).

    Raises:
        InvalidMessageError: the input is neither a string nor a message.
    """
    key = prompt_input_key(inputs, input_key, memory_variables, required=False, owner=owner)
    value = None if key is None else inputs.get(key)
    if value is None:
        return None
    if isinstance(value, BaseMessage):
        return content_text(value)
    if not isinstance(value, str):
        raise InvalidMessageError(f"input {key!r} must be a string, got {type(value).__name__}")
    return value


def new_messages(
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    input_key: str | None,
    output_key: str | None,
    memory_variables: Sequence[str],
    *,
    owner: str,
) -> list[BaseMessage]:
    """The turn a chain call adds: the user's input and the model's output, validated.

    Raises:
        InvalidMessageError: the input or output is None, empty or not text.
        ConfigurationError: the input or output key cannot be determined.
    """
    key = prompt_input_key(inputs, input_key, memory_variables, required=True, owner=owner)
    assert key is not None  # required=True never returns None
    pair = [
        _as_message(inputs[key], HumanMessage, f"input {key!r}"),
        _as_message(outputs[output_key_of(outputs, output_key, owner=owner)], AIMessage, "output"),
    ]
    for message in pair:
        to_ctxmgmt(message)  # validate before anything is stored
    return pair


def _as_message(value: Any, cls: type[BaseMessage], label: str) -> BaseMessage:
    if isinstance(value, cls):
        return value
    if not isinstance(value, str):
        raise InvalidMessageError(f"{label} must be a string, got {type(value).__name__}")
    return cls(content=value)

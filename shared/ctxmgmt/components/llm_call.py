"""Bounded model calls: every LLM call a memory makes has a time limit, a capped input and a count.

The LLM components (:class:`~ctxmgmt.components.summarizer.LLMSummarizer`,
:class:`~ctxmgmt.components.decider.LLMDecider`,
:class:`~ctxmgmt.components.entities.LLMEntityExtractor`) derive from :class:`LLMCaller`, which
makes each ``complete(prompt)`` call through :func:`call_llm`:

- **Time limit.** The call runs in a daemon worker thread; after ``timeout`` seconds (default
  :data:`DEFAULT_TIMEOUT`, 30 s) the caller stops waiting, :class:`LLMTimeoutError` is raised and
  the component answers with its offline fallback (logging a warning). Python cannot kill a
  thread, so the timed-out call is *abandoned*: it keeps running until the provider returns,
  and its late answer is ignored. While it runs, the same component starts no new call (the
  fallback answers at once), so a hung provider delays one call by ``timeout``, not every call;
  and at most :data:`MAX_ABANDONED_CALLS` abandoned calls may run at once per process. The
  worker runs in a copy of the caller's ``contextvars`` context, so tracing that follows the
  context (LlamaIndex instrumentation, LangChain run config) nests the call as before.
- **Input cap.** Conversation text put into a prompt is cut to ``max_input_chars`` characters
  (default :data:`MAX_INPUT_CHARS`) by :func:`cap_text`: head and tail kept, the middle replaced
  by a marker. Only the copy sent to the model is cut; the stored history never is.
- **Count.** Each started call (answered, failed or timed out) counts once: in the component's
  ``calls`` and in every :func:`meter_calls` block open in the calling context, which is how a
  strategy's ``llm_calls`` counts exactly the calls made on its behalf.

Example:
    >>> ask = LLMCaller(lambda prompt: prompt.upper(), timeout=5)
    >>> with meter_calls() as meter:
    ...     ask.ask("hello")
    'HELLO'
    >>> meter.calls, ask.calls
    (1, 1)
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ctxmgmt.messages.exceptions import ComponentError, ConfigurationError
from ctxmgmt.messages.text_bounds import MAX_INPUT_CHARS as MAX_INPUT_CHARS
from ctxmgmt.messages.text_bounds import TRUNCATION_MARKER as TRUNCATION_MARKER
from ctxmgmt.messages.text_bounds import bound_input as bound_input
from ctxmgmt.messages.text_bounds import cap_text as cap_text

DEFAULT_TIMEOUT = 30.0
"""Seconds one summariser/decider/extractor call may take before the fallback answers.

Chosen here, not taken from a provider: these calls ask for a short answer (at most a few
bullet lines or one JSON object, a few hundred tokens), which hosted models return in a few
seconds; 30 s leaves room for queueing and slow local models while bounding a hung call to
one short pause of the conversation."""

MAX_ABANDONED_CALLS = 8
"""Most timed-out calls left running at once in a process; further calls are not started."""


class LLMTimeoutError(ComponentError):
    """A model call gave no answer within its time limit."""


class CallNotStartedError(LLMTimeoutError):
    """A model call was not started: :data:`MAX_ABANDONED_CALLS` timed-out calls still run."""


_abandoned = 0
_abandoned_lock = threading.Lock()
_meters: contextvars.ContextVar[tuple[CallMeter, ...]] = contextvars.ContextVar("ctxmgmt_meters", default=())


def abandoned_calls() -> int:
    """Timed-out calls still running in this process (their answers will be ignored)."""
    return _abandoned


class CallMeter:
    """Counts the model calls started while it is open (see :func:`meter_calls`).

    Attributes:
        calls: Calls started through :func:`call_llm` in the calling context.
    """

    def __init__(self) -> None:
        self.calls = 0

    def calls_of(self, component: Any, uses: int = 1) -> int:
        """The LLM calls to charge for ``uses`` uses of ``component`` inside the block.

        The counted calls, for components that call through :func:`call_llm` (any
        :class:`LLMCaller`, or any component whose calls were counted); otherwise ``uses`` if the
        component declares ``uses_llm = True`` (one call per use assumed), else 0.
        """
        if self.calls or isinstance(component, LLMCaller):
            return self.calls
        return uses if getattr(component, "uses_llm", False) else 0


@contextmanager
def meter_calls() -> Iterator[CallMeter]:
    """Open a :class:`CallMeter` for the calls made in this context (nested meters all count)."""
    meter = CallMeter()
    token = _meters.set((*_meters.get(), meter))
    try:
        yield meter
    finally:
        _meters.reset(token)


def check_timeout(value: Any, name: str = "timeout") -> float | None:
    """``value`` as a timeout in seconds (a finite number > 0) or None (no limit).

    Raises:
        ConfigurationError: anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ConfigurationError(f"{name} must be a finite number of seconds > 0 or None, got {value!r}")
    return float(value)


def check_max_chars(value: Any, name: str = "max_input_chars") -> int | None:
    """``value`` as a character cap (an int >= 200) or None (no cap).

    Raises:
        ConfigurationError: anything else (below 200 the truncation marker would not fit).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 200:
        raise ConfigurationError(f"{name} must be an int >= 200 or None, got {value!r}")
    return value


class AbandonedCount:
    """How many timed-out calls of one caller are still running (kept by :func:`call_llm`)."""

    def __init__(self) -> None:
        self.count = 0


def call_llm(
    complete: Callable[[str], Any],
    prompt: str,
    *,
    timeout: float | None,
    abandoned: AbandonedCount | None = None,
) -> Any:
    """``complete(prompt)``, waited for at most ``timeout`` seconds (None: no limit, same thread).

    The call is counted in every open :func:`meter_calls` block when it starts. ``abandoned``
    (optional) counts the caller's own abandoned calls while they run.

    Raises:
        LLMTimeoutError: no answer within ``timeout`` (the call is abandoned, its answer ignored).
        CallNotStartedError: :data:`MAX_ABANDONED_CALLS` abandoned calls are still running; the
            call was not started (nor counted).
        Exception: whatever ``complete`` raised.
    """
    global _abandoned
    if timeout is None:
        _count_start()
        return complete(prompt)
    with _abandoned_lock:
        if _abandoned >= MAX_ABANDONED_CALLS:
            raise CallNotStartedError(
                f"not started: {_abandoned} earlier model calls timed out and are still running"
            )
    _count_start()
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        global _abandoned
        try:
            outcome["answer"] = context.run(complete, prompt)
        except BaseException as exc:  # handed to the caller (or dropped if it stopped waiting)
            outcome["error"] = exc
        finally:
            with _abandoned_lock:
                done.set()
                if outcome.get("abandoned"):
                    _abandoned -= 1
                    if abandoned is not None:
                        abandoned.count -= 1

    threading.Thread(target=run, name="ctxmgmt-llm-call", daemon=True).start()
    if not done.wait(timeout):
        with _abandoned_lock:
            if not done.is_set():
                outcome["abandoned"] = True
                _abandoned += 1
                if abandoned is not None:
                    abandoned.count += 1
                raise LLMTimeoutError(f"no answer within {timeout:g} s (the call is abandoned)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["answer"]


def _count_start() -> None:
    for meter in _meters.get():
        meter.calls += 1


def answer_text(answer: Any) -> str:
    """The text of a model's answer: a str, else its ``content``/``text`` attribute, else ``str()``."""
    if isinstance(answer, str):
        return answer
    for attribute in ("content", "text"):
        value = getattr(answer, attribute, None)
        if isinstance(value, str):
            return value
    return str(answer or "")


class LLMCaller:
    """Base of the LLM-backed components: a bounded, counted ``prompt -> text`` call.

    While one of its calls has timed out and is still running, the next calls are not started
    (:class:`CallNotStartedError`: the fallback answers at once), so a hung provider delays one
    call by ``timeout``, not every call; calls resume when the hung one ends.

    Args:
        complete: ``prompt -> answer`` (a str, or an object with ``content``/``text``).
        timeout: Seconds to wait for one answer; default :data:`DEFAULT_TIMEOUT` (30 s);
            None waits forever (in the caller's thread).
        max_input_chars: Most characters of conversation text per prompt (:meth:`cap`);
            default :data:`MAX_INPUT_CHARS` (24,000); None: no cap.

    Attributes:
        calls: Model calls started (answered, failed or timed out).
        timeouts: Calls that timed out, or were not started because too many hung calls run.

    Raises:
        ConfigurationError: ``complete`` is not callable, or a bad ``timeout``/``max_input_chars``.
    """

    uses_llm = True

    def __init__(
        self,
        complete: Callable[[str], Any],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_input_chars: int | None = MAX_INPUT_CHARS,
    ) -> None:
        if not callable(complete):
            raise ConfigurationError(f"complete must be a prompt -> text callable, got {complete!r}")
        self.complete = complete
        self.timeout = check_timeout(timeout)
        self.max_input_chars = check_max_chars(max_input_chars)
        self.calls = 0
        self.timeouts = 0
        self._abandoned = AbandonedCount()

    def cap(self, text: str) -> str:
        """``text`` within ``max_input_chars`` (:func:`cap_text`), for a prompt."""
        return cap_text(text, self.max_input_chars)

    def ask(self, prompt: str) -> str:
        """The model's answer text to ``prompt``, within ``timeout``.

        Raises:
            LLMTimeoutError: no answer in time (see :func:`call_llm`).
            CallNotStartedError: an earlier call of this caller (or too many in the process)
                timed out and is still running; this one was not started.
            Exception: whatever ``complete`` raised.
        """
        try:
            if self._abandoned.count:
                raise CallNotStartedError("not started: the previous call timed out and is still running")
            answer = call_llm(self.complete, prompt, timeout=self.timeout, abandoned=self._abandoned)
        except CallNotStartedError:
            self.timeouts += 1
            raise
        except LLMTimeoutError:
            self.calls += 1
            self.timeouts += 1
            raise
        except Exception:
            self.calls += 1
            raise
        self.calls += 1
        return answer_text(answer)

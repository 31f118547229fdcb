"""How every long-lived part of tether starts, stops and waits: written once, here.

- :class:`Service` is the base of anything with a lifetime: ``start()`` and
  ``close()``, and the async context manager that calls them;
- :func:`cancel_and_wait` is how an owner ends the tasks it started, and
  :func:`cancelling` tells a task it was asked to stop;
- :func:`stop_on_signals` and :func:`until_signalled` are the one signal loop of
  every program (SIGINT, SIGTERM);
- :func:`retry_until_deadline` asks again while the other side is not there yet,
  paced by a :class:`Pacing`, until a deadline.

Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)

#: How long a cancelled task has to end before :func:`cancel_and_wait` cancels it again.
CANCEL_AGAIN_S = 5.0

#: The signals that stop a program: Ctrl-C and the service manager's stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Service:
    """A part with a lifetime: ``async with part:`` starts it and closes it.

    A subclass overrides :meth:`start` (return once it serves; on failure undo
    what it began and raise) and :meth:`close` (idempotent; nothing of it left
    running). Either may be left as is when there is nothing to do.
    """

    async def start(self) -> None:
        """Begin serving; nothing to do here."""

    async def close(self) -> None:
        """Stop serving and release what :meth:`start` took; nothing to do here."""

    async def close_on_failure(self, opening: Awaitable[None]) -> None:
        """Await ``opening`` (the work of a :meth:`start`); when it fails, close what it
        began and raise."""
        try:
            await opening
        except BaseException:
            await self.close()
            raise

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Lifetime(Protocol):
    """The async context manager of a part, for a protocol several parts implement
    (a microphone, a speaker, a button): it extends this instead of declaring both."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def cancelling() -> bool:
    """Whether the running task has been asked to stop (a library that turns a cancel
    into its own error, or cancels what it shares, is told apart from a real stop)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def cancel_and_wait(
    *tasks: asyncio.Future[Any] | None, reraise: bool = True, again_s: float = CANCEL_AGAIN_S
) -> list[BaseException]:
    """Cancel ``tasks`` (``None`` is skipped) and wait until each has ended.

    A task's own cancellation is swallowed. Any other error it ended with is raised
    once all have ended (the first, in the order given); with ``reraise=False`` they
    are returned instead, for a ``close()`` whose tasks reported their errors as they
    happened. When the caller is itself being cancelled while it waits, that
    cancellation propagates.

    A task still running ``again_s`` after it was cancelled is cancelled again, and
    again, until it ends: Python 3.11's ``asyncio.wait_for`` (inside every nats-py
    request) loses a cancellation that arrives as its answer does, and a periodic
    loop caught there would otherwise run on and hold its owner's close forever.
    """
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    if not pending:
        return []
    # asyncio.wait neither raises what the tasks raised nor cancels them when the
    # caller is cancelled: the caller's own cancellation is the only thing it raises.
    running = set(pending)
    while running:
        _, running = await asyncio.wait(running, timeout=again_s)
        for task in running:
            log.warning("%r still runs %g s after it was cancelled; cancelling it again",
                        task, again_s)  # fmt: skip
            task.cancel()
    errors = [
        error
        for task in pending
        if not task.cancelled() and (error := task.exception()) is not None
    ]
    if errors and reraise:
        raise errors[0]
    return errors


@contextlib.contextmanager
def stop_on_signals(
    stop: asyncio.Event | None = None, signals: tuple[signal.Signals, ...] = STOP_SIGNALS
) -> Iterator[asyncio.Event]:
    """Set ``stop`` (a new event unless given) on any of ``signals`` while inside.

    Must be entered in the running event loop. Where the platform cannot install a
    handler (not the main thread's loop on Windows), that signal keeps its default.
    """
    event = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in signals:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, event.set)
            installed.append(sig)
    try:
        yield event
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def until_signalled(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
    """Return once one of ``signals`` arrives."""
    with stop_on_signals(signals=signals) as stop:
        await stop.wait()


@dataclass(frozen=True)
class Pacing:
    """The pauses between attempts: ``first_s``, then each ``factor`` times the last,
    at most ``max_s`` (constant when ``factor`` is 1)."""

    first_s: float
    factor: float = 1.0
    max_s: float | None = None

    def pauses(self) -> Iterator[float]:
        """The pause before each next attempt, without end."""
        pause = self.first_s
        while True:
            yield pause
            pause *= self.factor
            if self.max_s is not None:
                pause = min(pause, self.max_s)


async def retry_until_deadline(
    attempt: Callable[[float], Awaitable[T]],
    *,
    within_s: float,
    retry_on: tuple[type[Exception], ...],
    give_up: Callable[[Exception], Exception],
    pacing: Pacing,
    on_retry: Callable[[Exception], None] | None = None,
) -> T:
    """``await attempt(left_s)`` until it returns; again, after a pause, while it
    raises one of ``retry_on``; raise ``give_up(last error)`` once ``within_s`` is over.

    ``attempt`` is given the seconds left until the deadline (never below zero), to
    bound its own wait. The pause is cut short at the deadline; there is no attempt
    after it. Any other error of ``attempt`` propagates at once. ``on_retry`` hears
    each error that is retried, e.g. to log it.
    """
    deadline = time.monotonic() + within_s
    pauses = pacing.pauses()
    while True:
        try:
            return await attempt(max(deadline - time.monotonic(), 0.0))
        except retry_on as exc:
            left = deadline - time.monotonic()
            if left > 0:
                if on_retry is not None:
                    on_retry(exc)
                await asyncio.sleep(min(next(pauses), left))
            if time.monotonic() >= deadline:
                raise give_up(exc) from exc

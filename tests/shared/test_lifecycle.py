"""The lifecycle helpers, on a real event loop: every wait is under a timeout."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from shared.lifecycle import (
    Pacing,
    Service,
    cancel_and_wait,
    retry_until_deadline,
    stop_on_signals,
    until_signalled,
)

WAIT_S = 5.0
T = TypeVar("T")
QUICK = Pacing(0.01)


class Recorder(Service):
    """A service that notes what was called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    async def close(self) -> None:
        self.calls.append("close")


class Unavailable(Exception):
    """The other side is not there yet."""


class GaveUp(Exception):
    """What the caller raises at the deadline."""


async def test_a_service_starts_on_entry_and_closes_on_exit() -> None:
    service = Recorder()
    async with service as entered:
        assert entered is service
        assert service.calls == ["start"]
    assert service.calls == ["start", "close"]


class HalfOpening(Recorder):
    """A service whose start fails after it began something."""

    async def start(self) -> None:
        await self.close_on_failure(self._open())

    async def _open(self) -> None:
        self.calls.append("began")
        raise OSError("port taken")


async def test_a_start_that_fails_closes_what_it_began_and_raises() -> None:
    service = HalfOpening()
    with pytest.raises(OSError, match="port taken"):
        async with service:
            pytest.fail("the body of a service that did not start ran")
    assert service.calls == ["began", "close"]


async def test_a_start_that_succeeds_is_not_closed() -> None:
    service = Recorder()
    await service.close_on_failure(asyncio.sleep(0))
    assert service.calls == []


async def test_a_service_closes_when_the_body_raises() -> None:
    service = Recorder()
    with pytest.raises(RuntimeError, match="body"):
        async with service:
            raise RuntimeError("body")
    assert service.calls == ["start", "close"]


async def test_the_base_service_does_nothing() -> None:
    async with Service() as service:
        assert isinstance(service, Service)


async def test_cancel_and_wait_ends_every_task() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    tasks = [asyncio.create_task(forever()) for _ in range(3)]
    await asyncio.wait_for(started.wait(), WAIT_S)
    await asyncio.wait_for(cancel_and_wait(*tasks, None), WAIT_S)
    assert all(task.cancelled() for task in tasks)


async def test_cancel_and_wait_lets_a_task_finish_its_cleanup() -> None:
    cleaned = asyncio.Event()

    async def with_cleanup() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)
            cleaned.set()

    task = asyncio.create_task(with_cleanup())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), WAIT_S)
    assert cleaned.is_set()


async def test_cancel_and_wait_ends_a_task_that_lost_its_cancellation() -> None:
    # Python 3.11's asyncio.wait_for returns its answer and drops a cancellation that
    # arrives with it; a polling loop caught there runs on as if never cancelled.
    polls: list[int] = []

    async def polls_forever() -> None:
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if not polls:  # the first cancellation is lost, as in that race
                    polls.append(1)
                    continue
                raise

    task = asyncio.create_task(polls_forever())
    await asyncio.sleep(0.02)
    await asyncio.wait_for(cancel_and_wait(task, again_s=0.05), WAIT_S)
    assert task.cancelled() and polls == [1]


async def test_cancel_and_wait_raises_what_a_task_failed_with_after_all_ended() -> None:
    async def fails() -> None:
        raise ValueError("broken")

    async def forever() -> None:
        await asyncio.Event().wait()

    failed = asyncio.create_task(fails())
    other = asyncio.create_task(forever())
    await asyncio.wait_for(asyncio.wait({failed}), WAIT_S)
    with pytest.raises(ValueError, match="broken"):
        await asyncio.wait_for(cancel_and_wait(failed, other), WAIT_S)
    assert other.cancelled()


async def test_cancel_and_wait_of_a_finished_task_returns() -> None:
    task = asyncio.create_task(asyncio.sleep(0))
    await asyncio.wait_for(task, WAIT_S)
    await asyncio.wait_for(cancel_and_wait(task), WAIT_S)


async def test_the_callers_own_cancellation_propagates() -> None:
    entered = asyncio.Event()

    async def stubborn() -> None:
        # Outlives its first cancellation, so the caller is still waiting on it.
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            entered.set()
            await asyncio.Event().wait()

    inner = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    caller = asyncio.create_task(cancel_and_wait(inner))
    await asyncio.wait_for(entered.wait(), WAIT_S)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(caller, WAIT_S)
    assert caller.cancelled()
    inner.cancel()
    await asyncio.wait_for(asyncio.wait({inner}), WAIT_S)


async def test_a_signal_sets_the_stop_event_and_the_handler_is_removed() -> None:
    loop = asyncio.get_running_loop()
    with stop_on_signals(signals=(signal.SIGUSR1,)) as stop:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(stop.wait(), WAIT_S)
    assert not loop.remove_signal_handler(signal.SIGUSR1)


async def test_stop_on_signals_sets_the_event_it_is_given() -> None:
    given = asyncio.Event()
    with stop_on_signals(given, signals=(signal.SIGUSR1,)) as stop:
        assert stop is given
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.wait_for(given.wait(), WAIT_S)


async def test_until_signalled_returns_on_the_signal() -> None:
    waiting = asyncio.create_task(until_signalled((signal.SIGUSR2,)))
    await asyncio.sleep(0)
    os.kill(os.getpid(), signal.SIGUSR2)
    await asyncio.wait_for(waiting, WAIT_S)


def test_pacing_grows_to_its_ceiling() -> None:
    pauses = Pacing(0.05, factor=2, max_s=0.3).pauses()
    assert [next(pauses) for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    constant = Pacing(1.0).pauses()
    assert [next(constant) for _ in range(3)] == [1.0, 1.0, 1.0]


async def retried(
    attempt: Callable[[float], Awaitable[T]],
    *,
    within_s: float = WAIT_S,
    give_up: Callable[[Exception], Exception] = GaveUp,
    pacing: Pacing = QUICK,
    on_retry: Callable[[Exception], None] | None = None,
) -> T:
    """``retry_until_deadline`` retrying :class:`Unavailable`, under a timeout."""
    return await asyncio.wait_for(
        retry_until_deadline(
            attempt,
            within_s=within_s,
            retry_on=(Unavailable,),
            give_up=give_up,
            pacing=pacing,
            on_retry=on_retry,
        ),
        within_s + WAIT_S,
    )


async def test_retry_returns_once_the_other_side_answers() -> None:
    lefts: list[float] = []
    seen: list[Exception] = []

    async def attempt(left_s: float) -> str:
        lefts.append(left_s)
        if len(lefts) < 3:
            raise Unavailable(str(len(lefts)))
        return "answer"

    answer = await retried(attempt, on_retry=seen.append)
    assert answer == "answer"
    assert [str(exc) for exc in seen] == ["1", "2"]
    assert all(0 < left <= WAIT_S for left in lefts)
    assert lefts == sorted(lefts, reverse=True)


async def test_retry_gives_up_at_the_deadline_with_the_last_error_as_cause() -> None:
    async def attempt(left_s: float) -> None:
        raise Unavailable("not yet")

    began = time.monotonic()
    with pytest.raises(GaveUp) as raised:
        await retried(
            attempt,
            within_s=0.2,
            give_up=lambda exc: GaveUp(f"gave up: {exc}"),
            pacing=Pacing(0.01, factor=2, max_s=0.05),
        )
    took = time.monotonic() - began
    assert str(raised.value) == "gave up: not yet"
    assert isinstance(raised.value.__cause__, Unavailable)
    assert 0.2 <= took < WAIT_S


async def test_an_error_that_is_not_retried_propagates_at_once() -> None:
    calls = 0

    async def attempt(left_s: float) -> None:
        nonlocal calls
        calls += 1
        raise KeyError("final")

    with pytest.raises(KeyError):
        await retried(attempt)
    assert calls == 1

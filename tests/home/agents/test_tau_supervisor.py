"""The τ supervisor's restarts, with a stand-in for the τ process (no subprocess runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest

from home.agents.errors import AgentError, RestartBudgetExhausted
from home.agents.tau_command import TauLaunch
from home.agents.tau_supervisor import TauSupervisor
from home.llm.endpoint import ModelEndpoint
from shared.schema.catalog import RestartPolicy


class FakeTau:
    """What the supervisor uses of a τ process; the first ``failing`` starts fail."""

    started: ClassVar[list[FakeTau]] = []
    failing: ClassVar[int] = 0

    def __init__(self, *_: Any, **__: Any) -> None:
        self.exited = asyncio.Event()
        self.pid = 1000 + len(FakeTau.started)
        self.returncode: int | None = None
        self.closed = False

    async def __aenter__(self) -> FakeTau:
        if FakeTau.failing:
            FakeTau.failing -= 1
            raise AgentError("τ did not answer the handshake")
        FakeTau.started.append(self)
        return self

    def die(self) -> None:
        self.returncode = -9
        self.exited.set()

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def restarts() -> list[None]:
    """One entry per restart the supervisor reports."""
    return []


@pytest.fixture
def supervisor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, restarts: list[None]
) -> TauSupervisor:
    FakeTau.started = []
    FakeTau.failing = 0
    monkeypatch.setattr("home.agents.tau_supervisor.TauProcess", FakeTau)
    return TauSupervisor(
        cast(TauLaunch, None),
        ModelEndpoint(base_url="http://127.0.0.1:1/v1"),
        lambda _: None,
        name="agent.test",
        stderr_path=tmp_path / "tau.stderr.log",
        policy=RestartPolicy(max_restarts=2, window_s=60, backoff_s=0.0, backoff_max_s=0.0),
        on_restart=lambda: restarts.append(None),
    )


async def test_ensure_hands_out_the_live_tau_and_starts_a_dead_one_again(
    supervisor: TauSupervisor, restarts: list[None]
) -> None:
    assert supervisor.pid is None
    first = await supervisor.start()
    assert await supervisor.ensure() is first and supervisor.current is first
    assert supervisor.pid == first.pid
    cast(FakeTau, first).die()
    second = await supervisor.ensure()
    assert second is not first and supervisor.pid == second.pid
    assert cast(FakeTau, first).closed
    assert len(restarts) == 1
    await supervisor.close()
    assert cast(FakeTau, second).closed and supervisor.pid is None


async def test_watch_restarts_until_the_budget_is_spent(
    supervisor: TauSupervisor, restarts: list[None]
) -> None:
    await supervisor.start()

    async def kill_each() -> None:
        while True:
            await asyncio.sleep(0)
            for tau in FakeTau.started:
                if not tau.exited.is_set():
                    tau.die()

    killer = asyncio.create_task(kill_each())
    try:
        async with asyncio.timeout(5):
            with pytest.raises(RestartBudgetExhausted):
                await supervisor.watch()
    finally:
        killer.cancel()
    assert len(FakeTau.started) == 3
    assert len(restarts) == 2


async def test_a_start_that_fails_counts_against_the_budget_and_is_tried_again(
    supervisor: TauSupervisor, restarts: list[None]
) -> None:
    first = await supervisor.start()
    cast(FakeTau, first).die()
    FakeTau.failing = 1
    watcher = asyncio.create_task(supervisor.watch())
    async with asyncio.timeout(5):
        while len(FakeTau.started) < 2:
            await asyncio.sleep(0)
    watcher.cancel()
    with pytest.raises(asyncio.CancelledError):
        await watcher
    assert len(restarts) == 1
    FakeTau.started[-1].die()
    with pytest.raises(RestartBudgetExhausted):
        await supervisor.ensure()

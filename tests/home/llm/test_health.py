"""The llm component tells a busy model server from a dead one (issue 23, item 12)."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from home.llm.component import EmbeddedLlmComponent
from home.llm.server import process_cpu_seconds


@dataclass
class StubServer:
    """Stands in for LlamaServer: whether it answers, runs, and how much CPU it used."""

    answers: bool = True
    running: bool = True
    cpu: float = 0.0

    async def health(self) -> bool:
        return self.answers and self.running

    def cpu_seconds(self) -> float | None:
        return self.cpu if self.running else None


async def test_a_server_generating_is_busy_not_dead(tmp_path: Path) -> None:
    """Before: any unanswered check was a failure, and three restarted it mid-answer."""
    component = EmbeddedLlmComponent(tmp_path / "llm.log")
    server = StubServer()
    component._server = server  # type: ignore[assignment]
    assert (await component.health()).ok
    server.answers = False
    for _ in range(5):  # generating: no answers, but working
        server.cpu += 1.5
        health = await component.health()
        assert health.ok and health.detail.startswith("busy")
    health = await component.health()  # no answer and no work: hung
    assert not health.ok and "not working" in health.detail
    server.running = False
    health = await component.health()
    assert not health.ok and "exited" in health.detail


async def test_process_cpu_seconds_sees_a_process_work() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
    try:
        async with asyncio.timeout(30):
            while (process_cpu_seconds(proc.pid) or 0.0) < 0.2:
                await asyncio.sleep(0.05)
    finally:
        proc.kill()
        await proc.wait()
    assert process_cpu_seconds(proc.pid) is None

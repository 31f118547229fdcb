"""`home status` names a full store under the data directory, and clears once there is room.

Memory (``DATA_DIR/jmfts``) lives on its own small filesystem here
(tests/support/small_fs.py), as it would on a disk of its own: filled to the last
byte while `home up` runs, the ``storage`` component turns unhealthy naming that path
(home/substrate/storage.py), home keeps serving, and once the ballast is removed it
is healthy again, with no restart of home.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from home.jmfts.locate import HOME_SUBDIR
from tests.support.home_up import RunningHome, running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel
from tests.support.small_fs import small_filesystem

pytestmark = pytest.mark.slow

# Room for JMFTS's files and its embedder's index; filled to the last byte by the test.
SIZE_KIB = 64 * 1024
# Health checks run every second; three failing ones restart a component.
WAIT_S = 30.0


def _speak(request: RecordedRequest) -> Reply:
    return Reply.call("speak", {"text": "Fine."})


async def _storage_when(home: RunningHome, ok: bool) -> dict[str, Any]:
    """``home status``'s storage row once it is (un)healthy as asked, within WAIT_S."""
    row: dict[str, Any] = {}
    async with asyncio.timeout(WAIT_S):
        while True:
            status = await home.status()
            if status is not None:
                row = next(c for c in status["components"] if c["name"] == "storage")
                if (row["state"] == "healthy") == ok:
                    return row
            await asyncio.sleep(0.5)


async def test_a_full_store_turns_home_status_unhealthy_naming_it_until_freed(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "home"
    with small_filesystem(data_dir / HOME_SUBDIR, SIZE_KIB) as small:
        async with (
            ScriptedModel(responder=_speak) as model,
            running_home(data_dir, model.url) as home,
        ):
            healthy = await _storage_when(home, ok=True)
            assert "MiB free" in healthy["detail"]

            small.fill()
            full = await _storage_when(home, ok=False)
            assert f"{small.path}: " in full["detail"] and "KiB free" in full["detail"]
            status = await home.status()
            assert status is not None
            others = {c["name"]: c["state"] for c in status["components"]}
            assert others["nats-server"] == "healthy" and others["bridge"] == "healthy", others

            small.free()
            await _storage_when(home, ok=True)
            assert home.proc.returncode is None

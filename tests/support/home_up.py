"""``home up`` as a process for tests: started on a data directory, stopped for sure.

The language model is whatever ``llm_url`` serves (the scripted test double, in the
tests). Waits until the applied schema is active, so a turn sent next is routed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path


async def _schema_active(data_dir: Path) -> bool:
    status = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "status", "--json", "--data-dir", str(data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    out, _ = await status.communicate()
    if not out.strip():
        return False
    schemas = json.loads(out).get("schemas", [])
    return bool(schemas) and all(s["state"] == "active" for s in schemas)


@contextlib.asynccontextmanager
async def running_home(
    data_dir: Path,
    llm_url: str,
    *,
    bridge_port: int = 0,
    apply: Sequence[str] = ("edge_asr",),
    start_timeout_s: float = 120.0,
) -> AsyncIterator[Path]:
    """`home up` on ``data_dir`` until the block ends; its log is ``DATA_DIR/../home-up.log``."""
    log = (data_dir.parent / "home-up.log").open("ab")
    applied = [arg for name in apply for arg in ("--apply", name)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "home.cli", "up", "--data-dir", str(data_dir), "--bridge-port",
        str(bridge_port), "--llm-url", llm_url, *applied, stdout=log, stderr=log,
    )  # fmt: skip
    try:
        async with asyncio.timeout(start_timeout_s):
            while not await _schema_active(data_dir):
                assert proc.returncode is None, (data_dir.parent / "home-up.log").read_text()
                await asyncio.sleep(0.5)
        yield data_dir
    finally:
        try:
            if proc.returncode is None:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 60)  # home must stop; a hang fails
        finally:
            if proc.returncode is None:  # but a failure leaves nothing behind
                proc.kill()
                await proc.wait()
            log.close()

"""Child processes of the home: spawned in their own session, tied to our life, and logged.

Every child dies with its parent (:func:`shared.proc.die_with_parent`) so that
even a ``kill -9`` of ``home up`` leaves nothing running, and gets its own
process group so that Ctrl-C in the terminal reaches ``home up`` alone, which
then stops the children in order (:func:`shared.proc.terminate` with ``group``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from home.substrate.errors import ComponentError
from shared.proc import die_with_parent


async def spawn(
    argv: list[str], *, env: dict[str, str], log_path: Path, cwd: Path | None = None
) -> asyncio.subprocess.Process:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` (private, 0600)."""
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a log an earlier run left
    with os.fdopen(fd, "ab") as log:
        try:
            return await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            raise ComponentError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from exc

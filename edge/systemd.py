"""systemd readiness and watchdog notifications (the ``sd_notify`` protocol), when present.

Under a ``Type=notify`` unit systemd sets ``NOTIFY_SOCKET``; with
``WatchdogSec=`` it also sets ``WATCHDOG_USEC`` (and ``WATCHDOG_PID``). We send
``READY=1`` once every node is up, ``WATCHDOG=1`` at half the interval from a
task on the event loop, only while the edge is healthy (so a stuck loop or a
dead microphone stops the pings and systemd restarts the edge), and
``STOPPING=1`` on shutdown. Outside systemd every call is a no-op.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping

from shared.lifecycle import Service, cancel_and_wait

log = logging.getLogger(__name__)


class SystemdNotifier(Service):
    """Sends sd_notify datagrams to ``NOTIFY_SOCKET``; pings the watchdog while open."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        # A leading '@' names a socket in the abstract namespace.
        self.address = "\0" + raw[1:] if raw.startswith("@") else raw
        self.watchdog_s: float | None = None
        usec, pid = env.get("WATCHDOG_USEC"), env.get("WATCHDOG_PID")
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1_000_000
        self.healthy = healthy
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        """True when running under systemd with a notify socket."""
        return bool(self.address)

    def notify(self, message: str) -> None:
        """Send one notification (``READY=1``, ``STATUS=...``); failures are logged, not raised."""
        if not self.enabled:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                # Never block the event loop on a manager that is not reading.
                sock.setblocking(False)
                sock.connect(self.address)
                sock.sendall(message.encode())
        except OSError as exc:
            log.warning("sd_notify %r to %r failed: %s", message, self.address, exc)

    async def start(self) -> None:
        """Start pinging the watchdog, when systemd asked for it."""
        if self.enabled and self.watchdog_s:
            self._task = asyncio.create_task(self._watchdog(self.watchdog_s / 2), name="watchdog")

    async def close(self) -> None:
        """Tell systemd we are stopping and stop the watchdog pings."""
        self.notify("STOPPING=1")
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    async def _watchdog(self, every_s: float) -> None:
        while True:
            # Unhealthy (the microphone died): stop pinging and let systemd restart us.
            if self.healthy():
                self.notify("WATCHDOG=1")
            await asyncio.sleep(every_s)

"""A client of a running home: found through its data directory, spoken to over NATS.

It connects as the home's admin bus user, with the credentials ``home up`` keeps
in the data directory (docs/architecture.md "Security").
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from home.substrate.datadir import HomeState, find_home
from shared import control
from shared.bus_credentials import home_admin_url
from shared.control import ControlReply, ControlRequest
from shared.errors import BusCredentialsError, ControlTimeout, HomeNotRunning
from shared.lifecycle import Pacing, Service, cancelling, retry_until_deadline

DEFAULT_TIMEOUT_S = 10.0
# Between tries while nobody listens on the control subject yet: home's own
# connection is still re-subscribing after a nats-server restart or reload.
NO_RESPONDERS_RETRY_S = 0.1


class HomeClient(Service):
    """``async with HomeClient(data_dir) as home: await home.request("status")``."""

    def __init__(self, data_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self.state: HomeState | None = None
        self._nc: NatsClient | None = None

    @property
    def nc(self) -> NatsClient:
        """The open NATS connection to the home."""
        if self._nc is None:
            raise HomeNotRunning("the client is not connected; use it as `async with`")
        return self._nc

    async def start(self) -> None:
        """Find the home through its data directory and connect as its admin user;
        HomeNotRunning if it is not there."""
        self.state = find_home(self.data_dir)
        try:
            url = home_admin_url(self.data_dir, self.state.nats_url)
        except BusCredentialsError as exc:
            raise HomeNotRunning(str(exc)) from exc
        try:
            # A few tries: nats-server drops a client still in its handshake while it
            # reloads its authorization (after each pairing).
            self._nc = await nats.connect(
                url,
                name="home.cli",
                connect_timeout=2,
                max_reconnect_attempts=2,
                reconnect_time_wait=0.2,
            )
        except (NatsError, OSError) as exc:
            raise HomeNotRunning(
                f"the home on {self.data_dir} does not answer at {self.state.nats_url}: {exc}"
            ) from exc

    async def close(self) -> None:
        """Close the connection."""
        if self._nc is not None:
            nc, self._nc = self._nc, None
            try:
                await nc.close()
            except asyncio.CancelledError:
                # nats-py closing while it reconnects (home's server went away mid-request)
                # cancels its reconnect task, and with it the wait for the socket to close
                # that both await: that cancel is nats-py's own, not a stop of this task.
                if cancelling():
                    raise

    async def request(self, verb: str, **args: Any) -> Any:
        """Send one control request; the result, or ControlError with the remote code."""
        member = self.state.member if self.state is not None else None
        subject = (
            control.control_subject(verb)
            if member is None
            else control.member_control_subject(member, verb)
        )
        data = ControlRequest(args).to_json()

        async def ask(left_s: float) -> Msg:
            try:
                return await self.nc.request(subject, data, timeout=max(left_s, 0.01))
            except (NatsTimeout, TimeoutError) as exc:
                raise ControlTimeout(
                    "timeout", f"no answer on {subject} within {self.timeout_s:g} s ({exc!r})"
                ) from exc

        def give_up(exc: Exception) -> ControlTimeout:
            return ControlTimeout(
                "timeout",
                f"nobody answered on {subject} within {self.timeout_s:g} s"
                " (no responders: is home up still starting or reconnecting?)",
            )

        # No control surface subscribed yet (home is reconnecting to a restarted
        # nats-server): ask again until the deadline.
        msg = await retry_until_deadline(
            ask,
            within_s=self.timeout_s,
            retry_on=(NoRespondersError,),
            give_up=give_up,
            pacing=Pacing(NO_RESPONDERS_RETRY_S),
        )
        return ControlReply.from_json(msg.data).unwrap()

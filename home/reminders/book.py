"""Reminders kept by JetStream's own message scheduling, so no process holds a timer.

A stream per agent, ``REMINDERS_<agent>`` on ``reminders.*.<agent>.*`` (outside
``events.>``: the event log ages its messages out, and a reminder may be a year ahead;
one per agent, so an agent's bus user is granted its own stream and no other's). A
reminder is one message on
``reminders.schedule.<agent>.<id>`` with the headers of a one-shot schedule
(``Nats-Schedule: @at <UTC time>``, ``Nats-Schedule-Target:
reminders.due.<agent>.<id>``): at that time nats-server itself publishes it to the
target and drops the schedule, and the agent's durable consumer on
``reminders.due.<agent>.*`` hands it to the agent's node. The schedule is stored and
replicated like any message of the stream, so it outlives a restart of home (a
schedule whose time passed while the server was down fires when it is back) and, in
a cluster, of a member. Cancelling rolls the subject up to an empty marker that
expires a second later; the fired message carries a TTL, the reminder's own plus
:data:`DUE_KEPT_S`, so the stream stays small and a node down past the reminder's TTL
can still report it missed (docs/architecture.md "Reminders").
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from home.reminders.errors import NoTimeSaid, ReminderError
from shared.errors import SubjectError
from shared.subjects import (
    check_name,
    reminder_due_subject,
    reminder_schedule_subject,
    reminders_stream,
)

# Said after its time but within this, a reminder is still worth saying.
DEFAULT_TTL_S = 3600.0
# A fired reminder stays in the stream this long past its TTL: a node that was down
# through the TTL still finds it, and reports it missed.
DUE_KEPT_S = 7 * 24 * 3600.0
# How far ahead a reminder may be set.
MAX_AHEAD = timedelta(days=366)
MAX_TEXT = 300
ID_BYTES = 8


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _field(payload: Mapping[str, Any], key: str, kind: type) -> Any:
    value = payload.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ReminderError(f"reminder field {key!r}: expected {kind.__name__}, got {value!r:.60}")
    return value


def _moment(payload: Mapping[str, Any], key: str) -> datetime:
    text = _field(payload, key, str)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ReminderError(f"reminder field {key!r}: not an ISO time: {text!r:.60}") from exc
    if moment.tzinfo is None:
        raise ReminderError(f"reminder field {key!r}: a time without a zone: {text!r:.60}")
    return moment


@dataclass(frozen=True)
class Reminder:
    """What to say (``text``; empty for a timer), to whom, when, and for how long after."""

    id: str
    agent: str
    device: str
    text: str
    due: datetime
    created: datetime
    ttl_s: float = DEFAULT_TTL_S
    binding_id: str | None = None

    @classmethod
    def new(
        cls,
        agent: str,
        device: str,
        text: str,
        due: datetime,
        *,
        now: datetime,
        ttl_s: float = DEFAULT_TTL_S,
        binding_id: str | None = None,
    ) -> Reminder:
        """A reminder with a fresh id; one in the past or past :data:`MAX_AHEAD` is refused."""
        if due.tzinfo is None:
            raise ReminderError("a reminder's time must carry its zone")
        if due <= now:
            raise NoTimeSaid(f"{_rfc3339(due)} has already passed")
        if due - now > MAX_AHEAD:
            raise NoTimeSaid(f"{_rfc3339(due)} is more than {MAX_AHEAD.days} days ahead")
        return cls(
            id=secrets.token_hex(ID_BYTES),
            agent=check_name(agent, "agent"),
            device=check_name(device, "device"),
            text=" ".join(text.split())[:MAX_TEXT],
            due=due.astimezone(UTC),
            created=now.astimezone(UTC),
            ttl_s=ttl_s,
            binding_id=binding_id,
        )

    @property
    def timer(self) -> bool:
        """A timer: nothing to say but that the time is up."""
        return not self.text

    def spoken(self) -> str:
        """What is said at the time."""
        return "Your timer is done." if self.timer else f"Reminder: {self.text}."

    def expires(self) -> datetime:
        """After this, it is missed rather than said."""
        return self.due + timedelta(seconds=self.ttl_s)

    def to_payload(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "id": self.id,
            "agent": self.agent,
            "device": self.device,
            "text": self.text,
            "due": self.due.isoformat(),
            "created": self.created.isoformat(),
            "ttl_s": self.ttl_s,
            "binding_id": self.binding_id,
        }

    @classmethod
    def from_payload(cls, payload: object) -> Reminder:
        """Parse a stored reminder; :class:`ReminderError` names the field at fault."""
        if not isinstance(payload, Mapping):
            raise ReminderError(f"a reminder must be an object, got {type(payload).__name__}")
        ident = _field(payload, "id", str)
        if not ident or len(ident) > 64 or not ident.isalnum():
            raise ReminderError(f"reminder field 'id': not a reminder id: {ident!r:.60}")
        binding_id = payload.get("binding_id")
        if binding_id is not None and not isinstance(binding_id, str):
            raise ReminderError(
                f"reminder field 'binding_id': expected str, got {binding_id!r:.60}"
            )
        ttl = payload.get("ttl_s")
        if not isinstance(ttl, int | float) or isinstance(ttl, bool) or not 0 < ttl < 1e9:
            raise ReminderError(f"reminder field 'ttl_s': expected seconds, got {ttl!r:.60}")
        try:
            agent = check_name(_field(payload, "agent", str), "agent")
            device = check_name(_field(payload, "device", str), "device")
        except SubjectError as exc:
            raise ReminderError(f"reminder: {exc}") from exc
        text = _field(payload, "text", str)
        if len(text) > MAX_TEXT:
            raise ReminderError(f"reminder field 'text': longer than {MAX_TEXT} characters")
        return cls(
            id=ident,
            agent=agent,
            device=device,
            text=text,
            due=_moment(payload, "due"),
            created=_moment(payload, "created"),
            ttl_s=float(ttl),
            binding_id=binding_id,
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Reminder:
        """Parse a stored message's body."""
        try:
            payload = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ReminderError(f"a reminder message is not JSON: {exc}") from exc
        return cls.from_payload(payload)


class ReminderBook:
    """One agent's reminders: schedule, list what waits, cancel."""

    def __init__(self, nc: NatsClient, agent: str) -> None:
        self.nc = nc
        self.agent = check_name(agent, "agent")
        self.stream = reminders_stream(agent)

    async def schedule(self, reminder: Reminder) -> None:
        """Store ``reminder`` as a one-shot schedule; nats-server fires it at its time."""
        if reminder.agent != self.agent:
            raise ReminderError(f"{reminder.id} is {reminder.agent}'s, not {self.agent}'s")
        kept = int(reminder.ttl_s + DUE_KEPT_S)
        headers = {
            "Nats-Schedule": f"@at {_rfc3339(reminder.due)}",
            "Nats-Schedule-Target": reminder_due_subject(self.agent, reminder.id),
            "Nats-Schedule-TTL": f"{kept}s",
            "Nats-Msg-Id": f"reminder-{reminder.id}",
        }
        body = json.dumps(reminder.to_payload()).encode()
        await self.nc.jetstream().publish(
            reminder_schedule_subject(self.agent, reminder.id),
            body,
            stream=self.stream,
            headers=headers,
        )

    async def pending(self) -> list[Reminder]:
        """What waits for its time, soonest first (an unreadable message left out: see
        :meth:`read_pending`)."""
        reminders, _ = await self.read_pending()
        return reminders

    async def read_pending(self) -> tuple[list[Reminder], list[str]]:
        """What waits for its time, soonest first, and why any message could not be read."""
        js = self.nc.jetstream()
        info = await js.stream_info(
            self.stream, subjects_filter=reminder_schedule_subject(self.agent)
        )
        found: list[Reminder] = []
        unreadable: list[str] = []
        for subject in sorted(info.state.subjects or {}):
            try:
                raw = await js.get_last_msg(self.stream, subject)
            except NotFoundError:  # fired or cancelled since the listing
                continue
            if not raw.data:  # a cancel marker, about to expire
                continue
            try:
                found.append(Reminder.from_bytes(raw.data))
            except ReminderError as exc:
                unreadable.append(f"{subject}: {exc}")
        found.sort(key=lambda r: r.due)
        return found, unreadable

    async def cancel(self, id_prefix: str) -> list[Reminder]:
        """Cancel the pending reminders whose id starts with ``id_prefix`` (``""``: all);
        the ones cancelled."""
        chosen = [r for r in await self.pending() if r.id.startswith(id_prefix)]
        js = self.nc.jetstream()
        for reminder in chosen:
            await js.publish(
                reminder_schedule_subject(self.agent, reminder.id),
                b"",
                stream=self.stream,
                headers={"Nats-Rollup": "sub", "Nats-TTL": "1s"},
            )
        return chosen


@dataclass(frozen=True)
class Fired:
    """A reminder whose time came, as its node received it (``reminder`` None: unreadable,
    ``error`` says why)."""

    msg: Msg
    reminder: Reminder | None
    error: str | None = None

    @classmethod
    def read(cls, msg: Msg) -> Fired:
        """The fired reminder in ``msg``."""
        try:
            return cls(msg, Reminder.from_bytes(msg.data))
        except ReminderError as exc:
            return cls(msg, None, f"{msg.subject}: {exc}")

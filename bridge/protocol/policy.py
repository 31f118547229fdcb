"""What one half lets across, in each direction. Pure: no I/O.

Each side enforces its own half (never the peer's promises): a subject must be
declared (exports when sending, imports when receiving), the event must be a
valid text-only envelope within this half's limits, must not already carry this
side's hop (a loop), and must not name another device than the one this link
belongs to (on home: the device the SSH key proved).
"""

from __future__ import annotations

from bridge.errors import Refused
from shared.errors import EnvelopeError, EnvelopeTooLarge, NotTextOnly, SubjectError
from shared.event import EnvelopeLimits, Event
from shared.schema.bridge_half import BridgeHalf
from shared.subjects import check_publish_subject, device_of, matches

# Refusal reasons, which are also the counter keys (``refused.<reason>``).
NOT_DECLARED = "not_declared"
NOT_TEXT = "not_text"
OVERSIZE = "oversize"
MALFORMED = "malformed"
LOOP = "loop"
FOREIGN_DEVICE = "foreign_device"
# Verdicts on subjects are cached: a link carries few distinct subjects, many times over.
_SUBJECT_CACHE = 4096
_PASS = ("", "")

REASONS = (NOT_DECLARED, NOT_TEXT, OVERSIZE, MALFORMED, LOOP, FOREIGN_DEVICE, "outbox_full")


def hop_name(half: BridgeHalf) -> str:
    """This side's entry in ``hops``: ``bridge:<name>@<side>``."""
    return f"bridge:{half.bridge}@{half.side}"


class HalfPolicy:
    """Enforces one half; ``device`` is the device this link speaks for."""

    def __init__(self, half: BridgeHalf, device: str | None = None) -> None:
        self.half = half
        self.device = device or half.device
        self.hop = hop_name(half)
        self._subjects: dict[tuple[str, str], tuple[str, str]] = {}
        self.limits = EnvelopeLimits(
            max_event_bytes=half.limits.max_event_bytes,
            max_string_bytes=half.limits.max_string_bytes,
        )

    def outgoing(self, subject: str, data: bytes) -> Event:
        """Check an event about to be sent; return it with this side's hop appended."""
        return self._check(subject, data, self.half.export_patterns, "exports")

    def incoming(self, subject: str, data: bytes) -> Event:
        """Check an event that arrived from the peer; return it with this side's hop appended."""
        return self._check(subject, data, self.half.import_patterns, "imports")

    def _check(self, subject: str, data: bytes, declared: tuple[str, ...], what: str) -> Event:
        key = (what, subject)
        verdict = self._subjects.get(key)
        if verdict is None:
            verdict = self._subject_verdict(subject, declared, what)
            if len(self._subjects) >= _SUBJECT_CACHE:
                self._subjects.clear()
            self._subjects[key] = verdict
        if verdict is not _PASS:
            raise Refused(*verdict)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: the message is not UTF-8 text: {exc}") from exc
        try:
            event = Event.from_json(data, self.limits)
        except EnvelopeTooLarge as exc:
            raise Refused(OVERSIZE, f"{subject!r}: {exc}") from exc
        except NotTextOnly as exc:
            raise Refused(NOT_TEXT, f"{subject!r}: {exc}") from exc
        except EnvelopeError as exc:
            raise Refused(MALFORMED, f"{subject!r}: {exc}") from exc
        if self.hop in event.hops:
            raise Refused(
                LOOP, f"{subject!r}: event {event.event_id} already crossed as {self.hop}"
            )
        return event.with_hop(self.hop)

    def _subject_verdict(
        self, subject: str, declared: tuple[str, ...], what: str
    ) -> tuple[str, str]:
        try:
            check_publish_subject(subject)
        except SubjectError as exc:
            return (MALFORMED, str(exc))
        named = device_of(subject)
        if named is not None and named != self.device:
            return (
                FOREIGN_DEVICE,
                f"{subject!r} names device {named!r} but this link is device {self.device!r}",
            )
        if not any(matches(p, subject) for p in declared):
            return (NOT_DECLARED, f"{subject!r} is not in the {what} of {self.half.file}")
        return _PASS

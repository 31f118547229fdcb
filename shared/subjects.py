"""Subjects: a builder for every rail, parsing back, and NATS wildcard algebra.

The rails are tabled in docs/architecture.md "Subjects".

Pure functions, no I/O. ``*`` matches exactly one token; ``>`` matches one or
more trailing tokens and may only stand last. :func:`matches` answers whether a
subject is delivered to a subscription; :func:`covers` and :func:`overlaps`
compare two patterns as the sets of subjects they match, which is what the
bridge checker and the router need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.errors import SubjectError

# Device and agent names: one NATS token, lower case (docs/architecture.md "Subjects").
NAME_TOKEN = re.compile(r"[a-z0-9_-]+")
# Binding ids are minted as hex but accepted in any token-safe form.
BINDING_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
# What NATS itself forbids inside a token.
_FORBIDDEN_IN_TOKEN = re.compile(r"[\s.*>]")

VERBS = ("journal_append", "jmfts_write", "delegate")
DEVICE_RAILS = ("speak", "reply", "recall", "memorize")
# The operator's answer to a delegation: ``events.workspace.<operator>.out.answer.<asker>``.
ANSWER_RAIL = "answer"
# Report rails: past-tense accounts for monitors; nothing may bind them back into an agent.
REPORT_RAILS = ("recall", "memorize")
AUDIO_PATTERN = "events.audio.>"

# Every event: the event log records them all, a monitor watches them all.
EVENTS_PREFIX = "events."
EVENTS_PATTERN = "events.>"
# Where the agents' rails begin (``events.workspace.<agent>.in`` and ``.out.>``).
WORKSPACE_PREFIX = "events.workspace."
# The speech acks of every turn (each ends in its binding id).
SPEECH_COMPLETED_PREFIX = "events.action.speech.completed."
SPEECH_COMPLETED_PATTERN = "events.action.speech.completed.*"
# Every verb's ack, and the operator's acks of delegated tasks alone.
JOURNAL_ACKS_PATTERN = "events.journal.>"
DELEGATE_ACKS_PATTERN = "events.journal.delegate.*"
# τ's builtin speak, with no device token: the router resolves the device.
DEVICELESS_SPEAK_PATTERN = "events.workspace.*.out.speak"


def check_name(token: str, what: str = "name") -> str:
    """Return ``token`` if it is a valid device or agent name, else raise SubjectError."""
    if not isinstance(token, str) or not NAME_TOKEN.fullmatch(token):
        raise SubjectError(f"{what} must be one lowercase token [a-z0-9_-]+, got {token!r}")
    return token


def check_binding_id(binding_id: str) -> str:
    """Return ``binding_id`` if it can stand as one subject token, else raise SubjectError."""
    if not isinstance(binding_id, str) or not BINDING_TOKEN.fullmatch(binding_id):
        raise SubjectError(f"binding_id must be one token [A-Za-z0-9_-]+, got {binding_id!r}")
    return binding_id


# --- builders ------------------------------------------------------------------


def sensation_turn_subject(device: str) -> str:
    """``events.sensation.<device>.turn``: a finished utterance (or a typed line)."""
    return f"events.sensation.{check_name(device, 'device')}.turn"


def sensation_partial_subject(device: str) -> str:
    """``events.sensation.<device>.partial``: an in-flight transcript; stays on the board."""
    return f"events.sensation.{check_name(device, 'device')}.partial"


def workspace_in_subject(agent: str) -> str:
    """``events.workspace.<agent>.in``: where the router delivers a binding to an agent."""
    return f"events.workspace.{check_name(agent, 'agent')}.in"


def agent_out_prefix(agent: str) -> str:
    """``events.workspace.<agent>.out``: the root of everything an agent publishes."""
    return f"events.workspace.{check_name(agent, 'agent')}.out"


def speak_subject(agent: str, device: str) -> str:
    """``events.workspace.<agent>.out.speak.<device>``: text for the device's TTS."""
    return f"{agent_out_prefix(agent)}.speak.{check_name(device, 'device')}"


def deviceless_speak_subject(agent: str) -> str:
    """``events.workspace.<agent>.out.speak``: τ's builtin nats_bus speak, no device token."""
    return f"{agent_out_prefix(agent)}.speak"


def reply_subject(agent: str, device: str) -> str:
    """``events.workspace.<agent>.out.reply.<device>``: text not to be spoken, status lines."""
    return f"{agent_out_prefix(agent)}.reply.{check_name(device, 'device')}"


def recall_subject(agent: str, device: str) -> str:
    """``events.workspace.<agent>.out.recall.<device>``: the memory reflex's recall report."""
    return f"{agent_out_prefix(agent)}.recall.{check_name(device, 'device')}"


def memorize_subject(agent: str, device: str) -> str:
    """``events.workspace.<agent>.out.memorize.<device>``: the memory reflex's deposit report."""
    return f"{agent_out_prefix(agent)}.memorize.{check_name(device, 'device')}"


def verb_subject(agent: str, verb: str) -> str:
    """``events.workspace.<agent>.out.<verb>`` for ``journal_append``, ``jmfts_write``,
    ``delegate``."""
    if verb not in VERBS:
        raise SubjectError(f"unknown verb {verb!r}; known verbs: {', '.join(VERBS)}")
    return f"{agent_out_prefix(agent)}.{verb}"


def speak_pattern(device: str) -> str:
    """``events.workspace.*.out.speak.<device>``: every agent's speech for one device."""
    return f"events.workspace.*.out.speak.{check_name(device, 'device')}"


def verb_pattern(verb: str) -> str:
    """``events.workspace.*.out.<verb>``: one verb called by every agent."""
    if verb not in VERBS:
        raise SubjectError(f"unknown verb {verb!r}; known verbs: {', '.join(VERBS)}")
    return f"events.workspace.*.out.{verb}"


def rail_pattern(rail: str) -> str:
    """``events.workspace.*.out.<rail>.*``: one device rail (or the answer rail) of every
    agent, whatever device (or asker) the last token names."""
    if rail not in (*DEVICE_RAILS, ANSWER_RAIL):
        known = ", ".join((*DEVICE_RAILS, ANSWER_RAIL))
        raise SubjectError(f"unknown rail {rail!r}; known: {known}")
    return f"events.workspace.*.out.{rail}.*"


def device_rail_patterns(device: str) -> tuple[str, ...]:
    """Every device rail addressed to ``device`` (speak, reply, recall, memorize), any agent."""
    return tuple(device_rail_pattern(rail, device) for rail in DEVICE_RAILS)


def device_rail_pattern(rail: str, device: str) -> str:
    """``events.workspace.*.out.<rail>.<device>``: one device rail from every agent."""
    if rail not in DEVICE_RAILS:
        raise SubjectError(f"unknown device rail {rail!r}; known: {', '.join(DEVICE_RAILS)}")
    return f"events.workspace.*.out.{rail}.{check_name(device, 'device')}"


def bridge_status_subject(bridge: str) -> str:
    """``events.bridge.<bridge>.status``: a bridge half's link state, local to its own side.

    No half imports or exports it; each side's own nodes read it (the edge says
    aloud that home is unreachable).
    """
    return f"events.bridge.{check_name(bridge, 'bridge')}.status"


BRIDGE_STATUS_PATTERN = "events.bridge.*.status"


def edge_notice_subject(device: str) -> str:
    """``events.edge.<device>.notice``: the board spoke a local notice (home unreachable,
    or a turn home reported failed or aborted).

    Local to the board: no bridge half carries it; monitors and HIL read it there.
    """
    return f"events.edge.{check_name(device, 'device')}.notice"


def agent_inbox_durable(agent: str) -> str:
    """The JetStream consumer an agent reads its inbound rail through, shared by its lives."""
    return f"agent_{check_name(agent, 'agent')}_inbox"


# Reminders live outside events.> (the event log ages its messages out; a reminder may be
# a year ahead), one JetStream stream per agent (docs/architecture.md "Reminders").
REMINDERS_STREAM_PREFIX = "REMINDERS_"


def reminders_stream(agent: str) -> str:
    """``REMINDERS_<agent>``: the stream of one agent's reminders."""
    return f"{REMINDERS_STREAM_PREFIX}{check_name(agent, 'agent')}"


def reminder_schedule_subject(agent: str, reminder_id: str = "*") -> str:
    """``reminders.schedule.<agent>.<id>``: where a reminder waits for its time."""
    return f"reminders.schedule.{check_name(agent, 'agent')}.{reminder_id}"


def reminder_due_subject(agent: str, reminder_id: str = "*") -> str:
    """``reminders.due.<agent>.<id>``: where nats-server publishes it at its time."""
    return f"reminders.due.{check_name(agent, 'agent')}.{reminder_id}"


def reminders_durable(agent: str) -> str:
    """The JetStream consumer an agent's node reads its fired reminders through."""
    return f"agent_{check_name(agent, 'agent')}_reminders"


def private_inbox_prefix(user: str) -> str:
    """``_INBOX.<user>``: where a bus user's request replies and push deliveries arrive.

    A client that connects with it as its inbox prefix can be allowed to subscribe
    its own replies without seeing anyone else's.
    """
    return f"_INBOX.{user}"


def speech_completed_subject(binding_id: str) -> str:
    """``events.action.speech.completed.<binding_id>``: the TTS ack after playback."""
    return f"events.action.speech.completed.{check_binding_id(binding_id)}"


def journal_append_ack_subject(binding_id: str) -> str:
    """``events.journal.append.<binding_id>``: ``effector.journal_append``'s ack."""
    return f"events.journal.append.{check_binding_id(binding_id)}"


def jmfts_write_ack_subject(binding_id: str) -> str:
    """``events.journal.jmfts_write.<binding_id>``: ``effector.jmfts_write``'s ack."""
    return f"events.journal.jmfts_write.{check_binding_id(binding_id)}"


def delegate_ack_subject(binding_id: str) -> str:
    """``events.journal.delegate.<binding_id>``: the operator took a delegated task, or refused."""
    return f"events.journal.delegate.{check_binding_id(binding_id)}"


def delegate_answer_subject(operator: str, asker: str) -> str:
    """``events.workspace.<operator>.out.answer.<asker>``: a delegation's answer (or failure),
    which an activation schema binds back into the asking agent."""
    return f"{agent_out_prefix(operator)}.{ANSWER_RAIL}.{check_name(asker, 'agent')}"


# --- parsing back ------------------------------------------------------------


@dataclass(frozen=True)
class SubjectInfo:
    """What a concrete subject names. ``kind`` is one of :data:`SUBJECT_KINDS`."""

    kind: str
    agent: str | None = None
    device: str | None = None
    verb: str | None = None
    binding_id: str | None = None
    # The asking agent a delegation's answer goes back to (kind ``answer``).
    asker: str | None = None

    @property
    def is_report(self) -> bool:
        """True for the memory reflex's past-tense reports (recall, memorize)."""
        return self.kind in REPORT_RAILS


SUBJECT_KINDS = (
    "sensation.turn",
    "sensation.partial",
    "workspace.in",
    "speak",
    "reply",
    "recall",
    "memorize",
    "verb",
    "speech.completed",
    "journal.append",
    "journal.jmfts_write",
    "journal.delegate",
    "answer",
    "audio",
)


def parse_subject(subject: str) -> SubjectInfo:  # noqa: PLR0911  (one return a rail: the table)
    """Say which rail a concrete subject is and what it names.

    Raises :class:`SubjectError` for a malformed subject or one that names no
    rail of the contract.
    """
    tokens = split_subject(subject)
    if any(t in ("*", ">") for t in tokens):
        raise SubjectError(f"{subject!r} is a pattern, not a concrete subject")
    match tokens:
        case ["events", "sensation", device, "turn"]:
            return SubjectInfo("sensation.turn", device=check_name(device, "device"))
        case ["events", "sensation", device, "partial"]:
            return SubjectInfo("sensation.partial", device=check_name(device, "device"))
        case ["events", "workspace", agent, "in"]:
            return SubjectInfo("workspace.in", agent=check_name(agent, "agent"))
        case ["events", "workspace", agent, "out", "speak"]:
            return SubjectInfo("speak", agent=check_name(agent, "agent"))
        case ["events", "workspace", agent, "out", rail, device] if rail in DEVICE_RAILS:
            return SubjectInfo(
                rail, agent=check_name(agent, "agent"), device=check_name(device, "device")
            )
        case ["events", "workspace", agent, "out", "answer", asker]:
            return SubjectInfo(
                "answer", agent=check_name(agent, "agent"), asker=check_name(asker, "agent")
            )
        case ["events", "workspace", agent, "out", verb] if verb in VERBS:
            return SubjectInfo("verb", agent=check_name(agent, "agent"), verb=verb)
        case ["events", "action", "speech", "completed", bid]:
            return SubjectInfo("speech.completed", binding_id=check_binding_id(bid))
        case ["events", "journal", ("append" | "jmfts_write" | "delegate") as acked, bid]:
            return SubjectInfo(f"journal.{acked}", binding_id=check_binding_id(bid))
        case ["events", "audio", *_]:
            return SubjectInfo("audio")
    raise SubjectError(f"{subject!r} names no rail of the wire contract")


def device_of(subject_or_pattern: str) -> str | None:
    """The device token a subject (or pattern) names, if its rail carries one and it is literal.

    Works on patterns too: ``events.sensation.*.turn`` names no particular device (None).
    """
    tokens = split_subject(subject_or_pattern)
    match tokens:
        case ["events", "sensation", device, _]:
            pass
        case ["events", "workspace", _, "out", rail, device] if rail in DEVICE_RAILS:
            pass
        case _:
            return None
    return device if device not in ("*", ">") else None


# --- wildcard algebra --------------------------------------------------------


def split_subject(subject: str) -> list[str]:
    """Split and validate a subject or pattern into tokens (``>`` only last)."""
    if not isinstance(subject, str) or not subject:
        raise SubjectError(f"a subject must be a non-empty string, got {subject!r}")
    tokens = subject.split(".")
    for i, token in enumerate(tokens):
        if not token:
            raise SubjectError(f"{subject!r} has an empty token (position {i})")
        if token in ("*", ">"):
            if token == ">" and i != len(tokens) - 1:
                raise SubjectError(f"{subject!r}: '>' may only be the last token")
            continue
        if _FORBIDDEN_IN_TOKEN.search(token):
            raise SubjectError(
                f"{subject!r}: token {token!r} contains whitespace or a wildcard character"
            )
    return tokens


def is_pattern(subject: str) -> bool:
    """True if ``subject`` contains a wildcard token."""
    return any(t in ("*", ">") for t in split_subject(subject))


def check_publish_subject(subject: str) -> str:
    """Return ``subject`` if it is a concrete (publishable) subject, else raise."""
    if is_pattern(subject):
        raise SubjectError(f"{subject!r} contains a wildcard and cannot be published to")
    return subject


def matches(pattern: str, subject: str) -> bool:
    """True if a subscription on ``pattern`` receives a message published on ``subject``."""
    return covers(pattern, check_publish_subject(subject))


def covers(a: str, b: str) -> bool:
    """True if every subject that pattern ``b`` can match is also matched by pattern ``a``."""
    ta, tb = split_subject(a), split_subject(b)
    for i, tok_a in enumerate(ta):
        if tok_a == ">":
            # '>' needs at least one token; b's remainder has one (a '>' in b needs one too).
            return i < len(tb)
        if i >= len(tb):
            return False
        tok_b = tb[i]
        if tok_b == ">":
            return False  # b reaches arbitrarily deep; a is finite from here
        if tok_a == "*":
            continue
        if tok_b == "*" or tok_a != tok_b:
            return False
    return len(ta) == len(tb)


def overlaps(a: str, b: str) -> bool:
    """True if at least one concrete subject is matched by both patterns."""
    ta, tb = split_subject(a), split_subject(b)
    for i in range(max(len(ta), len(tb))):
        if i >= len(ta) or i >= len(tb):
            return False
        tok_a, tok_b = ta[i], tb[i]
        if tok_a == ">" or tok_b == ">":
            return True
        if tok_a == "*" or tok_b in ("*", tok_a):
            continue
        return False
    return True


def intersection(a: str, b: str) -> str | None:
    """The pattern matching exactly the subjects both ``a`` and ``b`` match, or None."""
    if not overlaps(a, b):
        return None
    ta, tb = split_subject(a), split_subject(b)
    out: list[str] = []
    for i in range(max(len(ta), len(tb))):
        tok_a, tok_b = ta[i], tb[i]
        if tok_a == ">":
            out.extend(tb[i:])
            break
        if tok_b == ">":
            out.extend(ta[i:])
            break
        out.append(tok_b if tok_a == "*" else tok_a)
    return ".".join(out)


def covered_by_any(pattern: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """True if one of ``patterns`` covers ``pattern`` on its own."""
    return any(covers(p, pattern) for p in patterns)


def is_audio_subject(subject: str) -> bool:
    """True if the pattern could carry audio: it overlaps ``events.audio.>`` or names sound."""
    if overlaps(AUDIO_PATTERN, subject):
        return True
    return any(t in ("audio", "pcm", "samples", "wav") for t in split_subject(subject))


class PatternIndex:
    """Patterns indexed by token, so one lookup visits only the patterns that can match.

    Comparing every pattern of one list with every pattern of another is quadratic;
    a token trie answers :meth:`overlapping` and :meth:`covering` by walking only the
    branches a query's literal tokens allow. Results are positions in the indexed
    sequence, in order.
    """

    def __init__(self, patterns: list[str] | tuple[str, ...]) -> None:
        self._root = _TrieNode()
        for position, pattern in enumerate(patterns):
            node = self._root
            for token in split_subject(pattern):
                if token == ">":
                    node.tails.append(position)
                    break
                node = node.children.setdefault(token, _TrieNode())
            else:
                node.ends.append(position)

    def overlapping(self, pattern: str) -> list[int]:
        """Positions of the indexed patterns that :func:`overlaps` ``pattern``."""
        found: list[int] = []
        self._root.collect_overlapping(split_subject(pattern), 0, found)
        return sorted(found)

    def covering(self, pattern: str) -> list[int]:
        """Positions of the indexed patterns that :func:`covers` ``pattern``."""
        found: list[int] = []
        self._root.collect_covering(split_subject(pattern), 0, found)
        return sorted(found)


class _TrieNode:
    """One token position: patterns ending here, patterns with ``>`` next, and children."""

    __slots__ = ("children", "ends", "tails")

    def __init__(self) -> None:
        self.children: dict[str, _TrieNode] = {}
        self.ends: list[int] = []
        self.tails: list[int] = []

    def collect_all(self, found: list[int]) -> None:
        found.extend(self.ends)
        found.extend(self.tails)
        for child in self.children.values():
            child.collect_all(found)

    def collect_overlapping(self, query: list[str], depth: int, found: list[int]) -> None:
        if depth == len(query):
            found.extend(self.ends)
            return
        found.extend(self.tails)  # an indexed '>' here takes any remaining tokens
        token = query[depth]
        if token == ">":
            for child in self.children.values():
                child.collect_all(found)
        elif token == "*":
            for child in self.children.values():
                child.collect_overlapping(query, depth + 1, found)
        else:
            for key in (token, "*"):
                if (branch := self.children.get(key)) is not None:
                    branch.collect_overlapping(query, depth + 1, found)

    def collect_covering(self, query: list[str], depth: int, found: list[int]) -> None:
        if depth == len(query):
            found.extend(self.ends)
            return
        found.extend(self.tails)
        token = query[depth]
        if token == ">":
            return  # only an indexed '>' at this depth reaches arbitrarily deep
        for key in (token, "*") if token != "*" else ("*",):
            if (branch := self.children.get(key)) is not None:
                branch.collect_covering(query, depth + 1, found)

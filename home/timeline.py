"""``home timeline``: what happened, in one dated list (docs/architecture.md "Timeline").

One question ("what did it learn from the kitchen board yesterday, and what was said
around it?") used to take ``home trace``, ``home sessions show`` and ``home memory show``
joined by hand. The timeline gathers it from where each part already records it:

- the event log (JetStream): each **turn** a device sent, each **answer** an agent gave
  (spoken or on the reply rail), and what the memory reflex **kept**, **corrected** or
  **revised** off a turn (its memorize reports), with each memory's kind, and what the
  knowledge book then **believed** (the triple opened, and the one it closed);
- the memory server (JMFTS): each memory **forgotten** (by voice or by hand: its
  retraction, dated, with the turn that asked when there was one) and **restored**, and
  each the curator **merged** into another that says the same or **resolved** (a later
  belief with its head contradicts it: its retraction, with the turn whose memorize
  report woke it);
- each agent's review book: each memory that **faded**, dated when its FSRS
  retrievability fell to the review threshold (it sinks in rank from then on; decay
  never hides it, :mod:`home.memory.due`).

The lines are merged by time, and each carries the time since the line before. The
gathering is pure (:func:`log_lines`, :func:`memory_lines`, :func:`faded_lines`,
:func:`assemble`); the command reads the sources and prints.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from home.jmfts.client import SyncJmftsClient
from home.jmfts.errors import JmftsError, NotFound
from home.jmfts.locate import locate_memory_server
from home.jmfts.models import RETRACTION_USETYPE
from home.memory.config import DEFAULT_INITIAL_STABILITY_DAYS, LEDGER_DIRNAME
from home.memory.curator import CONTRADICTED_BY, MERGED_INTO
from home.memory.due import RETENTION, days_until, written_memories
from home.memory.fsrs import ReviewBook
from home.memory.provenance import Provenance
from home.substrate.cli.common import AsJson, console, err, run_client
from home.substrate.client import HomeClient
from home.substrate.config import EventLogConfig
from home.substrate.eventlog import LoggedEvent, read_log
from home.substrate.options import DataDir
from shared.errors import EnvelopeError, HomeNotRunning, SubjectError
from shared.event import Event
from shared.messages.memory import MemorizeReport
from shared.subjects import SubjectInfo, parse_subject

#: What a memorize report's deposit action reads as on the timeline (``reinforced`` and
#: ``unchanged`` wrote nothing new and are left out, as ``home trace`` leaves them).
DEPOSIT_KINDS = {"created": "kept", "corrected": "corrected", "superseded": "revised"}
TEXT_CHARS = 200


@dataclass(frozen=True)
class Line:
    """One thing that happened: when, what, on which device and agent, in which words.

    ``ref`` is the turn's binding id for turns and answers, ``#ID`` for a memory."""

    at: datetime
    kind: str
    text: str
    device: str | None = None
    agent: str | None = None
    ref: str | None = None
    binding_id: str | None = None

    def to_dict(self, gap_s: float | None) -> dict[str, Any]:
        """JSON-ready, with the seconds since the line before (None for the first)."""
        return {
            "at": self.at.isoformat(),
            "gap_s": None if gap_s is None else round(gap_s, 3),
            "kind": self.kind,
            "device": self.device,
            "agent": self.agent,
            "ref": self.ref,
            "binding_id": self.binding_id,
            "text": self.text,
        }


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def log_lines(log: Iterable[LoggedEvent]) -> list[Line]:
    """The timeline lines recorded events make: turns, answers, and the memories memorize
    reports name; none for every other event (nor for one that does not parse).

    A device's turn is usually recorded before the router has bound it: its routed copy
    (``events.workspace.<agent>.in``, the same event id) names the binding and the agent,
    and completes the turn's line."""
    lines: list[Line] = []
    turns: dict[str, int] = {}  # event id -> index of its turn line
    for logged in log:
        event = logged.event
        try:
            rail = parse_subject(logged.subject) if event is not None else None
        except SubjectError:
            rail = None
        if event is None or rail is None:
            continue
        if rail.kind == "workspace.in" and event.event_id in turns:
            i = turns[event.event_id]
            if lines[i].binding_id is None:
                binding = event.binding_id
                lines[i] = replace(lines[i], agent=rail.agent, ref=binding, binding_id=binding)
            continue
        made = _event_lines(logged, event, rail)
        if rail.kind == "sensation.turn":
            turns[event.event_id] = len(lines)
        lines += made
    return lines


def _event_lines(logged: LoggedEvent, event: Event, rail: SubjectInfo) -> list[Line]:
    text = event.payload.get("text")
    words = _clip(text) if isinstance(text, str) else ""
    at, binding = logged.time, event.binding_id
    if rail.kind == "sensation.turn":
        return [Line(at, "turn", words, rail.device, None, binding, binding)]
    if rail.kind in ("speak", "reply") and words:
        device = rail.device or event.payload.get("device")
        device = device if isinstance(device, str) else None
        return [Line(at, "answer", words, device, rail.agent, binding, binding)]
    if rail.kind == "memorize" and MemorizeReport.is_type(event.event_type):
        try:
            memories = MemorizeReport.from_event(event).memories()
        except EnvelopeError:
            return []
        lines = []
        for m in memories:
            said = f"{m.fact} ({m.kind})" if m.kind else m.fact
            kind = DEPOSIT_KINDS.get(m.action, m.action)
            lines.append(Line(at, kind, _clip(said), rail.device, rail.agent, f"#{m.id}", binding))
            if m.knowledge and not m.knowledge.startswith("unrecorded"):
                # What the knowledge book now believes, and what belief it closed.
                lines.append(Line(at, "believed", _clip(m.knowledge), rail.device, rail.agent,
                                  f"#{m.id}", binding))  # fmt: skip
        return lines
    return []


def memory_lines(
    agent: str, documents: Iterable[Mapping[str, Any]], devices: Mapping[str, str]
) -> list[Line]:
    """The memories of ``agent`` forgotten and restored, from the documents of its memory
    root (a subtree): a retraction is dated when it was written and names the memory it
    supersedes; a record that supersedes a retraction restored that memory. ``devices``
    (binding id → device, from the turns) says on which device a forget by voice was said.
    """
    docs = {int(d["id"]): d for d in documents}
    lines = []
    for doc in docs.values():
        target = doc.get("supersedes")
        if target is None or int(target) not in docs:
            continue
        at = _moment(doc.get("created_at"))
        if at is None:
            continue
        superseded = docs[int(target)]
        origin = Provenance.from_structured(doc.get("structured_content"))
        binding = origin.binding_id if origin is not None else None
        device = devices.get(binding) if binding else None
        if doc.get("usetype") == RETRACTION_USETYPE:
            words = str(superseded.get("content") or "")
            reason = str(doc.get("content") or "")
            # The curator's merge of a memory said twice, its resolution of a belief a
            # later one contradicts, or a forget (by voice, by hand).
            kind = (
                "merged"
                if reason.startswith(MERGED_INTO)
                else "resolved"
                if reason.startswith(CONTRADICTED_BY)
                else "forgotten"
            )
            lines.append(Line(at, kind, _clip(f"{words} ({reason})"), device, agent,
                              f"#{target}", binding))  # fmt: skip
        elif superseded.get("usetype") == RETRACTION_USETYPE:
            # It carries the restored memory's own provenance, not the restoring's.
            lines.append(Line(at, "restored", _clip(str(doc.get("content") or "")), None,
                              agent, f"#{doc['id']}"))  # fmt: skip
    return lines


def faded_lines(
    agent: str,
    memories: Iterable[tuple[int, str, datetime]],
    book: ReviewBook,
    now: datetime,
) -> list[Line]:
    """When each current memory of ``agent`` fell due for review (its retrievability fell to
    :data:`~home.memory.due.RETENTION` since its last review), if that is not after ``now``."""
    lines = []
    for doc_id, content, written_at in memories:
        state = book.state(doc_id, written_at)
        due = datetime.fromisoformat(state.last_review) + timedelta(
            days=days_until(RETENTION, state.stability_days)
        )
        if due <= now:
            lines.append(Line(due, "faded", _clip(content), None, agent, f"#{doc_id}"))
    return lines


def assemble(
    lines: Iterable[Line],
    *,
    device: str | None = None,
    agent: str | None = None,
    since: datetime | None = None,
) -> list[Line]:
    """Every line in time order, filtered.

    A turn names no agent: with ``agent`` it is kept when that agent answered it or kept
    something from it. A line naming no device (a faded memory, a forget by hand) takes
    the device of its turn when it has one; with ``device`` the others are left out."""
    everything = list(lines)
    turn_device = {ln.binding_id: ln.device for ln in everything if ln.kind == "turn"}
    agents_of: dict[str | None, set[str]] = {}
    for ln in everything:
        if ln.agent is not None:
            agents_of.setdefault(ln.binding_id, set()).add(ln.agent)
    chosen = []
    for line in everything:
        ln = line
        if ln.device is None and ln.binding_id in turn_device:
            ln = replace(ln, device=turn_device[ln.binding_id])
        if since is not None and ln.at < since:
            continue
        if device is not None and ln.device != device:
            continue
        if agent is not None:
            agents = {ln.agent} if ln.agent else agents_of.get(ln.binding_id, set())
            if agent not in agents:
                continue
        chosen.append(ln)
    return sorted(chosen, key=lambda ln: ln.at)


def gaps(lines: Sequence[Line]) -> list[float | None]:
    """Seconds from each line to the one before it (None for the first)."""
    return [None if i == 0 else (ln.at - lines[i - 1].at).total_seconds()
            for i, ln in enumerate(lines)]  # fmt: skip


_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def since_moment(text: str, now: datetime) -> datetime:
    """``--since``: a span back from ``now`` (``90s``, ``30m``, ``12h``, ``7d``, ``2w``) or an
    ISO-8601 moment (naive: UTC); ValueError naming what is accepted otherwise."""
    span = _SPAN.match(text.lower())
    if span:
        return now - timedelta(seconds=float(span[1]) * _UNIT_S[span[2]])
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a span (90s, 30m, 12h, 7d, 2w) nor an ISO-8601 time"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def human_gap(seconds: float | None) -> str:
    """``+3 s``, ``+4 min``, ``+2 h``, ``+5 d``: the time since the line before."""
    if seconds is None:
        return ""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"+{seconds / size:.0f} {unit}"
    return f"+{seconds:.1f} s" if seconds < 10 else f"+{seconds:.0f} s"


def _moment(stamp: object) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    moment = datetime.fromisoformat(stamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# --- reading the sources ----------------------------------------------------------------


def _agents(data_dir: Path, agent: str | None) -> list[str]:
    """The agents to read memories of: the one named, else each with a state directory."""
    if agent is not None:
        return [agent]
    root = data_dir / "agents"
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def _memory_side(
    client: SyncJmftsClient, data_dir: Path, agent: str, devices: Mapping[str, str], now: datetime
) -> list[Line]:
    """What the memory server and the review book say of ``agent``'s memories."""
    try:
        root = client.resolve(f"workspace/{agent}")
    except NotFound:
        return []
    tree = client.subtree(root.id)
    documents = [tree["root"], *tree["descendants"]]
    lines = memory_lines(agent, documents, devices)
    book_file = data_dir / "agents" / agent / LEDGER_DIRNAME / "reviews.json"
    if book_file.exists():  # a root without decay keeps no review book
        book = ReviewBook(book_file, DEFAULT_INITIAL_STABILITY_DAYS)
        current = written_memories(client.request("GET", f"/workspace/{root.id}")["current"])
        lines += faded_lines(agent, current, book, now)
    return lines


def timeline(
    data_dir: DataDir,
    device: Annotated[str | None, typer.Option(help="Only what happened on this device.")] = None,
    agent: Annotated[
        str | None, typer.Option(help="Only this agent's answers, memories and turns.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="From this long ago (90s, 30m, 12h, 7d, 2w) or an ISO-8601 time."),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """What happened, in one dated list: turns, answers, memories kept, corrected, faded,
    forgotten and restored, each with the time since the line before.

    Turns, answers and kept memories come from the event log (as old as it keeps),
    forgotten and restored ones from the memory server, faded ones from each agent's
    review book.

    Examples:

        home timeline --device kitchen --since 1d
        home timeline --agent edge_asr_memory --json
    """
    now = datetime.now(UTC)
    try:
        start = since_moment(since, now) if since is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None

    async def read(home: HomeClient) -> list[Line]:
        return log_lines([e async for e in read_log(home.nc, EventLogConfig().stream, since=start)])

    lines = run_client(data_dir, read)
    devices = {ln.binding_id: ln.device for ln in lines if ln.kind == "turn" and ln.binding_id
               and ln.device}  # fmt: skip
    try:
        server = locate_memory_server(data_dir, None, None)
        with SyncJmftsClient.from_token_file(server.url, server.token_file) as client:
            for name in _agents(data_dir, agent):
                lines += _memory_side(client, data_dir, name, devices, now)
    except (HomeNotRunning, JmftsError) as exc:
        err.print(f"memories left out: the memory server cannot be read ({exc})")
    shown = assemble(lines, device=device, agent=agent, since=start)
    between = gaps(shown)
    if as_json:
        print(json.dumps([ln.to_dict(g) for ln, g in zip(shown, between, strict=True)],
                         ensure_ascii=False))  # fmt: skip
        return
    table = Table(title=f"timeline: {len(shown)} lines")
    for column in ("when", "gap", "device", "agent", "what", "words", "ref"):
        table.add_column(column, overflow="fold")
    for ln, gap in zip(shown, between, strict=True):
        table.add_row(
            ln.at.astimezone().strftime("%Y-%m-%d %H:%M:%S"), human_gap(gap), ln.device or "",
            ln.agent or "", ln.kind, escape(ln.text), ln.ref or "",
        )  # fmt: skip
    console.print(table)

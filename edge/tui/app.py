"""The Textual app of ``edge tui``: a conversation, a raw event view and a status bar.

Keys: Enter sends the typed line, Ctrl-C quits, Ctrl-R (or F2) shows or hides the
raw event view, F3 shows the device's earlier conversation with the active agent
(asked of the agent on home's NATS, so with ``--direct``). The app owns its
:class:`~edge.tui.session.EdgeSession`: it connects on mount (so every NATS task
runs inside the app) and closes it on unmount. Rendering is a pure function of
:class:`~edge.tui.conversation.Conversation` and :class:`~edge.tui.conversation.StatusLine`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Input, RichLog, Static

from edge.errors import NotTaken
from edge.tui.conversation import Conversation, StatusLine, TurnRecord
from edge.tui.errors import TuiError
from edge.tui.link import LinkStatus
from edge.tui.session import Direction, EdgeSession, SessionObserver
from edge.tui.wire import AgentReply, Incoming
from edge.wire import SpeakRequest
from shared.messages.history import HistoryReply

# The raw view keeps the last events only; a long session must not grow without bound.
RAW_LINES = 2000


def render_turn(turn: TurnRecord) -> Text:
    """One turn as it appears in the conversation: the line, the answers, quiet notes."""
    out = Text()
    if turn.text is not None:
        out.append("you ", style="bold cyan")
        out.append(turn.text)
    else:
        out.append("(unprompted)", style="dim")
    if turn.not_taken is not None:
        out.append(f"\n    not sent: {turn.not_taken}", style="bold red")
    elif turn.sent_while_down and not turn.answers:
        out.append("\n    home is unreachable: queued until the link returns", style="dim red")
    for answer in turn.answers:
        out.append("\n")
        if isinstance(answer, SpeakRequest):
            out.append(f"{answer.agent} ", style="bold green")
            out.append(answer.text)
        else:
            out.append(f"{answer.agent} ", style="bold yellow")
            out.append(answer.text, style="italic")
            out.append(f"  {reply_tag(answer)}", style="yellow")
    for note in turn.notes:
        out.append(f"\n    · {note.summary}", style="dim")
    if turn.latency_s is not None:
        out.append(f"\n    {turn.latency_s * 1000:.0f} ms to first answer", style="dim")
    return out


def render_history(reply: HistoryReply) -> Text:
    """A device's earlier conversation with an agent, quieter than this session's turns."""
    out = Text()
    if reply.error is not None:
        out.append(f"{reply.agent}: {reply.error}", style="dim")
        return out
    out.append(
        f"earlier with {reply.agent} ({len(reply.turns)} turns, {reply.session_id})", style="dim"
    )
    for turn in reply.turns:
        out.append(f"\n{turn.at[:19]}  you ", style="dim cyan")
        out.append(turn.said, style="dim")
        for line in turn.answer:
            out.append(f"\n    {reply.agent} ", style="dim green")
            out.append(line, style="dim")
    return out


def reply_tag(reply: AgentReply) -> str:
    """How a reply-rail line is marked: not spoken, and why."""
    if reply.spoken:
        return "[reply]"
    return f"[not spoken: {reply.reason}]" if reply.reason else "[not spoken]"


# Raw lines are cut at the screen's edge: the keys a person looks for come first.
_RAW_KEY_ORDER = ("event_type", "binding_id", "payload", "source")


def raw_body(data: bytes) -> str:
    """An event as one line of JSON, every key kept, the telling ones first."""
    try:
        event = json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")
    if isinstance(event, dict):
        first = {k: event[k] for k in _RAW_KEY_ORDER if k in event}
        event = first | {k: v for k, v in event.items() if k not in first}
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


class StatusBar(Static):
    """The status bar, redrawn on every change and once a second by a timer of its own:
    the timer dies with the bar, so a tick never looks for a bar already torn down
    while the app shuts down."""

    def __init__(self, state: Callable[[], tuple[str, bool]], *, id: str) -> None:
        super().__init__(id=id)
        self._state = state

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(1.0, self.redraw)

    def redraw(self) -> None:
        """Show the current state (nothing before the bar is mounted or after it is gone)."""
        if not self.is_attached:
            return
        text, down = self._state()
        self.update(text)
        self.set_class(down, "down")


class TurnView(Static):
    """One turn of the conversation, redrawn whenever its record changes."""

    def __init__(self, turn: TurnRecord) -> None:
        super().__init__(render_turn(turn), classes="turn")
        self.turn = turn

    def redraw(self) -> None:
        """Render the record again."""
        self.update(render_turn(self.turn))


class TetherTui(App[None]):
    """The keyboard and screen standing in for the board's microphone and speaker."""

    TITLE = "tether"
    CSS = """
    #conversation { height: 1fr; padding: 0 1; }
    .turn { margin: 0 0 1 0; }
    #raw { height: 12; border-top: solid $accent; display: none; }
    #raw.shown { display: block; }
    #status { height: auto; max-height: 3; background: $boost; color: $text; padding: 0 1; }
    #status.down { background: $error; }
    #prompt { dock: bottom; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "quit", "Quit", priority=True),
        Binding("ctrl+r", "toggle_raw", "Raw events", priority=True),
        Binding("f2", "toggle_raw", "Raw events", show=False, priority=True),
        Binding("f3", "history", "History", priority=True),
    ]

    def __init__(self, session: EdgeSession, *, transport: str) -> None:
        super().__init__()
        self.session = session
        self.conversation = Conversation()
        self.status = StatusLine(device=session.device, transport=transport)
        self.raw_lines = 0
        self.notices: list[str] = []
        self._views: dict[int, TurnView] = {}
        self._entered = False
        self._bar = StatusBar(self._status_state, id="status")

    def compose(self) -> ComposeResult:
        """Conversation, raw view (hidden), status bar, prompt."""
        yield VerticalScroll(id="conversation")
        yield RichLog(id="raw", max_lines=RAW_LINES, wrap=False, markup=False)
        yield self._bar
        yield Input(
            placeholder=f"say something as {self.session.device!r}; Enter sends", id="prompt"
        )

    async def on_mount(self) -> None:
        """Connect and subscribe inside the app, so NATS callbacks run in its context."""
        try:
            await self.session.__aenter__()
            self._entered = True
            await self.session.listen(_ScreenObserver(self))
        except TuiError as exc:
            self.exit(return_code=1, message=str(exc))
            return
        self.status.nats_connected = self.session.connected
        self.refresh_status()
        self.query_one("#prompt", Input).focus()

    async def on_unmount(self) -> None:
        """Close the session the app opened."""
        if self._entered:
            self._entered = False
            await self.session.close()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: publish the typed line as a turn and show it."""
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        not_taken: NotTaken | None = None
        try:
            binding_id = (await self.session.send_turn(text)).binding_id
        except NotTaken as exc:
            not_taken, binding_id = exc, exc.binding_id or ""
        except TuiError as exc:
            self.notify(str(exc), severity="error")
            return
        record = self.conversation.start_turn(
            binding_id, text, time.monotonic(), link_up=self.status.link_up
        )
        if not_taken is not None:
            record.not_taken = f"{not_taken.reason} ({not_taken.verdict})"
        await self._show(record)
        self.refresh_status()

    def action_toggle_raw(self) -> None:
        """Show or hide the raw event view."""
        self.query_one("#raw", RichLog).toggle_class("shown")

    async def action_history(self) -> None:
        """Show the device's conversation with the active agent, above this session's turns."""
        agent = self.conversation.active_agent
        if agent is None:
            self.warn("no agent has answered yet: say something first")
            return
        try:
            reply = await self.session.history(agent)
        except TuiError as exc:
            self.warn(str(exc))
            return
        history = Static(render_history(reply), classes="turn history")
        await self.query_one("#conversation", VerticalScroll).mount(history, before=0)
        history.scroll_visible(animate=False)

    def warn(self, text: str) -> None:
        """A warning toast, also kept in :attr:`notices` (what was said, in order)."""
        self.notices.append(text)
        self.notify(text, severity="warning")

    @property
    def raw_shown(self) -> bool:
        """True while the raw event view is visible."""
        return self.query_one("#raw", RichLog).has_class("shown")

    def refresh_status(self) -> None:
        """Redraw the status bar from the current state (nothing once it is gone)."""
        self._bar.redraw()

    def _status_state(self) -> tuple[str, bool]:
        self.status.queued_local = self.session.queued_while_down
        return self.status.render(self.conversation), not self.status.link_up

    @property
    def status_text(self) -> str:
        """The status bar as plain text (what a person reads)."""
        return self.status.render(self.conversation)

    def conversation_text(self) -> str:
        """The whole conversation as plain text, turn by turn."""
        return "\n\n".join(render_turn(t).plain for t in self.conversation.turns)

    # --- called by the observer -----------------------------------------------------

    async def receive(self, item: Incoming) -> None:
        """File an incoming answer or note under its turn and draw it."""
        record = self.conversation.receive(item, time.monotonic())
        await self._show(record)
        self.refresh_status()

    def raw(self, direction: Direction, subject: str, data: bytes) -> None:
        """Append one event to the raw view."""
        arrow = "→" if direction == "out" else "←"
        self.query_one("#raw", RichLog).write(Text(f"{arrow} {subject} {raw_body(data)}"))
        self.raw_lines += 1

    async def _show(self, record: TurnRecord) -> None:
        view = self._views.get(id(record))
        if view is None:
            view = TurnView(record)
            self._views[id(record)] = view
            await self.query_one("#conversation", VerticalScroll).mount(view)
        else:
            view.redraw()
        view.scroll_visible(animate=False)


class _ScreenObserver(SessionObserver):
    """Routes what the session sees to the app (kept apart from Textual's own handlers)."""

    def __init__(self, app: TetherTui) -> None:
        self.app = app

    async def on_incoming(self, item: Incoming) -> None:
        await self.app.receive(item)

    def on_link(self, status: LinkStatus) -> None:
        self.app.status.bridge = status
        self.app.refresh_status()

    def on_connection(self, connected: bool) -> None:
        self.app.status.nats_connected = connected
        self.app.refresh_status()

    def on_rtt(self, rtt_ms: float) -> None:
        self.app.status.nats_rtt_ms = rtt_ms

    def on_raw(self, direction: Direction, subject: str, data: bytes) -> None:
        with contextlib.suppress(Exception):  # before mount or after unmount there is no view
            self.app.raw(direction, subject, data)

    def on_refused(self, subject: str, reason: str) -> None:
        self.app.raw("in", subject, f"refused: {reason}".encode())

    def on_not_taken(self, failure: NotTaken) -> None:
        self.app.warn(f"home was not told the answer was shown: {failure.reason}")

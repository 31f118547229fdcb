"""The agent node's conversation book: each turn in its device's conversation
(docs/architecture.md "Sessions").

Before a turn, :meth:`ConversationBook.enter` puts τ on the device's conversation
(:class:`~home.agents.conversations.Conversations`) and logs the prompt against it
in the :class:`~home.agents.sessions.SessionBook` (:func:`turn_record`); when the
store cannot give it, the turn runs in a fresh unpersisted conversation, never in
another device's. :meth:`ConversationBook.on_history` answers for a device's
conversation on the history rail (``edge tui`` asks).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from nats.aio.msg import Msg

from home.agents.admission import PendingTurn
from home.agents.conversations import Conversations, Entered, TauRequester
from home.agents.errors import AgentError, SessionError
from home.agents.node_stats import NodeStats
from home.agents.sessions import SessionBook, SessionStore, TurnRecord
from home.agents.transcript import device_history
from shared.errors import ContractError
from shared.event import utc_now
from shared.messages.history import HistoryReply, HistoryRequest

log = logging.getLogger(__name__)


def turn_record(entered: Entered, turn: PendingTurn, at: str) -> TurnRecord | None:
    """The line the book logs for ``turn`` in the conversation it entered (None: none)."""
    if entered.session is None:
        return None
    return TurnRecord(
        session_id=entered.session.session_id,
        binding_id=turn.binding.binding_id,
        device=entered.session.device,
        at=at,
        text=turn.text,
    )


class ConversationBook:
    """One persisted conversation per device: entered before each turn, read back on request.

    ``store`` None: the agent keeps no conversations (τ's own bus posture), and
    every turn runs where τ is.
    """

    def __init__(self, name: str, agent: str, run_dir: Path, store: SessionStore | None,
                 stats: NodeStats) -> None:  # fmt: skip
        self.name = name
        self.agent = agent
        self.store = store
        self.book = SessionBook(run_dir, agent)
        self._conversations = Conversations(self.book, store)
        self._stats = stats

    def load(self) -> None:
        """Read the book (which conversation is whose) from the run directory."""
        self.book.load()

    async def close(self) -> None:
        """Close what the lookups of new conversations opened."""
        await self._conversations.close()

    async def enter(self, tau: TauRequester, turn: PendingTurn) -> Entered | None:
        """Put τ on the turn's device's conversation, and log the prompt against it."""
        if self.store is None:
            return None
        try:
            entered = await self._conversations.enter(tau, turn.binding.device)
        except SessionError as exc:
            # Answered without history rather than not at all, and never in another
            # device's conversation; a τ that cannot even do that fails the turn.
            self._stats.session_failures += 1
            log.error(
                "%s: turn %s runs without its conversation: %s",
                self.name, turn.binding.binding_id, exc,
            )  # fmt: skip
            await self._conversations.isolate(tau)
            return None
        self._stats.session_switches += entered.switched
        self._stats.sessions_created += entered.created
        record = turn_record(entered, turn, utc_now().isoformat())
        if record is not None:
            try:
                self.book.record_turn(record)
            except OSError as exc:
                log.error("%s: could not log the turn: %s", self.name, exc)
        return entered

    async def on_history(self, msg: Msg) -> None:
        """Answer for a device's conversation (``edge tui`` on home's NATS asks)."""
        device, store = "?", self.store
        if store is None:
            return
        try:
            request = HistoryRequest.from_json(msg.data)
            device = request.device
            reply = await asyncio.to_thread(
                device_history, self.book, store, request.device, request.turns
            )
        except (ContractError, AgentError, OSError) as exc:
            reply = HistoryReply(self.agent, device, None, error=str(exc))
        # The history rail's boundary: counted, and answered with an error.
        except Exception as exc:  # noqa: BLE001
            self._stats.internal_error(self.name, "history", msg, exc)
            reply = HistoryReply(self.agent, device, None, error="internal error")
        if msg.reply:
            await msg.respond(reply.to_json())

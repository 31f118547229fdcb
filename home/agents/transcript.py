"""A stored conversation read back as turns: what was said, what came back, when, which binding.

τ's own loaders read the store (``Session.load`` for a ``.jsonl`` of the file
store, ``JmftsSessionLog.load`` for a JMFTS root document), so what is shown is
what τ resumes from. :func:`turns_of` is pure: it walks τ's entries in order,
one turn per user message, and gives each turn the binding id the node's turn
ledger recorded for that text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_coding_agent.session_store import Session
from tau_jmfts.client import JmftsClient, JmftsError
from tau_jmfts.store import JmftsSessionLog

from home.agents.errors import SessionError
from home.agents.sessions import (
    DeviceSession,
    JmftsStore,
    SessionBook,
    SessionStore,
    TurnRecord,
    read_turns,
)
from shared.messages.history import HistoryReply, HistoryTurn


@dataclass
class Turn:
    """One user turn: when it was said, the words, and the answer (spoken lines and prose)."""

    at: str
    said: str
    answer: list[str] = field(default_factory=list)
    binding_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The turn as ``home sessions show --json`` prints it."""
        return {
            "at": self.at,
            "binding_id": self.binding_id,
            "said": self.said,
            "answer": self.answer,
        }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(block["text"])
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and "text" in block
        )
    return ""


def _answer_parts(content: Any) -> list[str]:
    """An assistant message's prose and the text of each ``speak`` call, in order."""
    if isinstance(content, str):
        return [content] if content.strip() else []
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            parts.append(str(block["text"]))
        elif block.get("type") == "toolCall":
            arguments = block.get("arguments")
            text = arguments.get("text") if isinstance(arguments, dict) else None
            parts.append(f"{block.get('name')}: {text}" if text else f"{block.get('name')}()")
    return parts


def turns_of(entries: list[dict[str, Any]], ledger: list[TurnRecord]) -> list[Turn]:
    """The turns in τ's ``entries``, each with the binding id of its ledger line.

    A ledger line belongs to the first unclaimed user message holding its text (a
    redelivered turn has two such messages and one binding id for both).
    """
    pending = list(ledger)
    turns: list[Turn] = []
    last_binding: dict[str, str] = {}
    for entry in entries:
        message = entry.get("message")
        if entry.get("type") != "message" or not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            said = _text(message.get("content"))
            binding = next((r for r in pending if r.text and r.text in said), None)
            if binding is not None:
                pending.remove(binding)
                last_binding[binding.text] = binding.binding_id
            binding_id = binding.binding_id if binding is not None else None
            if binding_id is None:
                binding_id = next((b for text, b in last_binding.items() if text in said), None)
            turns.append(Turn(str(entry.get("timestamp", "")), said, binding_id=binding_id))
        elif role == "assistant" and turns:
            turns[-1].answer.extend(_answer_parts(message.get("content")))
    return turns


def load_entries(
    session: DeviceSession, jmfts_url: str | None, jmfts_token_file: Path | None
) -> list[dict[str, Any]]:
    """τ's entries of ``session``, read from its store with τ's own loader.

    A JMFTS conversation needs the memory server's URL and a token that may read it.
    Raises SessionError naming the conversation when the store cannot give it.
    """
    try:
        if session.store == "file":
            entries: list[dict[str, Any]] = Session.load(Path(session.ref)).entries()
            return entries
        if session.store == "jmfts":
            return _jmfts_entries(session, jmfts_url, jmfts_token_file)
    except (OSError, ValueError) as exc:
        raise SessionError(f"conversation {session.session_id}: {exc}") from exc
    raise SessionError(f"conversation {session.session_id}: unknown store {session.store!r}")


def _jmfts_entries(
    session: DeviceSession, url: str | None, token_file: Path | None
) -> list[dict[str, Any]]:
    if url is None or token_file is None:
        raise SessionError(
            f"conversation {session.session_id} is kept in JMFTS: it needs the memory server"
        )
    with JmftsClient(url, token=token_file.read_text(encoding="utf-8").strip()) as client:
        try:
            stored: list[dict[str, Any]] = JmftsSessionLog.load(client, session.ref).entries()
            return stored
        except JmftsError as exc:
            raise SessionError(
                f"conversation {session.session_id} (JMFTS document {session.ref}): {exc}"
            ) from exc


def device_history(book: SessionBook, store: SessionStore, device: str, limit: int) -> HistoryReply:
    """The last ``limit`` turns of ``device``'s conversation, as its agent answers for it
    (read as the agent: a JMFTS conversation with the agent's own token)."""
    session = book.get(device)
    if session is None:
        return HistoryReply(book.agent, device, None, error=f"{device} has no conversation yet")
    url, token = (store.url, store.token_file) if isinstance(store, JmftsStore) else (None, None)
    entries = load_entries(session, url, token)
    ledger = [t for t in read_turns(book.turns_path) if t.session_id == session.session_id]
    turns = [
        HistoryTurn(t.at, t.binding_id, t.said, tuple(t.answer))
        for t in turns_of(entries, ledger)[-limit:]
    ]
    return HistoryReply(book.agent, device, session.session_id, tuple(turns))

"""Where an agent's conversations live, and which one is whose (docs/architecture.md "Sessions").

An agent keeps one persisted τ conversation per device. τ stores them
(:class:`JmftsStore`: τ's own JMFTS session store, under the agent's
``journal/<agent>/sessions``; :class:`FileStore`: τ's file store, under
``D/agents/<agent>/sessions``); the node remembers which conversation belongs to
which device in its :class:`SessionBook`, two files beside τ's run directory:

- ``sessions.json``: device → :class:`DeviceSession` (store, τ's ref and id), so a
  restarted node, or a node on a restarted home, finds each device's conversation;
- ``turns.jsonl``: one line per prompt (conversation, binding id, device, time, text),
  which is where ``home sessions show`` gets each turn's binding id.

No τ I/O here (:mod:`home.agents.conversations` moves τ between conversations);
the network calls are :func:`jmfts_store_config`, which makes sure the agent's
container exists before τ starts, and :func:`locate_in_jmfts`, which finds a new
conversation's ref with one query whatever the number of conversations stored.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from home.agents.errors import AgentConfigError, SessionBookError, SessionError
from home.jmfts.client import JmftsClient
from home.jmfts.errors import JmftsError
from shared.files import write_atomic

log = logging.getLogger(__name__)

SESSIONS_FILE = "sessions.json"
TURNS_FILE = "turns.jsonl"
# τ's file store, under the agent's run directory.
FILE_STORE_DIR = "sessions"
# The JMFTS subtree (under the agent's own journal grant) that holds its conversations.
JMFTS_SESSIONS_LEAF = "sessions"
# The book's key for turns that name no device (a delegated task, say).
NO_DEVICE = "-"


@dataclass(frozen=True)
class FileStore:
    """τ's file store: one ``.jsonl`` per conversation under ``directory``."""

    directory: Path

    name = "file"


@dataclass(frozen=True)
class JmftsStore:
    """τ's JMFTS store: each conversation a document tree under ``path``, as the agent."""

    url: str
    token_file: Path
    path: str

    name = "jmfts"


SessionStore = FileStore | JmftsStore


def jmfts_sessions_path(agent: str) -> str:
    """The titled path of an agent's conversations in JMFTS: ``journal/<agent>/sessions``."""
    return f"journal/{agent}/{JMFTS_SESSIONS_LEAF}"


def file_store(run_dir: Path) -> FileStore:
    """τ's file store under an agent's run directory (``D/agents/<agent>/sessions``)."""
    return FileStore(run_dir / FILE_STORE_DIR)


def store_flags(store: SessionStore | None) -> list[str]:
    """τ's command-line flags for ``store`` (the JMFTS store is configured in its τ home).

    τ starts on a conversation of its own, which no device's turn runs in: unpersisted
    (``--no-session``) where τ allows it. τ refuses ``--no-session`` beside
    ``--session-dir``, so under the file store that first conversation is an empty file.
    """
    if isinstance(store, FileStore):
        return ["--session-dir", str(store.directory)]
    return ["--no-session"]


async def jmfts_store_config(store: JmftsStore) -> dict[str, Any]:
    """τ's ``session_store`` section for ``store``, its container ensured as the agent.

    Raises SessionError when the memory server does not answer or refuses.
    """
    try:
        async with JmftsClient.from_token_file(store.url, store.token_file) as client:
            container = await client.ensure(store.path)
    except JmftsError as exc:
        raise SessionError(f"the conversations' container {store.path} in JMFTS: {exc}") from exc
    return tau_store_config(store, container.id)


def tau_store_config(store: JmftsStore, parent_id: int) -> dict[str, Any]:
    """The ``session_store`` section of τ's ``config.json`` for the JMFTS store.

    The token is read here and written only into that 0600 file: never onto a
    command line or into τ's environment.
    """
    try:
        token = store.token_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise AgentConfigError(f"cannot read the agent's token {store.token_file}: {exc}") from exc
    return {"backend": "jmfts", "url": store.url, "token": token, "parent_id": parent_id}


# τ's JMFTS store files a conversation as a root of this usetype, titled with this
# prefix and its id's first 8 characters until set_session_name retitles it.
TAU_CONVERSATION_USETYPE = "tau:conversation"
TAU_CONVERSATION_TITLE = "tau:conversation "


def locate_in_files(store: FileStore, session_id: str) -> str:
    """The ``.jsonl`` path of τ's conversation ``session_id`` in the file store, by the
    ``<time>_<id>.jsonl`` name τ gives it (no file is read). SessionError when not one."""
    found = sorted(store.directory.rglob(f"*_{session_id}.jsonl"))
    if len(found) != 1:
        raise SessionError(
            f"the file store {store.directory} has {len(found)} files for the "
            f"conversation {session_id}, not one"
        )
    return str(found[0])


async def locate_in_jmfts(client: JmftsClient, session_id: str) -> str:
    """The root document id of τ's conversation ``session_id``, just created in JMFTS.

    One ``GET /documents`` by usetype and the root's creation title, the match checked
    on the id in its ``structured_content`` (call it before ``set_session_name``, which
    retitles the root). SessionError when the server fails or has not exactly one.
    """
    try:
        roots = await client.documents(
            usetype=TAU_CONVERSATION_USETYPE, title_prefix=TAU_CONVERSATION_TITLE + session_id[:8]
        )
    except JmftsError as exc:
        raise SessionError(f"finding the conversation {session_id} in JMFTS: {exc}") from exc
    refs = [str(doc.id) for doc in roots if _tau_id(doc.data) == session_id]
    if len(refs) != 1:
        raise SessionError(
            f"JMFTS has {len(refs)} {TAU_CONVERSATION_USETYPE} roots for the "
            f"conversation {session_id}, not one"
        )
    return refs[0]


def _tau_id(document: dict[str, Any]) -> object:
    content = document.get("structured_content")
    header = content.get("tau") if isinstance(content, dict) else None
    return header.get("id") if isinstance(header, dict) else None


@dataclass(frozen=True)
class DeviceSession:
    """One device's conversation with one agent: the store it is in and τ's names for it.

    ``ref`` is what ``switch_session`` resolves directly (the file store's ``.jsonl``
    path, the JMFTS root document's id); ``session_id`` is τ's own id.
    """

    agent: str
    device: str
    store: str
    ref: str
    session_id: str
    created: str

    @classmethod
    def from_json(cls, data: Any, where: str) -> DeviceSession:
        """Read one entry of ``sessions.json``; SessionBookError names the key."""
        if not isinstance(data, dict):
            raise SessionBookError(f"{where}: expected an object, got {type(data).__name__}")
        values: dict[str, str] = {}
        for key in ("agent", "device", "store", "ref", "session_id", "created"):
            value = data.get(key)
            if not isinstance(value, str) or not value:
                raise SessionBookError(f"{where}.{key}: expected a non-empty string, got {value!r}")
            values[key] = value
        return cls(**values)


@dataclass(frozen=True)
class TurnRecord:
    """One prompt as the node sent it: which conversation, which turn, when."""

    session_id: str
    binding_id: str
    device: str
    at: str
    text: str

    @classmethod
    def from_json(cls, data: Any, where: str) -> TurnRecord:
        """Read one line of ``turns.jsonl``; SessionBookError names the line and key."""
        if not isinstance(data, dict):
            raise SessionBookError(f"{where}: expected an object")
        values: dict[str, str] = {}
        for key in ("session_id", "binding_id", "device", "at", "text"):
            value = data.get(key)
            if not isinstance(value, str):
                raise SessionBookError(f"{where}.{key}: expected a string, got {value!r}")
            values[key] = value
        return cls(**values)


def device_key(device: str | None) -> str:
    """The book's key for ``device`` (:data:`NO_DEVICE` for a turn that names none)."""
    return device or NO_DEVICE


class SessionBook:
    """An agent's device → conversation map and turn ledger, on disk under ``run_dir``."""

    def __init__(self, run_dir: Path, agent: str) -> None:
        self.agent = agent
        self.path = run_dir / SESSIONS_FILE
        self.turns_path = run_dir / TURNS_FILE
        self._sessions: dict[str, DeviceSession] = {}

    def load(self) -> None:
        """Read ``sessions.json``. A file that cannot be read is moved aside (kept for a
        person to look at), logged with what was wrong, and the book starts empty: the
        node still serves, each device on a new conversation."""
        try:
            self._sessions = read_sessions(self.path)
        except SessionBookError as exc:
            aside = self.path.with_name(f"{self.path.name}.bad-{int(time.time())}")
            os.replace(self.path, aside)
            log.error("%s; moved to %s, each device starts a new conversation", exc, aside)
            self._sessions = {}

    def get(self, device: str | None) -> DeviceSession | None:
        """The conversation of ``device``, if it has one."""
        return self._sessions.get(device_key(device))

    def put(self, session: DeviceSession) -> None:
        """Remember ``session`` as its device's conversation (written before returning)."""
        self._sessions[session.device] = session
        body = {"agent": self.agent, "sessions": [asdict(s) for s in self._sessions.values()]}
        write_atomic(self.path, json.dumps(body, indent=2))

    def record_turn(self, turn: TurnRecord) -> None:
        """Append one prompt to the ledger."""
        self.turns_path.parent.mkdir(parents=True, exist_ok=True)
        with self.turns_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(turn)) + "\n")


def read_sessions(path: Path) -> dict[str, DeviceSession]:
    """The device → conversation map in ``path`` (empty when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SessionBookError(f"{path}: cannot read: {exc}") from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionBookError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from exc
    rows = body.get("sessions") if isinstance(body, dict) else None
    if not isinstance(rows, list):
        raise SessionBookError(f"{path}: sessions: expected a list")
    found = (DeviceSession.from_json(row, f"{path}: sessions[{i}]") for i, row in enumerate(rows))
    return {session.device: session for session in found}


def read_turns(path: Path) -> list[TurnRecord]:
    """Every prompt in the ledger at ``path``, in order; SessionBookError names a bad line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SessionBookError(f"{path}: cannot read: {exc}") from exc
    turns: list[TurnRecord] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            # A line cut short by a kill is the ledger's only expected damage.
            log.warning("%s:%d: not JSON (%s); skipped", path, number, exc.msg)
            continue
        turns.append(TurnRecord.from_json(data, f"{path}:{number}"))
    return turns


def turn_words(data_dir: Path, agent: str) -> dict[str, str]:
    """``agent``'s turn ledger under home's ``data_dir``: binding id → the words of the turn."""
    return {t.binding_id: t.text for t in read_turns(data_dir / "agents" / agent / TURNS_FILE)}

"""The SQLite schema and connection: WAL, ``synchronous=FULL`` by default so an acked commit
survives kill -9 and power loss, foreign keys on. SQLite is the source of truth; the FAISS
index is derived."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Literal

from home.jmfts.errors import InvalidInput

#: SQLite's ``synchronous`` in WAL mode. FULL fsyncs the WAL at every commit: an acked
#: write survives kill -9 and power loss. NORMAL leaves the fsync to checkpoints: an acked
#: write still survives kill -9 (it is in the OS's cache), not a power loss or kernel crash.
Synchronous = Literal["FULL", "NORMAL"]

SCHEMA_VERSION = "1"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS principals (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    is_owner INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    id INTEGER PRIMARY KEY,
    principal_id INTEGER NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
    secret_sha256 TEXT NOT NULL,
    label TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER REFERENCES documents(id),
    path TEXT NOT NULL,
    depth INTEGER NOT NULL,
    title TEXT,
    content TEXT,
    structured_content TEXT NOT NULL DEFAULT '{}',
    usetype TEXT,
    position INTEGER,
    author_id INTEGER,
    supersedes INTEGER,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    event_time TEXT,
    content_hash TEXT
);
CREATE INDEX IF NOT EXISTS documents_parent ON documents(parent_id);
CREATE INDEX IF NOT EXISTS documents_path ON documents(path);
CREATE INDEX IF NOT EXISTS documents_usetype ON documents(usetype);
CREATE INDEX IF NOT EXISTS documents_supersedes ON documents(supersedes);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id);
CREATE VIRTUAL TABLE IF NOT EXISTS documents_fts USING fts5(
    title, content, tokenize = 'porter unicode61'
);
CREATE TABLE IF NOT EXISTS grants (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    principal_id INTEGER NOT NULL REFERENCES principals(id) ON DELETE CASCADE,
    level TEXT NOT NULL CHECK (level IN ('read', 'write')),
    created_at TEXT NOT NULL,
    UNIQUE (document_id, principal_id)
);
CREATE TABLE IF NOT EXISTS predicates (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    namespace TEXT,
    description TEXT,
    iri TEXT UNIQUE,
    created_at TEXT NOT NULL,
    created_by INTEGER
);
CREATE TABLE IF NOT EXISTS triples (
    id INTEGER PRIMARY KEY,
    subject_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    predicate_id INTEGER NOT NULL REFERENCES predicates(id) ON DELETE CASCADE,
    object_id INTEGER REFERENCES documents(id) ON DELETE CASCADE,
    object_literal TEXT,
    object_datatype TEXT,
    source_document_id INTEGER,
    valid_from TEXT,
    valid_until TEXT,
    recorded_at TEXT NOT NULL,
    fact_type TEXT,
    invalidated_at TEXT,
    invalidated_by INTEGER,
    invalidation_reason TEXT,
    author_id INTEGER
);
CREATE INDEX IF NOT EXISTS triples_subject ON triples(subject_id);
CREATE INDEX IF NOT EXISTS triples_object ON triples(object_id);
"""


def connect(path: Path, synchronous: Synchronous = "FULL") -> sqlite3.Connection:
    """Open (creating if needed) the store at ``path`` with the durability settings.

    Memories are private: the file is created 0600 before SQLite opens it (SQLite gives
    its ``-wal`` and ``-shm`` files the database file's mode), and files left by an
    earlier, laxer version are tightened.
    """
    if synchronous not in ("FULL", "NORMAL"):
        raise InvalidInput(f"synchronous {synchronous!r}: expected FULL or NORMAL")
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(SCHEMA)
    _add_missing_columns(conn)
    conn.execute(
        "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (SCHEMA_VERSION,)
    )
    return conn


# Columns added after a table was first shipped: (table, column, declaration).
_ADDED_COLUMNS = (("predicates", "created_by", "INTEGER"),)


def connect_reader(path: Path) -> sqlite3.Connection:
    """A second, query-only connection to a store :func:`connect` opened: in WAL mode it
    reads the last committed state while the writer's connection commits."""
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA query_only=ON")
    return conn


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Give a store made by an earlier version the columns added since (NULL in old rows)."""
    for table, column, declaration in _ADDED_COLUMNS:
        have = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def subtree_range(path: str) -> tuple[str, str]:
    """Bounds so that ``lo <= p < hi`` holds exactly for paths under ``path`` (itself too).

    Paths look like ``/1/5/9/``; every descendant starts with its ancestor's path, and the
    successor of the trailing ``/`` is ``0``, so a range scan on the path index finds them.
    """
    return path, path[:-1] + "0"

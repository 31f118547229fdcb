"""Principals, bearer tokens and subtree grants; who may see and write what.

Tokens are ``jm_<id>_<secret>``: the id finds the row, the secret's sha256 is compared with
:func:`hmac.compare_digest` (constant time); only the hash is stored. A grant on a
document covers its whole subtree; ``write`` implies ``read``. The owner (admin) sees
everything. Any other principal sees only granted subtrees, and everything else is
*absent* to it: callers turn "not visible" into 404, never 403, so existence never leaks.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime

from home.jmfts.clock import from_stored, to_stored, utc_now
from home.jmfts.db import subtree_range
from home.jmfts.errors import Conflict, InvalidInput, NotFound, Unauthorized

ADMIN_NAME = "admin"
ADMIN_TOKEN_FILE = "admin.token"
_TOKEN_PREFIX = "jm"
# A token id is an SQLite rowid: ASCII digits that fit 63 bits. ``str.isdigit`` would
# also take '²' (which int() refuses) and any length (which SQLite refuses).
_TOKEN_ID = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Principal:
    """An authenticated identity."""

    id: int
    name: str
    is_owner: bool


@dataclass(frozen=True)
class Scope:
    """The subtrees a principal may read and write; ``None`` means everything (owner)."""

    read_paths: tuple[str, ...] | None
    write_paths: tuple[str, ...] | None

    @staticmethod
    def _covers(paths: tuple[str, ...] | None, path: str) -> bool:
        return paths is None or any(path.startswith(p) for p in paths)

    def can_read(self, path: str) -> bool:
        """Whether a document at ``path`` is visible."""
        return self._covers(self.read_paths, path)

    def can_write(self, path: str) -> bool:
        """Whether a document at ``path`` may be written (or written under)."""
        return self._covers(self.write_paths, path)

    def sql(self, column: str = "d.path") -> tuple[str, list[str]]:
        """A SQL predicate (and its parameters) true for readable rows."""
        if self.read_paths is None:
            return "1", []
        if not self.read_paths:
            return "0", []
        clauses, params = [], []
        for path in self.read_paths:
            lo, hi = subtree_range(path)
            clauses.append(f"({column} >= ? AND {column} < ?)")
            params += [lo, hi]
        return "(" + " OR ".join(clauses) + ")", params


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret() -> tuple[str, str]:
    """A new token secret and its sha256 (what is stored)."""
    secret = secrets.token_urlsafe(32)
    return secret, _hash_secret(secret)


def raw_token(token_id: int, secret: str) -> str:
    """The bearer token a caller presents: ``jm_<id>_<secret>``."""
    return f"{_TOKEN_PREFIX}_{token_id}_{secret}"


def _principal(row: sqlite3.Row) -> Principal:
    return Principal(id=row["id"], name=row["name"], is_owner=bool(row["is_owner"]))


class AccessControl:
    """Principals, tokens and grants over one store connection (caller holds the lock)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    # -- principals ----------------------------------------------------------------

    def create_principal(self, name: str, *, is_owner: bool, at: datetime) -> sqlite3.Row:
        """Create a principal; a taken name is a :class:`Conflict`."""
        try:
            cur = self._conn.execute(
                "INSERT INTO principals(name, is_owner, created_at) VALUES (?, ?, ?)",
                (name, int(is_owner), to_stored(at)),
            )
        except sqlite3.IntegrityError as exc:
            raise Conflict(f"principal name {name!r} is taken") from exc
        return self.principal_row(int(cur.lastrowid or 0))

    def principal_row(self, principal_id: int) -> sqlite3.Row:
        """The principal row, or :class:`NotFound`."""
        row = self._conn.execute(
            "SELECT * FROM principals WHERE id = ?", (principal_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"principal {principal_id} does not exist")
        return row  # type: ignore[no-any-return]

    def owner_row(self) -> sqlite3.Row | None:
        """The owner principal's row, or None before the first start."""
        return self._conn.execute(  # type: ignore[no-any-return]
            "SELECT * FROM principals WHERE is_owner = 1 ORDER BY id LIMIT 1"
        ).fetchone()

    def principals(self) -> list[sqlite3.Row]:
        """Every principal, by id."""
        return list(self._conn.execute("SELECT * FROM principals ORDER BY id"))

    def delete_principal(self, principal_id: int) -> None:
        """Delete a non-owner principal with its tokens and grants."""
        row = self.principal_row(principal_id)
        if row["is_owner"]:
            raise InvalidInput("the owner principal cannot be deleted")
        self._conn.execute("DELETE FROM principals WHERE id = ?", (principal_id,))

    # -- tokens --------------------------------------------------------------------

    def mint_token(
        self,
        principal_id: int,
        label: str | None,
        expires_at: datetime | None,
        *,
        secret_sha256: str,
        at: datetime,
    ) -> sqlite3.Row:
        """Store a token's row (its secret's hash: see :func:`new_secret`, :func:`raw_token`)."""
        self.principal_row(principal_id)
        cur = self._conn.execute(
            "INSERT INTO tokens(principal_id, secret_sha256, label, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                principal_id,
                secret_sha256,
                label,
                to_stored(at),
                to_stored(expires_at) if expires_at else None,
            ),
        )
        token_id = int(cur.lastrowid or 0)
        return self._conn.execute(  # type: ignore[no-any-return]
            "SELECT * FROM tokens WHERE id = ?", (token_id,)
        ).fetchone()

    def tokens(self, principal_id: int) -> list[sqlite3.Row]:
        """A principal's tokens (metadata)."""
        self.principal_row(principal_id)
        return list(
            self._conn.execute(
                "SELECT * FROM tokens WHERE principal_id = ? ORDER BY id", (principal_id,)
            )
        )

    def revoke_token(self, token_id: int, *, at: datetime) -> None:
        """Revoke a token; later requests bearing it get 401."""
        cur = self._conn.execute(
            "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
            (to_stored(at), token_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"token {token_id} does not exist or is already revoked")

    def authenticate(self, raw: str | None, conn: sqlite3.Connection | None = None) -> Principal:
        """The principal a raw bearer token belongs to, or :class:`Unauthorized`; read
        through ``conn`` when given (a reader connection), else the store's own."""
        if not raw:
            raise Unauthorized("a bearer token is required (Authorization: Bearer ...)")
        parts = raw.split("_", 2)
        if len(parts) != 3 or parts[0] != _TOKEN_PREFIX or not _TOKEN_ID.fullmatch(parts[1]):
            raise Unauthorized("the bearer token is malformed")
        row = (
            (conn or self._conn)
            .execute(
                "SELECT t.*, p.name, p.is_owner FROM tokens t JOIN principals p"
                " ON p.id = t.principal_id WHERE t.id = ?",
                (int(parts[1]),),
            )
            .fetchone()
        )
        expected = row["secret_sha256"] if row else _hash_secret("")
        # Compare even when the row is missing so timing does not reveal valid ids.
        matches = hmac.compare_digest(expected, _hash_secret(parts[2]))
        if row is None or not matches or row["revoked_at"] is not None:
            raise Unauthorized("the bearer token is unknown or revoked")
        expires = from_stored(row["expires_at"])
        if expires is not None and expires <= utc_now():
            raise Unauthorized("the bearer token has expired")
        return Principal(id=row["principal_id"], name=row["name"], is_owner=bool(row["is_owner"]))

    # -- grants ----------------------------------------------------------------------

    def grant(
        self, document_id: int, principal_id: int, level: str, *, at: datetime
    ) -> sqlite3.Row:
        """Grant (or change) a principal's level on a subtree."""
        self.principal_row(principal_id)
        self._conn.execute(
            "INSERT INTO grants(document_id, principal_id, level, created_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT(document_id, principal_id)"
            " DO UPDATE SET level = excluded.level",
            (document_id, principal_id, level, to_stored(at)),
        )
        return self._conn.execute(  # type: ignore[no-any-return]
            "SELECT * FROM grants WHERE document_id = ? AND principal_id = ?",
            (document_id, principal_id),
        ).fetchone()

    def grants(self, document_id: int) -> list[sqlite3.Row]:
        """The grants on one document."""
        return list(
            self._conn.execute(
                "SELECT * FROM grants WHERE document_id = ? ORDER BY id", (document_id,)
            )
        )

    def revoke_grant(self, document_id: int, principal_id: int) -> None:
        """Remove a grant."""
        cur = self._conn.execute(
            "DELETE FROM grants WHERE document_id = ? AND principal_id = ?",
            (document_id, principal_id),
        )
        if cur.rowcount == 0:
            raise NotFound(f"principal {principal_id} has no grant on document {document_id}")

    def scope(self, principal: Principal) -> Scope:
        """The subtrees ``principal`` may read and write."""
        if principal.is_owner:
            return Scope(None, None)
        rows = self._conn.execute(
            "SELECT d.path, g.level FROM grants g JOIN documents d ON d.id = g.document_id"
            " WHERE g.principal_id = ?",
            (principal.id,),
        ).fetchall()
        read = tuple(sorted({r["path"] for r in rows}))
        write = tuple(sorted({r["path"] for r in rows if r["level"] == "write"}))
        return Scope(read, write)

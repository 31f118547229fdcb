"""Writes of principals, tokens and grants, each prepared here and committed through the
store's log; and how their entries are applied.

A mixin of :class:`~home.jmfts.store.DocumentStore`. A token's secret is made by the
writer and only its hash enters the log (:func:`~home.jmfts.access.new_secret`), so
the raw token exists in the minting answer alone, and authenticates on every store
that applied the entry.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from home.jmfts.access import (
    ADMIN_NAME,
    ADMIN_TOKEN_FILE,
    AccessControl,
    Principal,
    new_secret,
    raw_token,
)
from home.jmfts.clock import utc_now
from home.jmfts.errors import Unauthorized
from home.jmfts.write_log import (
    AccessEntry,
    CreatePrincipal,
    DeletePrincipal,
    Entry,
    Grant,
    MintToken,
    RevokeGrant,
    RevokeToken,
)
from shared.files import write_atomic


class AccessWrites:
    """Principal, token and grant writes; the store supplies its log, lock and rows."""

    data_dir: Path
    lock: threading.RLock
    access: AccessControl

    def commit(self, entry: Entry) -> Any:
        """Commit through the store's log (the store's)."""
        raise NotImplementedError

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One transaction under the store lock (the store's)."""
        raise NotImplementedError

    def authenticate(self, raw: str | None) -> Principal:
        """The principal a bearer token names (the store's)."""
        raise NotImplementedError

    def create_principal(self, name: str) -> sqlite3.Row:
        """A new non-owner principal; a taken name is a conflict."""
        return self.commit(CreatePrincipal(at=utc_now(), name=name))  # type: ignore[no-any-return]

    def delete_principal(self, principal_id: int) -> None:
        """Delete a non-owner principal with its tokens and grants."""
        self.commit(DeletePrincipal(at=utc_now(), principal_id=principal_id))

    def mint_token(
        self, principal_id: int, label: str | None = None, expires_at: datetime | None = None
    ) -> tuple[sqlite3.Row, str]:
        """Mint a token; its row and the raw token, which exists only in this answer (the
        log and the rows hold its hash)."""
        secret, digest = new_secret()
        entry = MintToken(
            at=utc_now(),
            principal_id=principal_id,
            label=label,
            expires_at=expires_at,
            secret_sha256=digest,
        )
        row: sqlite3.Row = self.commit(entry)
        return row, raw_token(row["id"], secret)

    def revoke_token(self, token_id: int) -> None:
        """Revoke a token; later requests bearing it get 401."""
        self.commit(RevokeToken(at=utc_now(), token_id=token_id))

    def grant(
        self, document_id: int, principal_id: int, level: Literal["read", "write"]
    ) -> sqlite3.Row:
        """Grant (or change) a principal's level on a subtree."""
        entry = Grant(at=utc_now(), document_id=document_id, principal_id=principal_id, level=level)
        return self.commit(entry)  # type: ignore[no-any-return]

    def revoke_grant(self, document_id: int, principal_id: int) -> None:
        """Remove a grant."""
        self.commit(RevokeGrant(at=utc_now(), document_id=document_id, principal_id=principal_id))

    def bootstrap_admin(self) -> tuple[Principal, Path]:
        """Ensure an owner principal and a working token in ``data_dir/admin.token`` (0600).

        A token file that still authenticates is kept; otherwise a fresh token is minted
        and the file rewritten, created with mode 0600 before any byte is written.
        """
        path = self.data_dir / ADMIN_TOKEN_FILE
        row = self.commit(CreatePrincipal(at=utc_now(), name=ADMIN_NAME, is_owner=True))
        owner = Principal(id=row["id"], name=row["name"], is_owner=True)
        if path.is_file():
            try:
                if self.authenticate(path.read_text().strip()).id == owner.id:
                    os.chmod(path, 0o600)
                    return owner, path
            except Unauthorized:
                pass
        _, raw = self.mint_token(owner.id, label="admin (bootstrap)")
        write_atomic(path, raw + "\n", private=True)
        return owner, path

    def apply_access(self, entry: AccessEntry) -> Any:
        """Apply an access entry in one transaction; its row (or None), or its error."""
        access = self.access
        row: Any = None
        with self.transaction():
            match entry:
                case CreatePrincipal():
                    owner = access.owner_row() if entry.is_owner else None
                    row = owner or access.create_principal(
                        entry.name, is_owner=entry.is_owner, at=entry.at
                    )
                case DeletePrincipal():
                    access.delete_principal(entry.principal_id)
                case MintToken():
                    row = access.mint_token(
                        entry.principal_id,
                        entry.label,
                        entry.expires_at,
                        secret_sha256=entry.secret_sha256,
                        at=entry.at,
                    )
                case RevokeToken():
                    access.revoke_token(entry.token_id, at=entry.at)
                case Grant():
                    row = access.grant(
                        entry.document_id, entry.principal_id, entry.level, at=entry.at
                    )
                case RevokeGrant():
                    access.revoke_grant(entry.document_id, entry.principal_id)
        return row

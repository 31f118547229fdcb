"""Bitemporal triples: valid time (``valid_from``/``valid_until``: when it was true in the
world) and record time (``recorded_at`` until ``invalidated_at``: when we believed it).

Supersede closes the old triple's windows and records the successor; invalidate closes the
record window only. Nothing is deleted by either, so ``as_of=T`` answers "what did we
believe at T" by selecting rows recorded at or before T and not yet invalidated at T.
A triple is visible to a principal when its subject (and object document, if any) is.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from home.jmfts.access import AccessControl, Principal, Scope
from home.jmfts.clock import from_stored, to_stored, utc_now
from home.jmfts.errors import Conflict, InvalidInput, NotFound
from home.jmfts.models import (
    PredicateCreate,
    PredicateResponse,
    TripleCreate,
    TripleDetailResponse,
    TripleInvalidateRequest,
    TripleResponse,
    TripleSupersedRequest,
)
from home.jmfts.rows import document_response
from home.jmfts.write_log import (
    CreatePredicate,
    CreateTriple,
    DeleteTriple,
    Entry,
    InvalidateTriple,
    SupersedeTriple,
    TripleEntry,
)

_FACT_TYPES = {"atemporal", "temporal", "event", "state"}


def predicate_response(row: sqlite3.Row) -> PredicateResponse:
    """A predicate row on the wire."""
    return PredicateResponse(
        id=row["id"],
        name=row["name"],
        namespace=row["namespace"],
        iri=row["iri"],
        description=row["description"],
        created_at=from_stored(row["created_at"]),
    )


def triple_response(row: sqlite3.Row) -> TripleResponse:
    """A triple row on the wire."""
    return TripleResponse(
        id=row["id"],
        subject_id=row["subject_id"],
        predicate_id=row["predicate_id"],
        object_id=row["object_id"],
        object_literal=row["object_literal"],
        object_datatype=row["object_datatype"],
        source_document_id=row["source_document_id"],
        created_at=from_stored(row["recorded_at"]),
        valid_from=from_stored(row["valid_from"]),
        valid_until=from_stored(row["valid_until"]),
        recorded_at=from_stored(row["recorded_at"]),
        fact_type=row["fact_type"],
        invalidated_at=from_stored(row["invalidated_at"]),
        invalidated_by=row["invalidated_by"],
        invalidation_reason=row["invalidation_reason"],
    )


class Documents(Protocol):
    """What triples need of :class:`~home.jmfts.store.DocumentStore`, which owns them."""

    lock: threading.RLock
    conn: sqlite3.Connection
    access: AccessControl

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One transaction under the store lock."""

    def commit(self, entry: Entry) -> Any:
        """Commit a prepared write through the store's log."""

    def row(self, doc_id: int) -> sqlite3.Row | None:
        """A document row regardless of access."""

    def visible(self, principal: Principal, doc_id: int) -> sqlite3.Row:
        """The row if readable, else NotFound."""

    def writable(self, principal: Principal, doc_id: int) -> sqlite3.Row:
        """The row if writable: NotFound when invisible, Forbidden when read-only."""

    def scope(self, principal: Principal) -> Scope:
        """What ``principal`` may read and write."""


class TripleStore:
    """Predicates and triples over a document store's database."""

    def __init__(self, store: Documents) -> None:
        self._store = store
        self._conn = store.conn

    def apply(self, entry: TripleEntry) -> Any:
        """Apply a predicate or triple entry (:meth:`DocumentStore.apply` hands it here)."""
        match entry:
            case CreatePredicate():
                result: Any = self._apply_create_predicate(entry.principal, entry.request, entry.at)
            case CreateTriple():
                result = self._apply_create(entry.principal, entry.request, entry.at)
            case SupersedeTriple():
                result = self._apply_supersede(
                    entry.principal, entry.triple_id, entry.request, entry.at
                )
            case InvalidateTriple():
                result = self._apply_invalidate(
                    entry.principal, entry.triple_id, entry.request, entry.at
                )
            case DeleteTriple():
                self._apply_delete(entry.principal, entry.triple_id)
                result = None
        return result

    # -- predicates --------------------------------------------------------------

    def create_predicate(self, principal: Principal, request: PredicateCreate) -> PredicateResponse:
        """Create a predicate, private to ``principal`` unless it is the owner; a taken
        name or IRI is a conflict (names are one namespace, but never listed to others)."""
        entry = CreatePredicate(at=utc_now(), principal=principal, request=request)
        return self._store.commit(entry)  # type: ignore[no-any-return]

    def _apply_create_predicate(
        self, principal: Principal, request: PredicateCreate, at: datetime
    ) -> PredicateResponse:
        with self._store.transaction():
            try:
                cur = self._conn.execute(
                    "INSERT INTO predicates(name, namespace, description, iri, created_at,"
                    " created_by) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        request.name,
                        request.namespace,
                        request.description,
                        request.iri,
                        to_stored(at),
                        None if principal.is_owner else principal.id,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"predicate {request.name!r} (or its IRI) exists") from exc
            return predicate_response(self._predicate(int(cur.lastrowid or 0)))

    def _predicate(self, predicate_id: int) -> sqlite3.Row:
        row = self._conn.execute(
            "SELECT * FROM predicates WHERE id = ?", (predicate_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"predicate {predicate_id} not found")
        return row  # type: ignore[no-any-return]

    def _visible_predicates(self, principal: Principal) -> tuple[str, list[Any]]:
        """A SQL condition (over ``predicates p``) true for the predicates ``principal`` sees.

        The owner sees all. Anyone else sees the owner's predicates (the shared
        vocabulary, ``created_by`` NULL), their own, and those of the triples they can
        read: another agent's private predicate names stay private.
        """
        if principal.is_owner:
            return "1", []
        readable, params = self._store.scope(principal).sql("d.path")
        return (
            "(p.created_by IS NULL OR p.created_by = ? OR p.id IN (SELECT t.predicate_id"
            " FROM triples t JOIN documents d ON d.id = t.subject_id WHERE " + readable + "))",
            [principal.id, *params],
        )

    def _visible_predicate(self, principal: Principal, predicate_id: int) -> sqlite3.Row:
        visible, args = self._visible_predicates(principal)
        row = self._conn.execute(
            f"SELECT p.* FROM predicates p WHERE p.id = ? AND {visible}", [predicate_id, *args]
        ).fetchone()
        if row is None:
            raise NotFound(f"predicate {predicate_id} not found")
        return row  # type: ignore[no-any-return]

    def get_predicate(self, principal: Principal, predicate_id: int) -> PredicateResponse:
        """One predicate ``principal`` sees; any other is absent."""
        with self._store.lock:
            return predicate_response(self._visible_predicate(principal, predicate_id))

    def list_predicates(
        self, principal: Principal, namespace: str | None
    ) -> list[PredicateResponse]:
        """The predicates ``principal`` sees, optionally of one namespace."""
        with self._store.lock:
            visible, args = self._visible_predicates(principal)
            sql = f"SELECT p.* FROM predicates p WHERE {visible}"
            if namespace is not None:
                sql, args = sql + " AND p.namespace = ?", [*args, namespace]
            return [predicate_response(r) for r in self._conn.execute(sql + " ORDER BY p.id", args)]

    # -- triples -----------------------------------------------------------------

    def _check_refs(self, principal: Principal, request: TripleCreate) -> None:
        if (request.object_id is None) == (request.object_literal is None):
            raise InvalidInput("a triple's object is exactly one of object_id and object_literal")
        if request.object_datatype is not None and request.object_literal is None:
            raise InvalidInput("object_datatype types a literal; give object_literal")
        if request.fact_type not in _FACT_TYPES:
            raise InvalidInput(
                f"fact_type {request.fact_type!r}: expected one of {sorted(_FACT_TYPES)}"
            )
        if (
            request.valid_from is not None
            and request.valid_until is not None
            and request.valid_until <= request.valid_from
        ):
            raise InvalidInput("valid_until must be after valid_from")
        self._store.writable(principal, request.subject_id)
        if request.object_id is not None:
            self._store.visible(principal, request.object_id)
        if request.source_document_id is not None:
            self._store.visible(principal, request.source_document_id)
        self._visible_predicate(principal, request.predicate_id)

    def _insert(self, principal: Principal, request: TripleCreate, now: str) -> int:
        cur = self._conn.execute(
            "INSERT INTO triples(subject_id, predicate_id, object_id, object_literal,"
            " object_datatype, source_document_id, valid_from, valid_until, recorded_at,"
            " fact_type, author_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                request.subject_id,
                request.predicate_id,
                request.object_id,
                request.object_literal,
                request.object_datatype,
                request.source_document_id,
                to_stored(request.valid_from) if request.valid_from else None,
                to_stored(request.valid_until) if request.valid_until else None,
                now,
                request.fact_type,
                principal.id,
            ),
        )
        return int(cur.lastrowid or 0)

    def create(self, principal: Principal, request: TripleCreate) -> TripleResponse:
        """Record a triple."""
        entry = CreateTriple(at=utc_now(), principal=principal, request=request)
        return self._store.commit(entry)  # type: ignore[no-any-return]

    def _apply_create(
        self, principal: Principal, request: TripleCreate, at: datetime
    ) -> TripleResponse:
        with self._store.transaction():
            self._check_refs(principal, request)
            triple_id = self._insert(principal, request, to_stored(at))
            return triple_response(self._row(triple_id))

    def _row(self, triple_id: int) -> sqlite3.Row:
        row = self._conn.execute("SELECT * FROM triples WHERE id = ?", (triple_id,)).fetchone()
        if row is None:
            raise NotFound(f"triple {triple_id} not found")
        return row  # type: ignore[no-any-return]

    def _visible_row(self, principal: Principal, triple_id: int) -> sqlite3.Row:
        row = self._row(triple_id)
        try:
            self._store.visible(principal, row["subject_id"])
            if row["object_id"] is not None:
                self._store.visible(principal, row["object_id"])
        except NotFound as exc:
            raise NotFound(f"triple {triple_id} not found") from exc
        return row

    def get(self, principal: Principal, triple_id: int) -> TripleResponse:
        """One visible triple."""
        with self._store.lock:
            return triple_response(self._visible_row(principal, triple_id))

    def supersede(
        self, principal: Principal, triple_id: int, request: TripleSupersedRequest
    ) -> TripleResponse:
        """Record a successor; the old triple's valid and record windows close."""
        entry = SupersedeTriple(
            at=utc_now(), principal=principal, triple_id=triple_id, request=request
        )
        return self._store.commit(entry)  # type: ignore[no-any-return]

    def _apply_supersede(
        self, principal: Principal, triple_id: int, request: TripleSupersedRequest, at: datetime
    ) -> TripleResponse:
        with self._store.transaction():
            old = self._visible_row(principal, triple_id)
            self._store.writable(principal, old["subject_id"])
            if old["invalidated_at"] is not None:
                raise Conflict(f"triple {triple_id} is already invalidated")
            self._check_refs(principal, request)
            stamp = to_stored(at)
            new_id = self._insert(principal, request, stamp)
            closes_at = to_stored(request.valid_from) if request.valid_from else stamp
            self._conn.execute(
                "UPDATE triples SET invalidated_at = ?, invalidated_by = ?,"
                " invalidation_reason = ?, valid_until = COALESCE(valid_until, ?) WHERE id = ?",
                (stamp, new_id, request.reason or "superseded", closes_at, triple_id),
            )
            return triple_response(self._row(new_id))

    def invalidate(
        self, principal: Principal, triple_id: int, request: TripleInvalidateRequest
    ) -> TripleResponse:
        """Close the record window: from now on we no longer believe this triple."""
        entry = InvalidateTriple(
            at=utc_now(), principal=principal, triple_id=triple_id, request=request
        )
        return self._store.commit(entry)  # type: ignore[no-any-return]

    def _apply_invalidate(
        self,
        principal: Principal,
        triple_id: int,
        request: TripleInvalidateRequest,
        at: datetime,
    ) -> TripleResponse:
        with self._store.transaction():
            row = self._visible_row(principal, triple_id)
            self._store.writable(principal, row["subject_id"])
            if row["invalidated_at"] is not None:
                raise Conflict(f"triple {triple_id} is already invalidated")
            if request.superseding_triple_id is not None:
                self._visible_row(principal, request.superseding_triple_id)
            self._conn.execute(
                "UPDATE triples SET invalidated_at = ?, invalidated_by = ?,"
                " invalidation_reason = ? WHERE id = ?",
                (
                    to_stored(at),
                    request.superseding_triple_id,
                    request.reason or "invalidated",
                    triple_id,
                ),
            )
            return triple_response(self._row(triple_id))

    def delete(self, principal: Principal, triple_id: int) -> None:
        """Erase a triple outright (prefer invalidate, which keeps history)."""
        self._store.commit(DeleteTriple(at=utc_now(), principal=principal, triple_id=triple_id))

    def _apply_delete(self, principal: Principal, triple_id: int) -> None:
        with self._store.transaction():
            row = self._visible_row(principal, triple_id)
            self._store.writable(principal, row["subject_id"])
            self._conn.execute("DELETE FROM triples WHERE id = ?", (triple_id,))

    def query(
        self,
        principal: Principal,
        *,
        entity_id: int | None = None,
        predicate_id: int | None = None,
        predicate: str | None = None,
        direction: str = "both",
        valid_at: datetime | None = None,
        valid_only: bool = False,
        as_of: datetime | None = None,
        include_invalidated: bool = True,
        fact_type: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[TripleDetailResponse]:
        """Triples matching the filters, over documents the principal can read."""
        if direction not in ("both", "outgoing", "incoming"):
            raise InvalidInput(f"direction {direction!r}: expected both, outgoing or incoming")
        with self._store.lock:
            scope = self._store.access.scope(principal)
            s_clause, s_params = scope.sql("s.path")
            o_clause, o_params = scope.sql("o.path")
            where = [s_clause, f"(t.object_id IS NULL OR {o_clause})"]
            args: list[Any] = [*s_params, *o_params]
            if entity_id is not None:
                self._store.visible(principal, entity_id)
                sides = {
                    "outgoing": "t.subject_id = ?",
                    "incoming": "t.object_id = ?",
                    "both": "(t.subject_id = ? OR t.object_id = ?)",
                }[direction]
                where.append(sides)
                args += [entity_id] * sides.count("?")
            if predicate_id is not None:
                where.append("t.predicate_id = ?")
                args.append(predicate_id)
            if predicate is not None:
                where.append("p.name = ?")
                args.append(predicate)
            if fact_type is not None:
                where.append("t.fact_type = ?")
                args.append(fact_type)
            if as_of is not None:
                stamp = to_stored(as_of)
                where.append(
                    "t.recorded_at <= ? AND (t.invalidated_at IS NULL OR t.invalidated_at > ?)"
                )
                args += [stamp, stamp]
            elif not include_invalidated or valid_only:
                where.append("t.invalidated_at IS NULL")
            if valid_at is not None:
                stamp = to_stored(valid_at)
                where.append(
                    "(t.valid_from IS NULL OR t.valid_from <= ?)"
                    " AND (t.valid_until IS NULL OR t.valid_until > ?)"
                )
                args += [stamp, stamp]
            rows = self._conn.execute(
                "SELECT t.* FROM triples t JOIN predicates p ON p.id = t.predicate_id"
                " JOIN documents s ON s.id = t.subject_id"
                " LEFT JOIN documents o ON o.id = t.object_id"
                f" WHERE {' AND '.join(where)} ORDER BY t.id LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            return [self._detail(r) for r in rows]

    def _detail(self, row: sqlite3.Row) -> TripleDetailResponse:
        subject = self._store.row(row["subject_id"])
        obj = self._store.row(row["object_id"]) if row["object_id"] is not None else None
        if subject is None:  # unreachable while ON DELETE CASCADE holds; never a 500
            raise NotFound(f"triple {row['id']} lost its subject")
        # The same fields as a TripleResponse, with the three ids expanded to what they name.
        flat = triple_response(row).model_dump(exclude={"subject_id", "predicate_id", "object_id"})
        return TripleDetailResponse(
            **flat,
            subject=document_response(subject),
            predicate=predicate_response(self._predicate(row["predicate_id"])),
            object=document_response(obj) if obj is not None else None,
        )

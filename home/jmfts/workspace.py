"""Workspace subtrees: append-only, multi-writer; the current view is computed at read time.

A workspace is any subtree whose root (or an ancestor) has usetype ``workspace``. Inside it
documents are records: they are only ever appended (updates and deletes answer 409), and a
record may name the earlier record it ``supersedes``. The view is every record that no later
visible record supersedes, oldest first; a retraction (usetype ``retraction``) supersedes
its record and is itself no part of the view.
"""

from __future__ import annotations

from home.jmfts.access import Principal
from home.jmfts.db import subtree_range
from home.jmfts.errors import InvalidInput
from home.jmfts.models import RETRACTION_USETYPE, WorkspaceView
from home.jmfts.rows import document_response
from home.jmfts.store import DocumentStore


def workspace_view(store: DocumentStore, principal: Principal, doc_id: int) -> WorkspaceView:
    """The current state of the workspace subtree rooted at ``doc_id``."""
    root = store.visible(principal, doc_id)
    if not store.in_workspace(root["path"]):
        raise InvalidInput(f"document {doc_id} is not inside a workspace subtree")
    lo, hi = subtree_range(root["path"])
    rows = store.query(
        principal,
        "d.path >= ? AND d.path < ? AND d.id != ?",
        [lo, hi, doc_id],
        order="d.created_at, d.id",
    )
    superseded = {r["supersedes"] for r in rows if r["supersedes"] is not None}
    current = [
        document_response(r)
        for r in rows
        if r["id"] not in superseded and r["usetype"] != RETRACTION_USETYPE
    ]
    return WorkspaceView(
        workspace_id=doc_id,
        current=current,
        superseded=sorted(i for i in superseded if any(r["id"] == i for r in rows)),
        records=len(rows),
    )

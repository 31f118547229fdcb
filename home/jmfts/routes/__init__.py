"""The HTTP routes, one :class:`fastapi.APIRouter` per resource.

``ROUTERS`` is in registration order, which is also the order paths are matched in
(``/documents/roots`` before ``/documents/{document_id}``) and listed in OpenAPI.
Shared state comes in through :mod:`home.jmfts.routes.dependencies`.
"""

from fastapi import APIRouter

from home.jmfts.routes import access, documents, health, search, triples, workspace

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    documents.router,
    search.router,
    workspace.router,
    access.router,
    triples.router,
)

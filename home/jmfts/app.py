"""The HTTP surface (FastAPI): routes follow the real JMFTS API as its PyPI clients use it.

Every route but ``GET /`` needs a bearer token. Documents a principal was not granted are
absent: every route answers 404 for them, exactly as for ids that never existed.

Every request is counted by outcome in ``app.state.answers`` (the status code as a
string, ``internal`` for an exception no handler named): an unexpected failure is
a 500 with a fixed body, logged in one line, and the next request is served.

The routes live in :mod:`home.jmfts.routes`, one router per resource; this module
assembles them over a store and owns the boundary: the counting middleware and the
handlers that turn exceptions into answers.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from home.jmfts.errors import JmftsError, Unauthorized
from home.jmfts.models import API_VERSION
from home.jmfts.routes import ROUTERS
from home.jmfts.store import DocumentStore

log = logging.getLogger(__name__)


def create_app(store: DocumentStore) -> FastAPI:
    """Build the FastAPI app over an open store."""
    app = FastAPI(
        title="tether JMFTS",
        version=API_VERSION,
        description="Durable, access-controlled memory: documents, search, grants, triples.",
    )
    app.state.store = store
    app.state.triples = store.triples
    app.state.answers = Counter[str]()
    app.middleware("http")(_count_answers)
    app.exception_handler(JmftsError)(_jmfts_error)
    app.exception_handler(OverflowError)(_overflow)
    app.exception_handler(UnicodeEncodeError)(_unicode)
    app.exception_handler(RequestValidationError)(_invalid)
    for router in ROUTERS:
        app.include_router(router)
    return app


async def _count_answers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    answers: Counter[str] = request.app.state.answers
    try:
        response = await call_next(request)
    # The HTTP boundary: counted as internal and answered 500.
    except Exception as exc:  # noqa: BLE001
        answers["internal"] += 1
        log.error("jmfts: %s %s failed: %r", request.method, request.url.path[:200], exc)
        return JSONResponse({"detail": "internal error"}, status_code=500)
    answers[str(response.status_code)] += 1
    return response


async def _jmfts_error(_: Request, exc: JmftsError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)


async def _overflow(_: Request, exc: OverflowError) -> JSONResponse:
    return JSONResponse({"detail": f"integer out of range: {exc}"}, status_code=400)


async def _unicode(_: Request, exc: UnicodeEncodeError) -> JSONResponse:
    return JSONResponse({"detail": f"text is not valid UTF-8: {exc.reason}"}, status_code=400)


async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    # Name the field, never echo the input: it may be megabytes, or not encodable at
    # all (a lone surrogate made the default 422 itself fail with a 500).
    detail = [
        {"loc": [_printable(part) for part in error["loc"]], "msg": error["msg"]}
        for error in exc.errors()
    ]
    return JSONResponse({"detail": detail}, status_code=422)


def _printable(part: object) -> object:
    """One element of an error's location, safe to encode (a key may hold a lone surrogate)."""
    if isinstance(part, str):
        return part.encode("utf-8", "backslashreplace").decode("utf-8")[:200]
    return part

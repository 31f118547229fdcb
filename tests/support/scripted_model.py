"""A scripted OpenAI-compatible model server: a TEST DOUBLE, never a model.

It answers ``POST /v1/chat/completions`` (streaming SSE or one JSON body) with
replies a test scripted in advance — tool calls or text — and records every
request it received, so a test can assert on exactly what τ sent (the token
never among it, the utterances in order, one request per turn).

It is the one double the project allows: everything around it (nats-server,
τ, the extensions, the node) is real.

Scripting: :meth:`ScriptedModel.script` queues :class:`Reply` objects consumed
one per request; when the queue is empty, :attr:`ScriptedModel.responder` (if
set) builds the reply from the request, else the server answers with an empty
assistant message (silence). A reply may wait on an :class:`asyncio.Event` or a
delay before answering, to hold a turn in flight, and a streamed reply may come
in pieces with a pause between them (:meth:`Reply.written`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from shared.lifecycle import cancel_and_wait


@dataclass
class ToolCall:
    """One scripted tool call: the function name and its arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    """One scripted assistant message: text, tool calls, or both (or neither)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    delay_s: float = 0.0
    gate: asyncio.Event | None = None
    status: int = 200
    # Streamed as these pieces of ``text``, ``pause_s`` apart (a model writing as it goes);
    # with ``hold``, every piece after the first waits for that event to be set.
    parts: tuple[str, ...] = ()
    pause_s: float = 0.0
    hold: asyncio.Event | None = None

    @classmethod
    def written(
        cls, *parts: str, pause_s: float = 0.0, hold: asyncio.Event | None = None, **kw: Any
    ) -> Reply:
        """Prose a streaming client receives piece by piece (see ``pause_s`` and ``hold``)."""
        return cls(text="".join(parts), parts=parts, pause_s=pause_s, hold=hold, **kw)

    @classmethod
    def say(cls, text: str, **kw: Any) -> Reply:
        """An assistant message with prose only."""
        return cls(text=text, **kw)

    @classmethod
    def call(cls, name: str, arguments: dict[str, Any], *, text: str = "", **kw: Any) -> Reply:
        """An assistant message that calls one tool (with optional prose beside it)."""
        return cls(text=text, tool_calls=[ToolCall(name, arguments)], **kw)


@dataclass
class RecordedRequest:
    """One request as it arrived: the parsed JSON body and when it arrived."""

    body: dict[str, Any]
    raw: bytes
    at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages the client sent."""
        return list(self.body.get("messages", []))

    @property
    def last_user_text(self) -> str:
        """The text of the last ``user`` message (string or text blocks)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return content_text(message.get("content"))
        return ""

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the client offered."""
        return [t["function"]["name"] for t in self.body.get("tools", []) or []]


def content_text(content: Any) -> str:
    """The plain text of an OpenAI message ``content`` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


Responder = Callable[[RecordedRequest], Reply]


class ScriptedModel:
    """The scripted OpenAI-compatible server on 127.0.0.1 (port 0); use ``async with``."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.requests: list[RecordedRequest] = []
        self.responder = responder
        self._queue: list[Reply] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._arrived = asyncio.Condition()
        self.reply_sent_at: list[float] = []

    @property
    def url(self) -> str:
        """The OpenAI base URL (ends in ``/v1``)."""
        assert self._server is not None, "server not started"
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies, answered one per request in order."""
        self._queue.extend(replies)

    async def wait_requests(self, count: int, timeout_s: float = 30.0) -> None:
        """Wait until at least ``count`` requests have arrived."""
        async with asyncio.timeout(timeout_s), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    async def __aenter__(self) -> ScriptedModel:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            # A connection still open (a reply held at its gate, a client gone without
            # closing) is ended here, not left to the closing loop and the collector.
            await cancel_and_wait(*self._connections, reraise=False)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    # --- HTTP --------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = asyncio.current_task()
        assert connection is not None
        self._connections.add(connection)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                method, path, body = request
                if method == "GET" and path.rstrip("/").endswith("/models"):
                    await _respond_json(writer, {"object": "list", "data": [{"id": "scripted"}]})
                    continue
                if method != "POST" or not path.endswith("/chat/completions"):
                    await _respond_json(writer, {"error": f"no route {method} {path}"}, 404)
                    continue
                keep_open = await self._complete(writer, body)
                if not keep_open:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._connections.discard(connection)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _complete(self, writer: asyncio.StreamWriter, raw: bytes) -> bool:
        body = json.loads(raw)
        recorded = RecordedRequest(body=body, raw=raw, at=time.monotonic())
        async with self._arrived:
            self.requests.append(recorded)
            self._arrived.notify_all()
        if self._queue:
            reply = self._queue.pop(0)
        elif self.responder is not None:
            reply = self.responder(recorded)
        else:
            reply = Reply()
        if reply.status != 200:
            await _respond_json(writer, {"error": {"message": "scripted failure"}}, reply.status)
            return True
        streaming = bool(body.get("stream"))
        if streaming:
            # A streaming server answers with its headers at once and thinks afterwards.
            await _start_sse(writer)
        if reply.gate is not None:
            await reply.gate.wait()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        self.reply_sent_at.append(time.monotonic())
        if streaming:
            await _send_sse(writer, _chunks(reply), reply.pause_s, reply.hold)
            return False
        await _respond_json(writer, _completion(reply))
        return True


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes] | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = await reader.readexactly(length) if length else b""
    return method, path, body


async def _respond_json(writer: asyncio.StreamWriter, data: Any, status: int = 200) -> None:
    payload = json.dumps(data).encode()
    head = (
        f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    writer.write(head.encode() + payload)
    await writer.drain()


async def _start_sse(writer: asyncio.StreamWriter) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Cache-Control: no-cache\r\nConnection: close\r\n\r\n"
    )
    await writer.drain()


async def _send_sse(
    writer: asyncio.StreamWriter,
    chunks: list[dict[str, Any]],
    pause_s: float = 0.0,
    hold: asyncio.Event | None = None,
) -> None:
    # Chunk 0 opens the message, chunk 1 is the first piece: the pieces after it wait.
    for i, chunk in enumerate(chunks):
        if i > 1 and (pause_s or hold is not None):
            await writer.drain()
            if hold is not None:
                await hold.wait()
            await asyncio.sleep(pause_s)
        writer.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    writer.write(b"data: [DONE]\n\n")
    await writer.drain()


def _tool_call_json(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for i, call in enumerate(reply.tool_calls)
    ]


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _completion(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _tool_call_json(reply)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": _USAGE,
    }


def _chunks(reply: Reply) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "scripted",
    }
    chunks: list[dict[str, Any]] = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    ]
    chunks += [
        {**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        for piece in (reply.parts or ((reply.text,) if reply.text else ()))
    ]
    if reply.tool_calls:
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"tool_calls": _tool_call_json(reply)},
                        "finish_reason": None,
                    }
                ],
            }
        )
    chunks.append(
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {},
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                }
            ],
            "usage": _USAGE,
        }
    )
    return chunks


@contextlib.asynccontextmanager
async def scripted_model(responder: Responder | None = None) -> AsyncIterator[ScriptedModel]:
    """``async with scripted_model() as model:`` — start, yield, stop."""
    async with ScriptedModel(responder) as model:
        yield model

"""The memory tools: ``memory_search`` and ``memory_read`` over what the agent is granted.

Loaded by τ by path, for an agent that answers questions about memory (the shipped
``agent.jmfts_operator``). Both tools call JMFTS as the agent's own principal: the
token is read from the node's token file here, never shown to the model, and what
the principal was not granted (its catalog entry's ``memory_reads`` beyond its own
``journal/<agent>`` and ``workspace/<agent>``, granted by ``home up``) answers 404,
so it is absent from every result. Nothing here writes.

Every search is reported like the memory reflex's recall (``memory.recall`` on
``events.workspace.<agent>.out.recall.<device>``, home's NATS only), with the turn's
binding id, so ``home trace`` shows it among the delegation's hops.

Config (``--ext-config memory_tools:KEY=VALUE``): ``limit`` (hits per search, default 5);
run context ``agent``, ``nats_url``, ``binding_file``, ``jmfts_url``,
``jmfts_token_file`` comes from the node.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

from tau_agent_core.tools.base import ToolError

from home.jmfts.client import JmftsClient, read_token_file
from home.jmfts.errors import JmftsError
from home.jmfts.models import (
    DEFAULT_EXCLUDED_USETYPES,
    EXCLUDED_WITH_TURNS,
    memory_kinds_filter,
)
from home.memory.kinds import KINDS, USETYPE_PREFIX, parse_kinds, usetype_kind
from home.tau_extensions.bus_link import BusLink
from home.tau_extensions.errors import ExtensionError
from shared.messages.memory import RecallQuery, RecallReport
from shared.subjects import check_name, rail_pattern, recall_subject

TOUCHES_BUS = True
SUBJECTS = (rail_pattern("recall"),)
RUN_CONTEXT = ("agent", "nats_url", "binding_file", "jmfts_url", "jmfts_token_file")

DEFAULT_LIMIT = 5
# Searched across every subtree the principal may read, so the report names no one root.
GRANTED = "*"
HIT_CHARS = 400

SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to look for, in words"},
        "turns": {
            "type": "boolean",
            "description": "also search the conversations themselves, turn by turn, word for "
            "word (default: only what was remembered, noted or recorded)",
        },
        "kinds": {
            "type": "array",
            "items": {"type": "string", "enum": list(KINDS)},
            "description": "only memories of these kinds (default: everything); e.g. "
            '["preference"] for what the user likes and wants',
        },
    },
    "required": ["query"],
}
READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer", "description": "a document id from memory_search"}},
    "required": ["id"],
}

log = logging.getLogger(__name__)


def render_hits(results: list[dict[str, Any]]) -> str:
    """The hits as the model reads them: id, where it lives, age, and the text."""
    lines = []
    for item in results:
        doc = item.get("document") or {}
        text = str(doc.get("content") or doc.get("title") or "").strip().replace("\n", " ")
        if len(text) > HIT_CHARS:
            text = text[:HIT_CHARS] + f"… (memory_read {doc.get('id')} for the rest)"
        age = f", {item['age']}" if item.get("age") else ""
        usetype = str(doc.get("usetype") or "")
        kind = f", {usetype_kind(usetype)}" if usetype.startswith(USETYPE_PREFIX) else ""
        lines.append(f"[{doc.get('id')}] {item.get('path') or ''}{age}{kind}: {text}")
    return "\n".join(lines) if lines else "Nothing in memory matches that."


class MemoryTools:
    """One agent's read-only view of JMFTS, and its bus link for the search reports."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.agent = check_name(str(config.get("agent", "")), "memory_tools config 'agent'")
        self.jmfts_url = str(config.get("jmfts_url") or "")
        self.token_file = Path(str(config.get("jmfts_token_file") or ""))
        self.limit = int(config.get("limit", DEFAULT_LIMIT))
        self.link = BusLink(
            agent=self.agent,
            nats_url=str(config.get("nats_url", "")),
            binding_file=Path(str(config.get("binding_file", ""))),
            source=f"agent.{self.agent}.memory_tools",
        )
        self.client: JmftsClient | None = None

    async def on_session_start(self, event: dict[str, Any], ctx: Any) -> None:
        """Connect the bus; open the JMFTS client when this run has memory at all."""
        await self.link.connect()
        if not self.jmfts_url or not self.token_file.is_file():
            log.warning("memory_tools: no JMFTS for %s; the tools will say so", self.agent)
            return
        self.client = JmftsClient(self.jmfts_url, token=read_token_file(self.token_file))

    async def on_session_shutdown(self, event: dict[str, Any], ctx: Any) -> None:
        """Close the client and the bus."""
        if self.client is not None:
            await self.client.close()
        await self.link.close()

    def _client(self, tool: str) -> JmftsClient:
        if self.client is None:
            raise ToolError(f"{tool}: memory is not available in this run (JMFTS is not running)")
        return self.client

    async def search(
        self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any, ctx: Any
    ) -> dict[str, Any]:
        """``memory_search``: the nearest documents by meaning (not the conversations'
        own turns unless ``turns`` is true), then the report."""
        query = params.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError(f"memory_search: 'query' must be non-empty text, got {query!r}")
        turns = params.get("turns", False)
        if not isinstance(turns, bool):
            raise ToolError(f"memory_search: 'turns' must be true or false, got {turns!r}")
        try:
            kinds = parse_kinds(params.get("kinds"))
        except ValueError as exc:
            raise ToolError(f"memory_search: 'kinds': {exc}") from exc
        client = self._client("memory_search")
        began = time.monotonic()
        excluded = DEFAULT_EXCLUDED_USETYPES if turns else EXCLUDED_WITH_TURNS
        # Kinds ask for memories only: no records, notes or turns, whatever ``turns`` says.
        usetype, exclude_types = (
            (None, list(excluded)) if kinds is None else memory_kinds_filter(kinds)
        )
        try:
            answer = await client.search(
                query.strip(),
                "vector",
                self.limit,
                threshold=0.0,
                usetype=usetype,
                exclude_types=exclude_types,
            )
        except JmftsError as exc:
            await self._report(query, [], time.monotonic() - began, str(exc))
            raise ToolError(f"memory_search: {exc}") from exc
        results = [r for r in answer.get("results", []) if isinstance(r, dict)]
        await self._report(query, results, time.monotonic() - began, None)
        return {"content": [{"type": "text", "text": render_hits(results)}]}

    async def read(
        self, tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any, ctx: Any
    ) -> dict[str, Any]:
        """``memory_read``: one document's whole text."""
        doc_id = params.get("id")
        if not isinstance(doc_id, int) or isinstance(doc_id, bool):
            raise ToolError(f"memory_read: 'id' must be a document id, got {doc_id!r}")
        try:
            doc = await self._client("memory_read").get(doc_id)
        except JmftsError as exc:
            raise ToolError(f"memory_read: {exc}") from exc
        where = doc.titled_path or f"#{doc.id}"
        return {"content": [{"type": "text", "text": f"[{doc.id}] {where}: {doc.content or ''}"}]}

    async def _report(
        self, query: str, results: list[dict[str, Any]], elapsed_s: float, error: str | None
    ) -> None:
        """Publish the search on ``out.recall.<device>`` (nothing when the turn has no device)."""
        try:
            binding = self.link.binding()
            if binding.device is None:
                return
            ids = tuple(
                int(r["document"]["id"]) for r in results if isinstance(r.get("document"), dict)
            )
            report = RecallReport(
                search_id=uuid.uuid4().hex,
                queries=(RecallQuery(GRANTED, query),),
                scores=tuple(float(r.get("score", 0.0)) for r in results),
                document_ids=ids,
                injected_ids=ids,
                passed=len(ids),
                threshold=0.0,
                latency_ms=round(elapsed_s * 1000, 1),
                errors=() if error is None else (error,),
                failed_roots=() if error is None else (GRANTED,),
                agent=self.agent,
            )
            event = self.link.event(report, binding)
            await self.link.publish(recall_subject(self.agent, binding.device), event)
        except (ExtensionError, ValueError, KeyError, TypeError) as exc:
            # A report is an account, never a reason to fail the search it reports.
            log.warning("memory_tools: search report not published: %s", exc)


def register(api: Any) -> None:
    """Register ``memory_search`` and ``memory_read`` on τ's extension API."""
    tools = MemoryTools(api.config)
    api.on("session_start", tools.on_session_start)
    api.on("session_shutdown", tools.on_session_shutdown)
    api.register_tool(
        {
            "name": "memory_search",
            "description": (
                "Search the memory you may read (notes, records and memories of the agents "
                "you answer for). Returns the nearest documents, each with its id."
            ),
            "parameters": SEARCH_SCHEMA,
            "execute": tools.search,
        }
    )
    api.register_tool(
        {
            "name": "memory_read",
            "description": "Read one memory document in full, by the id memory_search gave.",
            "parameters": READ_SCHEMA,
            "execute": tools.read,
        }
    )

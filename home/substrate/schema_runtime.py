"""Activation schemas at run time: apply, unapply, ref-counted nodes, degraded and restored.

Applying a schema checks it against the catalog and the active schemas (rail
overlap), starts the nodes it requires that no active schema runs yet, and
routes its bindings; unapplying reverses exactly that. A schema's state is
derived from its nodes: ``degraded`` (with the reason) while any is failed or
unavailable, ``starting`` while any is not yet running, else ``active``.
The active set is saved in the data directory and re-applied by the next
``home up``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from home.substrate.errors import OverlapRefused, SchemaNotFound, SchemaRuntimeError
from home.substrate.launchers import LaunchContext, Launcher
from home.substrate.nodes import DEGRADING_STATES, RUNNING, NodeRunner
from home.substrate.overlap import find_overlap
from home.substrate.router import Router
from home.substrate.routing import Route, delivery_subject
from shared.errors import SchemaError
from shared.files import write_atomic
from shared.schema import ActivationSchema, NodeCatalog, NodeSpec
from shared.schema.activation import check_against_catalog, parse_activation_schema
from shared.yaml_source import parse_yaml

log = logging.getLogger(__name__)

ACTIVE, STARTING, DEGRADED = "active", "starting", "degraded"
SAVED_FILE = "active-schemas.json"

StatusPublisher = Callable[[str, str, str, str], Awaitable[None]]
# Gives the bus rights to exactly these nodes and routes (home.substrate.bus_auth).
Authorize = Callable[[Sequence[NodeSpec], Sequence[Route]], Awaitable[None]]
# Readies what a node needs before its first start (an agent's durable inbox).
Prepare = Callable[[NodeSpec], Awaitable[None]]


@dataclass(frozen=True)
class SchemaSource:
    """An activation schema as sent to the runtime: its file name and YAML text."""

    file: str
    text: str


@dataclass
class ActiveSchema:
    """One applied schema and what the runtime knows of it."""

    schema: ActivationSchema
    source: SchemaSource
    allow_overlap: bool
    state: str = STARTING
    reason: str = ""

    def view(self) -> dict[str, Any]:
        """A JSON-ready view for `home schema list`."""
        return {
            "name": self.schema.name,
            "file": self.schema.file,
            "state": self.state,
            "reason": self.reason,
            "nodes": list(self.schema.nodes),
            "bindings": [{"from": b.from_, "to": b.to} for b in self.schema.bindings],
            "allow_overlap": self.allow_overlap,
        }


class SchemaRuntime:
    """The active schemas of one home, their nodes and their routes."""

    def __init__(
        self,
        *,
        catalog: NodeCatalog,
        schema_dir: Path,
        launchers: Mapping[str, Launcher],
        router: Router,
        launch_context: Callable[[str], LaunchContext],
        publish_status: StatusPublisher,
        saved_file: Path | None = None,
        health_interval_s: float = 1.0,
        authorize: Authorize | None = None,
        prepare: Prepare | None = None,
    ) -> None:
        self.catalog = catalog
        self.schema_dir = schema_dir
        self._launchers = launchers
        self.router = router
        self._launch_context = launch_context
        self._publish_status = publish_status
        self._saved_file = saved_file
        self._health_interval_s = health_interval_s
        self._authorize = authorize
        self._prepare = prepare
        self.active: dict[str, ActiveSchema] = {}
        self.runners: dict[str, NodeRunner] = {}
        self.refs: dict[str, set[str]] = {}
        # apply and unapply arrive on separate subscriptions; one change at a time.
        self._changing = asyncio.Lock()

    # --- sources -------------------------------------------------------------------

    def source_by_name(self, name: str) -> SchemaSource:
        """The shipped (or configured) schema ``name`` from the schema directory."""
        # Looked up among the directory's files, never joined onto a path: a name from
        # the bus cannot reach outside the directory or be too long for the filesystem.
        schemas = {p.stem: p for p in self.schema_dir.glob("*.yaml") if p.is_file()}
        path = schemas.get(name)
        if path is None:
            known = sorted(schemas)
            raise SchemaNotFound(
                f"no activation schema named {name!r} in {self.schema_dir}; "
                f"known: {', '.join(known) or 'none'}"
            )
        return SchemaSource(str(path), path.read_text(encoding="utf-8"))

    def parse(self, source: SchemaSource) -> ActivationSchema:
        """Parse and check a schema against the catalog; SchemaError lists every issue."""
        schema = parse_activation_schema(parse_yaml(source.text, source.file), source.file)
        issues = check_against_catalog(schema, self.catalog)
        if issues:
            raise SchemaError(issues)
        return schema

    # --- apply / unapply -------------------------------------------------------------

    async def apply(self, source: SchemaSource, allow_overlap: bool = False) -> dict[str, Any]:
        """Apply a schema: refuse overlap, start its nodes (ref-counted), route its bindings."""
        async with self._changing:
            return await self._apply(source, allow_overlap)

    async def unapply(self, name: str, *, forget: bool = True) -> dict[str, Any]:
        """Unroute a schema's bindings and stop the nodes no other active schema needs.

        ``forget``: its bindings' consumers go too (its user unapplied it). A member that
        stops it because another member runs it, or fences, keeps them: whoever runs the
        schema routes on from where they stand."""
        async with self._changing:
            return await self._unapply(name, forget)

    async def _apply(self, source: SchemaSource, allow_overlap: bool) -> dict[str, Any]:
        schema = self.parse(source)
        if schema.name in self.active:
            raise SchemaRuntimeError(
                f"schema {schema.name!r} is already active; unapply it first to re-apply"
            )
        for node in schema.nodes:
            if self.catalog[node].runs_on != "home":
                raise SchemaRuntimeError(
                    f"schema {schema.name!r} requires node {node}, which runs on "
                    f"{self.catalog[node].runs_on}; home starts only home nodes"
                )
        if not allow_overlap:
            overlap = find_overlap(
                schema, {n: a.schema for n, a in self.active.items()}, self.catalog
            )
            if overlap is not None:
                raise OverlapRefused(overlap.message())
        entry = ActiveSchema(schema, source, allow_overlap)
        self.active[schema.name] = entry
        try:
            # Before any of its nodes connects, and before the router subscribes its bindings.
            await self._grant()
        except BaseException:
            self.active.pop(schema.name)
            raise
        for node in schema.nodes:
            holders = self.refs.setdefault(node, set())
            holders.add(schema.name)
            if node not in self.runners:
                await self._start_node(node)
        await self.router.add_routes(schema.name, self._routes(schema))
        await self._refresh(schema.name, force=True)
        self._save()
        log.info("applied schema %s", schema.name)
        return entry.view()

    async def _unapply(self, name: str, forget: bool) -> dict[str, Any]:
        entry = self.active.pop(name, None)
        if entry is None:
            raise SchemaNotFound(
                f"schema {name!r} is not active; active: {', '.join(self.active) or 'none'}"
            )
        await self.router.remove_routes(name, forget=forget)
        for node in entry.schema.nodes:
            holders = self.refs.get(node, set())
            holders.discard(name)
            if not holders:
                self.refs.pop(node, None)
                runner = self.runners.pop(node, None)
                if runner is not None:
                    await runner.close()
        entry.state, entry.reason = "unapplied", ""
        await self._grant()
        await self._publish_status("schema", name, "unapplied", "")
        self._save()
        log.info("unapplied schema %s", name)
        return entry.view()

    async def restore_saved(self) -> list[str]:
        """Re-apply the schemas that were active when the last home stopped."""
        if self._saved_file is None or not self._saved_file.exists():
            return []
        try:
            saved = json.loads(self._saved_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            log.error("cannot read %s, no schemas restored: %s", self._saved_file, exc)
            return []
        restored = []
        for item in saved:
            try:
                source = SchemaSource(str(item["file"]), str(item["text"]))
                await self.apply(source, bool(item.get("allow_overlap", False)))
                restored.append(str(item["file"]))
            except (KeyError, TypeError, SchemaError, SchemaRuntimeError) as exc:
                log.error("could not restore a saved schema: %s", exc)
        return restored

    async def close(self) -> None:
        """Stop every node (the active set stays saved for the next start)."""
        for name in list(self.active):
            await self.router.remove_routes(name)
        await asyncio.gather(*(runner.close() for runner in self.runners.values()))
        self.runners.clear()

    def list(self) -> list[dict[str, Any]]:
        """Every active schema with its state."""
        return [entry.view() for entry in self.active.values()]

    def _routes(self, schema: ActivationSchema) -> tuple[Route, ...]:
        return tuple(
            Route(schema.name, b.from_, b.to, delivery_subject(self.catalog[b.to]))
            for b in schema.bindings
        )

    async def _grant(self) -> None:
        """Bus rights for the nodes and routes of the active schemas, and no others."""
        if self._authorize is None:
            return
        nodes = {n for entry in self.active.values() for n in entry.schema.nodes}
        routes = [r for entry in self.active.values() for r in self._routes(entry.schema)]
        await self._authorize([self.catalog[n] for n in sorted(nodes)], routes)

    # --- node state → schema state ------------------------------------------------------

    async def _start_node(self, node: str) -> None:
        spec = self.catalog[node]
        if self._prepare is not None:
            await self._prepare(spec)
        runner = NodeRunner(
            spec,
            self._launchers.get(spec.kind),
            self._launch_context(node),
            self._on_node_change,
            self._health_interval_s,
        )
        self.runners[node] = runner
        await runner.start()

    async def _on_node_change(self, runner: NodeRunner) -> None:
        await self._publish_status("node", runner.spec.name, runner.state, runner.reason)
        for name in sorted(self.refs.get(runner.spec.name, ())):
            await self._refresh(name)

    async def _refresh(self, name: str, force: bool = False) -> None:
        entry = self.active.get(name)
        if entry is None:
            return
        state, reason = self._derive(entry.schema)
        if force or (state, reason) != (entry.state, entry.reason):
            entry.state, entry.reason = state, reason
            await self._publish_status("schema", name, state, reason)

    def _derive(self, schema: ActivationSchema) -> tuple[str, str]:
        runners = [self.runners[n] for n in schema.nodes if n in self.runners]
        bad = [r for r in runners if r.state in DEGRADING_STATES]
        if bad:
            return DEGRADED, "; ".join(f"{r.spec.name} {r.state}: {r.reason}" for r in bad)
        waiting = [r for r in runners if r.state != RUNNING]
        if waiting:
            return STARTING, "waiting for " + ", ".join(
                f"{r.spec.name} ({r.state})" for r in waiting
            )
        return ACTIVE, ""

    def _save(self) -> None:
        if self._saved_file is None:
            return
        items = [
            {"file": a.source.file, "text": a.source.text, "allow_overlap": a.allow_overlap}
            for a in self.active.values()
        ]
        write_atomic(self._saved_file, json.dumps(items, indent=2))

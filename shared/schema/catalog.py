"""The node catalog: every node's kind, where it runs, its rails, extensions and restart policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.schema import fields
from shared.yaml_source import LocatedDict, Reader, load_yaml

NODE_KINDS = ("tau_agent", "tau_bus_agent", "effector", "edge_audio", "edge_tui", "service")
RUNS_ON = ("home", "edge")


@dataclass(frozen=True)
class RestartPolicy:
    """At most ``max_restarts`` within ``window_s``; waits grow from ``backoff_s`` to the max."""

    max_restarts: int = 5
    window_s: float = 60.0
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0


@dataclass(frozen=True)
class ExtensionSpec:
    """One τ extension file handed to an agent by path, with its config."""

    name: str
    path: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeSpec:
    """One node of the catalog."""

    name: str
    kind: str
    runs_on: str
    publishes: tuple[str, ...]
    subscribes: tuple[str, ...]
    extensions: tuple[ExtensionSpec, ...] = ()
    restart_policy: RestartPolicy = RestartPolicy()
    wall_clock_s: float = 120.0
    device: str | None = None
    description: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    # JMFTS subtrees an agent's principal may read beyond its own (``home up`` grants them).
    memory_reads: tuple[str, ...] = ()
    # JMFTS subtrees it may write beyond its own (the curator's: the memories it curates).
    memory_writes: tuple[str, ...] = ()
    line: int | None = None

    @property
    def agent(self) -> str | None:
        """The agent token of a τ node (``agent.edge_asr`` → ``edge_asr``), else None."""
        if self.kind in ("tau_agent", "tau_bus_agent") and "." in self.name:
            return self.name.split(".", 1)[1]
        return None


@dataclass(frozen=True)
class NodeCatalog:
    """Every node tether knows how to run, by name."""

    file: str
    nodes: dict[str, NodeSpec]

    def __getitem__(self, name: str) -> NodeSpec:
        return self.nodes[name]

    def __contains__(self, name: object) -> bool:
        return name in self.nodes


_NODE_KEYS = (
    "kind",
    "runs_on",
    "device",
    "description",
    "publishes",
    "subscribes",
    "extensions",
    "restart_policy",
    "wall_clock_s",
    "memory_reads",
    "memory_writes",
    "config",
)


def load_node_catalog(path: str | Path) -> NodeCatalog:
    """Load and validate a node catalog YAML file."""
    return parse_node_catalog(load_yaml(path), str(path))


def parse_node_catalog(doc: Any, file: str) -> NodeCatalog:
    """Validate an already-parsed catalog document."""
    r = Reader(file)
    top = r.mapping(doc, "")
    r.allow_keys(top, "", ("catalog", "nodes"))
    r.get(top, "catalog", "", str)
    nodes_doc = r.mapping(top.get("nodes"), "nodes", top, "nodes") if "nodes" in top else None
    if nodes_doc is None:
        r.issue(top, None, "nodes", "is required but missing")
        nodes_doc = LocatedDict()
        nodes_doc.key_lines = {}
    nodes: dict[str, NodeSpec] = {}
    for name, body in nodes_doc.items():
        path = f"nodes.{name}"
        problem = fields.node_name(name)
        if problem:
            r.issue(nodes_doc, name, path, problem)
            continue
        node = r.mapping(body, path, nodes_doc, name)
        nodes[name] = _parse_node(r, name, node, path, nodes_doc.key_lines.get(name))
    r.raise_if_any()
    return NodeCatalog(file=file, nodes=nodes)


def _parse_node(r: Reader, name: str, node: LocatedDict, path: str, line: int | None) -> NodeSpec:
    r.allow_keys(node, path, _NODE_KEYS)
    kind = r.get(node, "kind", path, str, "service", check=fields.one_of(*NODE_KINDS))
    runs_on = r.get(node, "runs_on", path, str, "home", check=fields.one_of(*RUNS_ON))
    device = r.get(node, "device", path, str, None, required=False, check=fields.name_token)
    if kind in ("edge_audio", "edge_tui") and device is None and "device" not in node:
        r.issue(node, None, f"{path}.device", f"is required for a node of kind {kind}")
    if kind in ("tau_agent", "tau_bus_agent") and not name.startswith("agent."):
        r.issue(node, "kind", f"{path}.kind", "agent nodes are named 'agent.<agent>'")
    publishes = r.str_list(node, "publishes", path, required=False, check=fields.subject_pattern)
    subscribes = r.str_list(node, "subscribes", path, required=False, check=fields.subject_pattern)
    extensions: list[ExtensionSpec] = []
    ext_list = node.get("extensions") or []
    if not isinstance(ext_list, list):
        r.issue(node, "extensions", f"{path}.extensions", "expected a list")
        ext_list = []
    for i, ext in enumerate(ext_list):
        ext_path = f"{path}.extensions[{i}]"
        ext_map = r.mapping(ext, ext_path, ext_list, i)
        r.allow_keys(ext_map, ext_path, ("name", "path", "config"))
        extensions.append(
            ExtensionSpec(
                name=r.get(ext_map, "name", ext_path, str, ""),
                path=r.get(ext_map, "path", ext_path, str, ""),
                config=dict(r.get(ext_map, "config", ext_path, dict, {}, required=False)),
            )
        )
    policy = RestartPolicy()
    if "restart_policy" in node:
        rp_path = f"{path}.restart_policy"
        rp = r.mapping(node["restart_policy"], rp_path, node, "restart_policy")
        r.allow_keys(rp, rp_path, ("max_restarts", "window_s", "backoff_s", "backoff_max_s"))
        number = (int, float)
        policy = RestartPolicy(
            max_restarts=r.get(
                rp, "max_restarts", rp_path, int, 5, required=False, check=fields.non_negative
            ),
            window_s=float(
                r.get(rp, "window_s", rp_path, number, 60.0, required=False, check=fields.positive)
            ),
            backoff_s=float(
                r.get(
                    rp, "backoff_s", rp_path, number, 0.5, required=False, check=fields.non_negative
                )
            ),
            backoff_max_s=float(
                r.get(
                    rp,
                    "backoff_max_s",
                    rp_path,
                    number,
                    10.0,
                    required=False,
                    check=fields.non_negative,
                )
            ),
        )
    reads = _memory_grants(r, node, "memory_reads", path, kind)
    writes = _memory_grants(r, node, "memory_writes", path, kind)
    wall = r.get(
        node, "wall_clock_s", path, (int, float), 120.0, required=False, check=fields.positive
    )
    return NodeSpec(
        name=name,
        kind=kind,
        runs_on=runs_on,
        device=device,
        description=r.get(node, "description", path, str, "", required=False),
        publishes=tuple(s for s, _ in publishes),
        subscribes=tuple(s for s, _ in subscribes),
        extensions=tuple(extensions),
        restart_policy=policy,
        wall_clock_s=float(wall),
        config=dict(r.get(node, "config", path, dict, {}, required=False)),
        memory_reads=reads,
        memory_writes=writes,
        line=line,
    )


def _memory_grants(r: Reader, node: LocatedDict, key: str, path: str, kind: str) -> tuple[str, ...]:
    """A node's ``memory_reads`` or ``memory_writes``: subtree paths, for an agent only."""
    given = r.str_list(node, key, path, required=False, check=fields.memory_path)
    if given and kind not in ("tau_agent", "tau_bus_agent"):
        r.issue(node, key, f"{path}.{key}", "only agents have a principal")
    return tuple(p for p, _ in given)

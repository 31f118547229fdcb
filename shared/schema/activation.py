"""Activation schemas: which nodes a schema requires and which subjects it binds to them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.errors import SchemaIssue
from shared.schema import fields
from shared.schema.catalog import NodeCatalog
from shared.subjects import REPORT_RAILS, overlaps
from shared.yaml_source import Reader, load_yaml

# Report rails are for monitors only: binding one back into a node would feed an
# agent its own past-tense accounts (docs/architecture.md "Subjects").
REPORT_PATTERNS = tuple(f"events.workspace.*.out.{rail}.*" for rail in REPORT_RAILS)


@dataclass(frozen=True)
class Binding:
    """Events on ``from_`` are delivered to node ``to``."""

    from_: str
    to: str
    line: int | None = None


@dataclass(frozen=True)
class ActivationSchema:
    """One activation schema: ``schema: NAME``, ``requires.nodes``, ``bindings``."""

    file: str
    name: str
    nodes: tuple[str, ...]
    bindings: tuple[Binding, ...]
    description: str = ""
    node_lines: tuple[int | None, ...] = ()


def load_activation_schema(path: str | Path) -> ActivationSchema:
    """Load and validate an activation schema YAML file."""
    return parse_activation_schema(load_yaml(path), str(path))


def parse_activation_schema(doc: Any, file: str) -> ActivationSchema:
    """Validate an already-parsed activation schema document."""
    r = Reader(file)
    top = r.mapping(doc, "")
    r.allow_keys(top, "", ("schema", "description", "requires", "bindings"))
    name = r.get(top, "schema", "", str, "", check=fields.name_token)
    description = r.get(top, "description", "", str, "", required=False)
    requires = r.mapping(top.get("requires"), "requires", top, "requires")
    r.allow_keys(requires, "requires", ("nodes",))
    nodes = r.str_list(requires, "nodes", "requires", check=fields.node_name)
    seen: set[str] = set()
    for node, line in nodes:
        if node in seen:
            r.issues.append(SchemaIssue(file, line, "requires.nodes", f"{node!r} listed twice"))
        seen.add(node)
    bindings: list[Binding] = []
    raw_bindings = top.get("bindings")
    if not isinstance(raw_bindings, list):
        r.issue(
            top,
            "bindings" if "bindings" in top else None,
            "bindings",
            "is required: a list of {from: SUBJECT, to: NODE}",
        )
        raw_bindings = []
    for i, item in enumerate(raw_bindings):
        path = f"bindings[{i}]"
        b = r.mapping(item, path, raw_bindings, i)
        r.allow_keys(b, path, ("from", "to"))
        src = r.get(b, "from", path, str, "", check=fields.subject_pattern)
        dst = r.get(b, "to", path, str, "", check=fields.node_name)
        line = b.key_lines.get("from", b.line) if b else None
        if src:
            for report in REPORT_PATTERNS:
                if overlaps(src, report):
                    r.issue(
                        b,
                        "from",
                        f"{path}.from",
                        f"{src!r} would bind a report rail ({report}); reports are for "
                        "monitors and may never be bound back into a node",
                    )
                    break
        if dst and dst not in seen:
            r.issue(b, "to", f"{path}.to", f"binds to {dst!r}, which requires.nodes does not list")
        bindings.append(Binding(from_=src, to=dst, line=line))
    r.raise_if_any()
    return ActivationSchema(
        file=file,
        name=name,
        nodes=tuple(n for n, _ in nodes),
        node_lines=tuple(line for _, line in nodes),
        bindings=tuple(bindings),
        description=description,
    )


def check_against_catalog(schema: ActivationSchema, catalog: NodeCatalog) -> list[SchemaIssue]:
    """Issues for every node the schema requires that the catalog does not define."""
    return [
        SchemaIssue(
            schema.file,
            line,
            "requires.nodes",
            f"node {node!r} is not in the node catalog ({catalog.file})",
        )
        for node, line in zip(schema.nodes, schema.node_lines, strict=True)
        if node not in catalog
    ]

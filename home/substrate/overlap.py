"""Rail overlap between activation schemas, as a pure function.

Two schemas overlap when a node of one and a *different* node of the other
publish the same rail for the same device: two agents would both speak to the
board. A node shared by both schemas is one process (ref-counted), so it is no
conflict. The agent token is not part of the rail: ``events.workspace.a.out.speak.tui``
and ``events.workspace.b.out.speak.tui`` are one rail, the TUI's speaker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.schema import ActivationSchema, NodeCatalog
from shared.subjects import intersection, split_subject


@dataclass(frozen=True)
class Overlap:
    """``new_schema``'s ``new_node`` and ``active_schema``'s ``active_node`` share ``rail``."""

    new_schema: str
    new_node: str
    active_schema: str
    active_node: str
    rail: str

    def message(self) -> str:
        """The refusal, naming both schemas and the rail."""
        return (
            f"schema {self.new_schema!r} would publish rail {self.rail} (node {self.new_node}), "
            f"which active schema {self.active_schema!r} already publishes (node "
            f"{self.active_node}); unapply {self.active_schema!r} first, or pass --allow-overlap"
        )


def rail_pattern(publish: str) -> str:
    """``publish`` with the agent token of a ``events.workspace.<agent>.out`` rail wildcarded."""
    tokens = split_subject(publish)
    if len(tokens) >= 4 and tokens[:2] == ["events", "workspace"] and tokens[3] == "out":
        tokens[2] = "*"
    return ".".join(tokens)


def find_overlap(
    schema: ActivationSchema,
    active: Mapping[str, ActivationSchema],
    catalog: NodeCatalog,
) -> Overlap | None:
    """The first rail ``schema`` would share with an active schema, if any."""
    for other in active.values():
        if other.name == schema.name:
            continue
        shared_nodes = set(schema.nodes) & set(other.nodes)
        for new_node in schema.nodes:
            if new_node in shared_nodes or new_node not in catalog:
                continue
            for old_node in other.nodes:
                if old_node in shared_nodes or old_node not in catalog:
                    continue
                for new_pub in catalog[new_node].publishes:
                    for old_pub in catalog[old_node].publishes:
                        rail = intersection(rail_pattern(new_pub), rail_pattern(old_pub))
                        if rail is not None:
                            return Overlap(schema.name, new_node, other.name, old_node, rail)
    return None

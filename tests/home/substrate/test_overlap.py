"""Rail overlap between schemas: refused naming both schemas and the rail."""

from __future__ import annotations

from home.substrate.config import DEFAULT_CATALOG, DEFAULT_SCHEMA_DIR
from home.substrate.overlap import find_overlap, rail_pattern
from shared.schema import ActivationSchema, NodeCatalog, load_activation_schema, load_node_catalog
from shared.schema.catalog import NodeSpec


def test_shipped_schemas_overlap_on_the_agents_rails() -> None:
    catalog = load_node_catalog(DEFAULT_CATALOG)
    edge_asr = load_activation_schema(DEFAULT_SCHEMA_DIR / "edge_asr.yaml")
    memory = load_activation_schema(DEFAULT_SCHEMA_DIR / "edge_asr_memory.yaml")
    overlap = find_overlap(memory, {"edge_asr": edge_asr}, catalog)
    assert overlap is not None
    assert (overlap.new_schema, overlap.active_schema) == ("edge_asr_memory", "edge_asr")
    assert (overlap.new_node, overlap.active_node) == ("agent.edge_asr_memory", "agent.edge_asr")
    assert overlap.rail == "events.workspace.*.out.>"
    message = overlap.message()
    assert "'edge_asr_memory'" in message and "'edge_asr'" in message
    assert "events.workspace.*.out.>" in message and "--allow-overlap" in message


def spec(name: str, *publishes: str) -> NodeSpec:
    return NodeSpec(name=name, kind="service", runs_on="home", publishes=publishes, subscribes=())


def schema(name: str, *nodes: str) -> ActivationSchema:
    return ActivationSchema(file=f"{name}.yaml", name=name, nodes=nodes, bindings=())


CATALOG = NodeCatalog(
    file="test",
    nodes={
        n.name: n
        for n in (
            spec("a", "events.workspace.a.out.speak.tui"),
            spec("b", "events.workspace.b.out.speak.board"),
            spec("c", "events.workspace.c.out.speak.*"),
            spec("shared", "events.journal.append.*"),
            spec("quiet"),
        )
    },
)


def test_same_rail_different_devices_is_no_overlap() -> None:
    assert find_overlap(schema("s2", "b"), {"s1": schema("s1", "a")}, CATALOG) is None


def test_any_device_overlaps_one_device() -> None:
    overlap = find_overlap(schema("s2", "c"), {"s1": schema("s1", "a")}, CATALOG)
    assert overlap is not None and overlap.rail == "events.workspace.*.out.speak.tui"


def test_a_node_shared_by_both_schemas_is_no_overlap() -> None:
    active = {"s1": schema("s1", "a", "shared")}
    assert find_overlap(schema("s2", "b", "shared"), active, CATALOG) is None


def test_a_schema_does_not_overlap_itself_and_quiet_nodes_never_do() -> None:
    assert find_overlap(schema("s1", "a"), {"s1": schema("s1", "a")}, CATALOG) is None
    assert find_overlap(schema("s2", "quiet"), {"s1": schema("s1", "a")}, CATALOG) is None


def test_rail_pattern_wildcards_only_the_agent_token() -> None:
    assert rail_pattern("events.workspace.x.out.speak.tui") == "events.workspace.*.out.speak.tui"
    assert rail_pattern("events.journal.append.*") == "events.journal.append.*"
    assert rail_pattern("events.workspace.x.in") == "events.workspace.x.in"

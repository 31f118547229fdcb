"""The YAML loaders: shipped documents, named errors with file/line/key, JSON Schema agreement."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.errors import SchemaError
from shared.schema import (
    ActivationSchema,
    BridgeHalf,
    NodeCatalog,
    load_activation_schema,
    load_bridge_half,
    load_document,
    load_node_catalog,
)
from shared.schema.activation import check_against_catalog, parse_activation_schema
from shared.schema.bridge_half import parse_bridge_half, ssh_fingerprint
from shared.schema.catalog import parse_node_catalog
from shared.yaml_source import MAX_FLOW_DEPTH, LocatedDict, Reader, parse_yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
JSON_SCHEMAS = {
    "catalog": json.loads((SCHEMAS / "json/node-catalog.schema.json").read_text()),
    "schema": json.loads((SCHEMAS / "json/activation-schema.schema.json").read_text()),
    "bridge": json.loads((SCHEMAS / "json/bridge-half.schema.json").read_text()),
}
PARSERS = {
    "catalog": parse_node_catalog,
    "schema": parse_activation_schema,
    "bridge": parse_bridge_half,
}
SHIPPED = sorted(SCHEMAS.glob("**/*.yaml"))


def _kind_of(path: Path) -> str:
    data = yaml.safe_load(path.read_text())
    return next(k for k in ("catalog", "schema", "bridge") if k in data)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(SCHEMAS)))
def test_shipped_documents_load_and_satisfy_their_json_schema(path: Path) -> None:
    doc = load_document(path)
    assert isinstance(doc, NodeCatalog | ActivationSchema | BridgeHalf)
    jsonschema.Draft202012Validator(JSON_SCHEMAS[_kind_of(path)]).validate(
        yaml.safe_load(path.read_text())
    )


def test_json_schemas_are_valid_draft_2020_12() -> None:
    for schema in JSON_SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_shipped_catalog_has_the_design_nodes() -> None:
    catalog = load_node_catalog(SCHEMAS / "nodes.yaml")
    assert {
        "edge.audio.board",
        "edge.audio.tui",
        "agent.edge_asr",
        "agent.edge_asr_memory",
        "agent.jmfts_operator",
        "effector.journal_append",
        "effector.jmfts_write",
    } <= set(catalog.nodes)
    assert catalog["edge.audio.board"].device == "board"
    assert catalog["edge.audio.tui"].device == "tui"
    assert catalog["agent.edge_asr"].agent == "edge_asr"
    assert catalog["agent.edge_asr"].restart_policy.max_restarts == 5


def test_shipped_schemas_need_only_catalog_nodes_and_bind_any_device() -> None:
    catalog = load_node_catalog(SCHEMAS / "nodes.yaml")
    for name in ("edge_asr", "edge_asr_memory"):
        schema = load_activation_schema(SCHEMAS / f"activation/{name}.yaml")
        assert check_against_catalog(schema, catalog) == []
        assert schema.bindings[0].from_ == "events.sensation.*.turn"
        assert schema.bindings[0].to == f"agent.{name}"


def test_the_two_shipped_schemas_differ_by_one_node_name_and_the_curator() -> None:
    plain = (SCHEMAS / "activation/edge_asr.yaml").read_text()
    memory = (SCHEMAS / "activation/edge_asr_memory.yaml").read_text()
    assert plain != memory
    # Only the agent that remembers has memories to curate.
    curator = "    - agent.memory_curator\n"
    assert curator in memory
    assert memory.replace(curator, "").replace("edge_asr_memory", "edge_asr") == plain


def test_the_operator_reads_what_the_asking_agents_write() -> None:
    catalog = load_node_catalog(SCHEMAS / "nodes.yaml")
    reads = set(catalog["agent.jmfts_operator"].memory_reads)
    for asker in ("edge_asr", "edge_asr_memory"):
        assert {f"workspace/{asker}", f"journal/{asker}"} <= reads
    assert all(
        not n.memory_reads for n in catalog.nodes.values() if n.name != "agent.jmfts_operator"
    )


@pytest.mark.parametrize("key", ["memory_reads", "memory_writes"])
def test_only_an_agent_may_declare_memory_grants(key: str) -> None:
    text = CATALOG_OK + (
        f"  effector.x:\n    kind: effector\n    runs_on: home\n    {key}: [workspace/a]\n"
    )
    with pytest.raises(SchemaError) as info:
        PARSERS["catalog"](parse_yaml(text, "doc.yaml"), "doc.yaml")
    (issue,) = info.value.issues
    assert (issue.key, issue.line) == (f"nodes.effector.x.{key}", 9)


def test_check_against_catalog_names_unknown_nodes() -> None:
    catalog = load_node_catalog(SCHEMAS / "nodes.yaml")
    schema = parse_activation_schema(
        parse_yaml("schema: s\nrequires:\n  nodes: [agent.ghost]\nbindings: []\n", "s.yaml"),
        "s.yaml",
    )
    (issue,) = check_against_catalog(schema, catalog)
    assert issue.line == 3
    assert "agent.ghost" in issue.message


BRIDGE_OK = """\
bridge: board
side: edge
device: board
connect:
  host: 127.0.0.1
  port: 2222
exports:
  - events.sensation.board.turn
imports:
  - events.workspace.*.out.speak.board
"""

SCHEMA_OK = """\
schema: s
requires:
  nodes: [agent.a]
bindings:
  - from: events.sensation.*.turn
    to: agent.a
"""

CATALOG_OK = """\
catalog: t
nodes:
  agent.a:
    kind: tau_agent
    runs_on: home
"""

# (kind, text, line, key, words in the message)
BROKEN: list[tuple[str, str, int | None, str, str]] = [
    ("bridge", BRIDGE_OK.replace("side: edge", "side: middle"), 2, "side", "must be one of"),
    ("bridge", BRIDGE_OK.replace("device: board", "device: Board"), 3, "device", "[a-z0-9_-]+"),
    ("bridge", BRIDGE_OK.replace("port: 2222", "port: 99999"), 6, "connect.port", "0-65535"),
    ("bridge", BRIDGE_OK.replace("port: 2222", "port: many"), 6, "connect.port", "integer"),
    ("bridge", BRIDGE_OK.replace("  - events.sensation.board.turn", "  - events..turn"), 8,
     "exports[0]", "empty token"),
    ("bridge", BRIDGE_OK.replace("  - events.sensation.board.turn", "  - 5"), 8, "exports[0]",
     "string"),
    ("bridge", BRIDGE_OK + "colour: blue\n", 11, "colour", "unknown key"),
    ("bridge", BRIDGE_OK.replace("connect:", "listen:"), 4, "listen", "declares 'connect'"),
    ("bridge", BRIDGE_OK.replace("bridge: board\n", ""), 1, "bridge", "required"),
    ("bridge", BRIDGE_OK + "limits:\n  max_event_bytes: 0\n", 12, "limits.max_event_bytes",
     "> 0"),
    ("bridge", BRIDGE_OK.replace("  port: 2222", "  port: 2222\n  host_key: nonsense"), 7,
     "connect.host_key", "not an SSH public key"),
    ("schema", SCHEMA_OK.replace("to: agent.a", "to: agent.b"), 6, "bindings[0].to",
     "does not list"),
    ("schema", SCHEMA_OK.replace("events.sensation.*.turn", "events.workspace.*.out.recall.*"),
     5, "bindings[0].from", "report rail"),
    ("schema", SCHEMA_OK.replace("events.sensation.*.turn", "events.>"), 5, "bindings[0].from",
     "report rail"),
    ("schema", SCHEMA_OK.replace("[agent.a]", "[agent.a, agent.a]"), 3, "requires.nodes",
     "twice"),
    ("schema", SCHEMA_OK.replace("schema: s", "schema: S S"), 1, "schema", "[a-z0-9_-]+"),
    ("schema", SCHEMA_OK.replace("    to: agent.a\n", ""), 5, "bindings[0].to", "required"),
    ("catalog", CATALOG_OK.replace("tau_agent", "robot"), 4, "nodes.agent.a.kind",
     "must be one of"),
    ("catalog", CATALOG_OK.replace("runs_on: home", "runs_on: moon"), 5, "nodes.agent.a.runs_on",
     "must be one of"),
    ("catalog", CATALOG_OK + "    wall_clock_s: -1\n", 6, "nodes.agent.a.wall_clock_s", "> 0"),
    ("catalog", CATALOG_OK + "    restart_policy: {max_restarts: -1}\n", 6,
     "nodes.agent.a.restart_policy.max_restarts", ">= 0"),
    ("catalog", CATALOG_OK + "    publishes: [a.>.b]\n", 6, "nodes.agent.a.publishes[0]",
     "last token"),
    ("catalog", CATALOG_OK + "  edge.mic:\n    kind: edge_audio\n    runs_on: edge\n", 7,
     "nodes.edge.mic.device", "required"),
    ("catalog", CATALOG_OK + "    memory_reads: [workspace]\n", 6,
     "nodes.agent.a.memory_reads[0]", "subtree path"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "text", "line", "key", "says"), BROKEN, ids=[f"{b[0]}-{b[3]}" for b in BROKEN]
)
def test_each_error_names_file_line_and_key(
    kind: str, text: str, line: int | None, key: str, says: str
) -> None:
    with pytest.raises(SchemaError) as info:
        PARSERS[kind](parse_yaml(text, "doc.yaml"), "doc.yaml")
    matching = [i for i in info.value.issues if i.key == key]
    assert matching, info.value.issues
    assert matching[0].file == "doc.yaml"
    assert matching[0].line == line
    assert says in matching[0].message
    assert f"doc.yaml:{line}: {key}:" in str(info.value)


# Cross-field rules (bindings to unlisted nodes, report rails, duplicates) are the
# loader's alone; every structural error must be refused by the JSON Schema too.
STRUCTURAL = [b for b in BROKEN if not any(w in b[4] for w in ("does not list", "report", "twice"))]


@pytest.mark.parametrize(
    ("kind", "text", "line", "key", "says"), STRUCTURAL, ids=[f"{b[0]}-{b[3]}" for b in STRUCTURAL]
)
def test_json_schema_rejects_the_same_structural_errors(
    kind: str, text: str, line: int | None, key: str, says: str
) -> None:
    validator = jsonschema.Draft202012Validator(JSON_SCHEMAS[kind])
    assert not validator.is_valid(yaml.safe_load(text))


def test_every_error_is_reported_at_once() -> None:
    text = BRIDGE_OK.replace("side: edge", "side: middle").replace("device: board", "device: B")
    with pytest.raises(SchemaError) as info:
        parse_bridge_half(parse_yaml(text, "x.yaml"), "x.yaml")
    assert {i.key for i in info.value.issues} >= {"side", "device"}


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("a: [1, 2\n", 2, "invalid YAML"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
        ("a: b: c\n", 1, "invalid YAML"),
        ("- x\n\t- y\n", 2, "invalid YAML"),
        ("? [a]\n: 1\n", 1, "keys must be strings"),
    ],
)
def test_invalid_yaml_names_the_line(text: str, line: int, says: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_yaml(text, "bad.yaml")
    (issue,) = info.value.issues
    assert issue.file == "bad.yaml"
    assert issue.line == line
    assert says in issue.message


def test_unreadable_and_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read"):
        load_bridge_half(tmp_path / "missing.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(SchemaError, match="not a tether document"):
        load_document(tmp_path / "list.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SchemaError, match="UTF-8"):
        load_document(tmp_path / "bin.yaml")


def test_ssh_fingerprint_matches_openssh(tmp_path: Path) -> None:
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    printed = subprocess.run(
        ["ssh-keygen", "-lf", f"{key}.pub"], check=True, capture_output=True, text=True
    ).stdout.split()[1]
    fp = ssh_fingerprint(Path(f"{key}.pub").read_text())
    assert fp == printed
    assert ssh_fingerprint(fp) == fp


yaml_text = st.text(
    alphabet=st.sampled_from(list("abkey:- []{}\n\t'\"#&*!|>.,0123456789")), max_size=120
)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(list(PARSERS)), text=yaml_text)
def test_fuzzed_text_is_a_document_or_a_schema_error(kind: str, text: str) -> None:
    try:
        PARSERS[kind](parse_yaml(text, "f.yaml"), "f.yaml")
    except SchemaError as exc:
        assert all(i.file == "f.yaml" for i in exc.issues)


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(SHIPPED), data=st.data())
def test_mutilated_shipped_documents_load_or_name_the_problem(path: Path, data: Any) -> None:
    lines = path.read_text().splitlines()
    drop = data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=4))
    text = "\n".join(line for i, line in enumerate(lines) if i not in drop)
    kind = _kind_of(path)
    try:
        PARSERS[kind](parse_yaml(text, str(path)), str(path))
    except SchemaError as exc:
        assert all(i.message for i in exc.issues)


def _alias_bomb(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(["name: bomb", *lines, f"bind: *l{levels - 1}"]) + "\n"


def test_an_alias_bomb_is_refused_before_expanding() -> None:
    """A 317-byte schema once took 3.7 s; each level more multiplies the expansion by 9."""
    text = _alias_bomb(9)  # 489 bytes, 9**9 values expanded
    with pytest.raises(SchemaError, match="expands to more than 100000 values through aliases"):
        parse_yaml(text, "bomb.yaml")
    with pytest.raises(SchemaError, match=r"alias refers to itself|through aliases"):
        parse_yaml("a: &a [1, *a]\n", "loop.yaml")


def test_aliases_that_share_a_little_still_load() -> None:
    doc = parse_yaml(_alias_bomb(3), "small.yaml")
    assert len(doc["bind"]) == 9 and doc["bind"][0] is doc["l1"]


class _NoFullRepr(list[Any]):
    """A value whose full repr must never be built to describe it."""

    def __repr__(self) -> str:
        raise AssertionError("an error message rendered the whole value")


def test_an_error_message_previews_a_value_without_rendering_it() -> None:
    data = LocatedDict({"name": _NoFullRepr(range(1000))})
    data.key_lines = {"name": 3}
    reader = Reader("big.yaml")
    reader.get(data, "name", "", str)
    [issue] = reader.issues
    assert issue.message == "expected a string, got a list <a list of 1000 item(s)>"


def test_unprintable_characters_are_a_schema_error_naming_the_file() -> None:
    """Before: PyYAML's ReaderError escaped parse_yaml (found by tests/shared/test_yaml_fuzz.py)."""
    with pytest.raises(SchemaError, match=r"x\.yaml: invalid YAML: .*unacceptable character"):
        parse_yaml("\x1f", "x.yaml")


def test_deep_flow_nesting_is_refused_while_scanning() -> None:
    """Before: 3,000 nested '[' took seconds of scanning before the RecursionError."""
    with pytest.raises(SchemaError, match=f"nests deeper than {MAX_FLOW_DEPTH} levels"):
        parse_yaml("a: " + "[" * 100_000 + "]" * 100_000, "x.yaml")
    assert parse_yaml("a: " + "[" * MAX_FLOW_DEPTH + "]" * MAX_FLOW_DEPTH, "x.yaml") is not None

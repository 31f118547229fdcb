"""Fuzzing the YAML loaders: any document is a value or a SchemaError naming the file.

`home.control.schema.apply` hands whatever text a local client sends to these
loaders, and the board reads its halves through them. Whatever the text (random,
valid-looking with fuzzed values, alias bombs, deep nesting), each of the three
kinds either parses or refuses with a :class:`SchemaError` whose issues name the
file; nothing else escapes, and a shipped document parses right after. The
slowest case is reported (tests/support/fuzz_report.py), not asserted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from shared.errors import SchemaError
from shared.schema.activation import parse_activation_schema
from shared.schema.bridge_half import parse_bridge_half
from shared.schema.catalog import parse_node_catalog
from shared.yaml_source import parse_yaml
from tests.support import json_strategy
from tests.support.fuzz_report import Slowest, report

REPO = Path(__file__).resolve().parents[2]
YAML = Slowest("yaml documents")
FILE = "fuzzed.yaml"
KINDS: dict[str, tuple[Callable[[Any, str], Any], Path]] = {
    "activation": (parse_activation_schema, REPO / "schemas/activation/edge_asr.yaml"),
    "catalog": (parse_node_catalog, REPO / "schemas/nodes.yaml"),
    "bridge half": (parse_bridge_half, REPO / "schemas/bridge/board.home.yaml"),
}
refusals: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def slowest_cases() -> Iterator[None]:
    yield
    report(YAML)


json_values = json_strategy.json_values(
    extra=st.sampled_from(["events.>", "*", "agent.edge_asr", "tau_agent", 10**30])
)


def _shipped(kind: str) -> dict[str, Any]:
    doc = yaml.safe_load(KINDS[kind][1].read_text())
    assert isinstance(doc, dict)
    return doc


def _alias_bomb(depth: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, depth + 1):
        refs = ", ".join([f"*a{n - 1}"] * 10)
        lines.append(f"a{n}: &a{n} [{refs}]")
    return "\n".join(lines) + "\n"


def fuzzed_texts(kind: str) -> st.SearchStrategy[str]:
    shipped = _shipped(kind)
    changed = st.dictionaries(st.sampled_from([*shipped, "x"]), json_values, max_size=4).map(
        lambda changes: yaml.safe_dump(shipped | changes, sort_keys=False)
    )
    return (
        changed
        | st.text(max_size=200)
        | st.integers(min_value=1, max_value=9).map(_alias_bomb)
        | st.integers(min_value=1, max_value=3000).map(lambda n: "a: " + "[" * n + "]" * n)
        | st.sampled_from(["", "---\n---\n", "!!python/object:os.system {}", "a: !!binary x"])
    )


def _check(kind: str, text: str) -> None:
    parse, _ = KINDS[kind]
    try:
        with YAML.timed((kind, text)):
            parse(parse_yaml(text, FILE), FILE)
    except SchemaError as exc:
        assert exc.issues and all(issue.file == FILE for issue in exc.issues), exc
        reason = exc.issues[0].message.split(":")[0][:40]
        refusals[reason] = refusals.get(reason, 0) + 1


@pytest.mark.parametrize("kind", list(KINDS))
def test_any_yaml_document_parses_or_is_refused_naming_the_file(kind: str) -> None:
    @settings(max_examples=100, deadline=None)
    @given(fuzzed_texts(kind))
    # Found by this suite: a control character (PyYAML's ReaderError escaped), and
    # 3,000 open flow levels (seconds of scanning before any refusal).
    @example("\x1f")
    @example("a: " + "[" * 3000 + "]" * 3000)
    def fuzz(text: str) -> None:
        _check(kind, text)
        parse, path = KINDS[kind]
        assert parse(parse_yaml(path.read_text(), str(path)), str(path)) is not None

    fuzz()
    assert refusals, "no fuzzed document was refused: the strategy is not reaching the checks"

"""No schema may bind the reflex's reports back into an agent.

Every path to an active schema (``home schema apply``, ``home up --apply``) goes through
:func:`load_activation_schema`, which is what refuses, so the refusal is tested there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.errors import SchemaError
from shared.schema.activation import load_activation_schema
from tests.support.home_fixtures import REPO_ROOT

SHIPPED = REPO_ROOT / "schemas" / "activation" / "edge_asr_memory.yaml"


def test_the_shipped_memory_schema_loads() -> None:
    schema = load_activation_schema(SHIPPED)
    assert "agent.edge_asr_memory" in schema.nodes


@pytest.mark.parametrize(
    "source",
    [
        "events.workspace.edge_asr_memory.out.recall.tui",
        "events.workspace.edge_asr_memory.out.memorize.board",
        "events.workspace.*.out.recall.*",
        "events.workspace.edge_asr_memory.out.>",
        "events.>",
    ],
)
def test_a_binding_from_a_report_subject_into_an_agent_is_refused(
    source: str, tmp_path: Path
) -> None:
    text = SHIPPED.read_text()
    text += f"  - from: {source}\n    to: agent.edge_asr_memory\n"
    path = tmp_path / "loop.yaml"
    path.write_text(text)
    last_line = len(text.splitlines())

    with pytest.raises(SchemaError) as refused:
        load_activation_schema(path)

    (issue,) = refused.value.issues
    assert issue.file == str(path) and issue.line == last_line - 1
    assert "report rail" in issue.message and "never be bound back" in issue.message

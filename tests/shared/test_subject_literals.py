"""Every subject is written in shared/subjects.py: no product module spells one by hand.

A string constant (or an f-string's literal part) that begins with ``events.`` outside
``shared/`` is a subject pattern somebody wrote again; it should be a builder or a
constant of :mod:`shared.subjects` instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("bridge", "edge", "home", "firmware", "hil")


def subject_literals(path: Path) -> list[tuple[int, str]]:
    """The line and text of every string constant in ``path`` that begins with ``events.``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("events.")
    ]


def test_no_product_module_outside_shared_writes_an_events_subject() -> None:
    found = []
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            found += [f"{relative}:{line}: {text!r}" for line, text in subject_literals(path)]
    assert found == [], "subjects written outside shared/subjects.py:\n" + "\n".join(found)


def test_the_scan_sees_plain_and_formatted_literals(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'A = "events.x.*"\ndef f(d):\n    return f"events.y.{d}"\n"""events. doc"""\n'
    )
    assert sorted(line for line, _ in subject_literals(module)) == [1, 3, 4]

"""Telling the three YAML kinds apart by their top-level key, and loading any of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared.errors import SchemaError, SchemaIssue
from shared.schema.activation import ActivationSchema, parse_activation_schema
from shared.schema.bridge_half import BridgeHalf, parse_bridge_half
from shared.schema.catalog import NodeCatalog, parse_node_catalog
from shared.yaml_source import load_yaml

KINDS = {"catalog": "node catalog", "schema": "activation schema", "bridge": "bridge half"}


def detect_kind(doc: Any, file: str) -> str:
    """``catalog``, ``schema`` or ``bridge``: which top-level key the document leads with."""
    if isinstance(doc, dict):
        found = [k for k in KINDS if k in doc]
        if len(found) == 1:
            return found[0]
    raise SchemaError(
        [
            SchemaIssue(
                file,
                getattr(doc, "line", None) or None,
                "",
                "not a tether document: expected exactly one of the top-level keys "
                "'catalog' (node catalog), 'schema' (activation schema), 'bridge' (bridge half)",
            )
        ]
    )


def load_document(path: str | Path) -> NodeCatalog | ActivationSchema | BridgeHalf:
    """Load any of the three YAML kinds, choosing the loader by its top-level key."""
    file = str(path)
    doc = load_yaml(path)
    kind = detect_kind(doc, file)
    if kind == "catalog":
        return parse_node_catalog(doc, file)
    if kind == "schema":
        return parse_activation_schema(doc, file)
    return parse_bridge_half(doc, file)

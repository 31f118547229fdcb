"""Models and loaders for the three YAML kinds: node catalog, activation schema, bridge half.

Each loader returns a frozen dataclass or raises :class:`~shared.errors.SchemaError`
listing every problem with file, line and key.
"""

from shared.schema.activation import ActivationSchema, Binding, load_activation_schema
from shared.schema.bridge_half import BridgeHalf, HalfLimits, SubjectDecl, load_bridge_half
from shared.schema.catalog import (
    NodeCatalog,
    NodeSpec,
    RestartPolicy,
    load_node_catalog,
)
from shared.schema.document import detect_kind, load_document

__all__ = [
    "ActivationSchema",
    "Binding",
    "BridgeHalf",
    "HalfLimits",
    "NodeCatalog",
    "NodeSpec",
    "RestartPolicy",
    "SubjectDecl",
    "detect_kind",
    "load_activation_schema",
    "load_bridge_half",
    "load_document",
    "load_node_catalog",
]

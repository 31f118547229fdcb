"""YAML that remembers where each value came from, so every error can name file, line and key.

:func:`load_yaml` returns plain dicts and lists whose subclasses
(:class:`LocatedDict`, :class:`LocatedList`) carry the 1-based line of every
key and item. :class:`Reader` walks such a document, collecting
:class:`~shared.errors.SchemaIssue` s instead of stopping at the first, and
raises one :class:`~shared.errors.SchemaError` listing all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from shared.errors import SchemaError, SchemaIssue

T = TypeVar("T")

# A schema document is a few dozen values; aliases may share structure but not multiply
# it: a handful of nested aliases otherwise expands to billions of values (an alias
# bomb) that every later walk, even an error message, would pay for.
MAX_EXPANDED_VALUES = 100_000
# Flow collections ([ and {) nested deeper than this are refused while scanning: PyYAML's
# scanner pays for every open level on every token, so 3,000 levels took seconds.
MAX_FLOW_DEPTH = 64
PREVIEW_CHARS = 60


class LocatedDict(dict[str, Any]):
    """A mapping that knows its own line and the line of each key."""

    line: int = 0
    key_lines: dict[str, int]


class LocatedList(list[Any]):
    """A sequence that knows its own line and the line of each item."""

    line: int = 0
    item_lines: list[int]


class _LocatingLoader(yaml.SafeLoader):
    def fetch_flow_collection_start(self, token_class: Any) -> None:
        if self.flow_level >= MAX_FLOW_DEPTH:
            raise yaml.scanner.ScannerError(
                None, None, f"nests deeper than {MAX_FLOW_DEPTH} levels", self.get_mark()
            )
        super().fetch_flow_collection_start(token_class)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        mapping = LocatedDict()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None, None, f"keys must be strings, found {preview(key)}", key_node.start_mark
                )
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=True)
            mapping.key_lines[key] = key_node.start_mark.line + 1
        return mapping

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        seq = LocatedList(self.construct_object(child, deep=True) for child in node.value)
        seq.line = node.start_mark.line + 1
        seq.item_lines = [child.start_mark.line + 1 for child in node.value]
        return seq


_LocatingLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _LocatingLoader.construct_mapping,
)
_LocatingLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG,
    _LocatingLoader.construct_sequence,
)


def load_yaml(path: str | Path) -> Any:
    """Parse one YAML file, keeping line numbers; raise SchemaError naming the file and line."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SchemaError([SchemaIssue(file, None, "", f"cannot read: {exc.strerror}")]) from exc
    except UnicodeDecodeError as exc:
        raise SchemaError([SchemaIssue(file, None, "", f"is not UTF-8: {exc.reason}")]) from exc
    return parse_yaml(text, file)


def parse_yaml(text: str, file: str = "<string>") -> Any:
    """Parse YAML text, keeping line numbers; raise SchemaError naming ``file`` and line.

    Aliases are expanded only after :func:`_expanded_size` has bounded what they
    would expand to (:data:`MAX_EXPANDED_VALUES`).
    """
    try:
        # The reader refuses unprintable characters as soon as it is made.
        loader = _LocatingLoader(text)
    except yaml.YAMLError as exc:
        raise SchemaError([SchemaIssue(file, None, "", f"invalid YAML: {exc}")]) from exc
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {}, set())
        if size > MAX_EXPANDED_VALUES:
            line = node.start_mark.line + 1
            raise SchemaError(
                [
                    SchemaIssue(
                        file,
                        line,
                        "",
                        f"expands to more than {MAX_EXPANDED_VALUES} values through aliases; "
                        "refused (an alias bomb?)",
                    )
                ]
            )
        return loader.construct_document(node)
    except RecursionError:
        raise SchemaError(
            [SchemaIssue(file, None, "", "nests too deeply (or an alias refers to itself)")]
        ) from None
    except ValueError as exc:  # e.g. an integer longer than Python will convert
        raise SchemaError([SchemaIssue(file, None, "", f"invalid value: {exc}")]) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        message = exc.problem or str(exc)
        if exc.context:
            message = f"{message} ({exc.context})"
        raise SchemaError([SchemaIssue(file, line, "", f"invalid YAML: {message}")]) from exc
    except yaml.YAMLError as exc:
        raise SchemaError([SchemaIssue(file, None, "", f"invalid YAML: {exc}")]) from exc
    finally:
        loader.dispose()


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """How many values ``node`` becomes once aliases are expanded; linear in the node graph.

    An alias is the same node object reached twice, so sizes are memoized by node
    identity. A node reached again while still open is an alias to itself: unbounded.
    """
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        return MAX_EXPANDED_VALUES + 1
    open_nodes.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, sizes, open_nodes)
            if total > MAX_EXPANDED_VALUES:
                break
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            total += _expanded_size(key_node, sizes, open_nodes)
            total += _expanded_size(value_node, sizes, open_nodes)
            if total > MAX_EXPANDED_VALUES:
                break
    open_nodes.discard(key)
    sizes[key] = total
    return total


def preview(value: Any) -> str:
    """At most :data:`PREVIEW_CHARS` of ``value``'s repr, without rendering the rest of it."""
    if isinstance(value, dict):
        return f"<a mapping of {len(value)} key(s)>"
    if isinstance(value, list):
        return f"<a list of {len(value)} item(s)>"
    if isinstance(value, str):
        return repr(value[:PREVIEW_CHARS])[:PREVIEW_CHARS]
    return repr(value)[:PREVIEW_CHARS]


def line_of(container: Any, key: str | int | None = None) -> int | None:
    """The line of ``container[key]`` (or of the container itself), if known."""
    if key is None:
        return getattr(container, "line", None) or None
    if isinstance(container, LocatedDict) and isinstance(key, str):
        return container.key_lines.get(key, container.line or None)
    if isinstance(container, LocatedList) and isinstance(key, int):
        if 0 <= key < len(container.item_lines):
            return container.item_lines[key]
        return container.line or None
    return None


class Reader:
    """Pulls typed values out of a located document, recording every problem found.

    Each getter returns a usable fallback after recording an issue, so one pass
    reports every error; call :meth:`raise_if_any` at the end.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.issues: list[SchemaIssue] = []

    def issue(self, container: Any, key: str | int | None, path: str, message: str) -> None:
        """Record one problem at ``path`` (the dotted key path), located in ``container``."""
        self.issues.append(SchemaIssue(self.file, line_of(container, key), path, message))

    def raise_if_any(self) -> None:
        """Raise SchemaError with every recorded issue, if there were any."""
        if self.issues:
            raise SchemaError(self.issues)

    def mapping(self, value: Any, path: str, parent: Any = None, key: Any = None) -> LocatedDict:
        """``value`` as a mapping, or an empty one after recording an issue."""
        if isinstance(value, LocatedDict):
            return value
        self.issue(parent, key, path or "<document>", f"expected a mapping, got {_kind(value)}")
        empty = LocatedDict()
        empty.key_lines = {}
        empty.line = line_of(parent, key) or 0
        return empty

    def allow_keys(self, data: LocatedDict, path: str, allowed: tuple[str, ...]) -> None:
        """Record an issue for every key of ``data`` not in ``allowed``."""
        for k in data:
            if k not in allowed:
                self.issue(
                    data,
                    k,
                    _join(path, k),
                    f"unknown key; expected one of: {', '.join(allowed)}",
                )

    def get(
        self,
        data: LocatedDict,
        key: str,
        path: str,
        kind: type[T] | tuple[type, ...],
        default: T | None = None,
        *,
        required: bool = True,
        check: Callable[[Any], str | None] | None = None,
    ) -> T:
        """``data[key]`` checked against ``kind`` (and ``check``, which returns an error text)."""
        full = _join(path, key)
        if key not in data:
            if required:
                self.issue(data, None, full, "is required but missing")
            return default  # type: ignore[return-value]
        value = data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join(_type_name(k) for k in kinds)
            self.issue(data, key, full, f"expected {names}, got {_kind(value)} {preview(value)}")
            return default  # type: ignore[return-value]
        if check is not None:
            problem = check(value)
            if problem:
                self.issue(data, key, full, problem)
                return default  # type: ignore[return-value]
        return value  # type: ignore[return-value]

    def str_list(
        self,
        data: LocatedDict,
        key: str,
        path: str,
        *,
        required: bool = True,
        check: Callable[[str], str | None] | None = None,
    ) -> list[tuple[str, int | None]]:
        """A list of strings with the line of each, each checked by ``check``."""
        full = _join(path, key)
        if key not in data:
            if required:
                self.issue(data, None, full, "is required but missing")
            return []
        value = data[key]
        if value is None:
            return []
        if not isinstance(value, list):
            self.issue(data, key, full, f"expected a list, got {_kind(value)}")
            return []
        out: list[tuple[str, int | None]] = []
        for i, item in enumerate(value):
            item_path = f"{full}[{i}]"
            if not isinstance(item, str):
                self.issue(value, i, item_path, f"expected a string, got {_kind(item)}")
                continue
            problem = check(item) if check is not None else None
            if problem:
                self.issue(value, i, item_path, problem)
                continue
            out.append((item, line_of(value, i)))
        return out


def _join(path: str, key: str | int) -> str:
    return f"{path}.{key}" if path else str(key)


def _type_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "true/false",
        dict: "a mapping",
        LocatedDict: "a mapping",
        list: "a list",
        LocatedList: "a list",
    }.get(kind, kind.__name__)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return _type_name(type(value))

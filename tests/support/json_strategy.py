"""The JSON values every fuzz suite feeds its boundary: scalars, lists and objects, nested."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(
    *,
    max_leaves: int = 20,
    text_size: int = 20,
    width: int = 4,
    extra: st.SearchStrategy[Any] | None = None,
) -> st.SearchStrategy[Any]:
    """Any JSON value, ``extra`` (values a boundary is known to choke on) among the leaves."""
    leaves = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=text_size)
    )
    if extra is not None:
        leaves |= extra
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=width)
            | st.dictionaries(st.text(max_size=10), inner, max_size=width)
        ),
        max_leaves=max_leaves,
    )

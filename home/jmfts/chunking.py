"""Cut long text into embeddable windows on the tokenizer's own token boundaries (pure)."""

from __future__ import annotations

from collections.abc import Sequence

#: Tokens per window, below the model's 256 so [CLS]/[SEP] fit; overlap keeps a sentence
#: that straddles a cut findable from either side.
WINDOW_TOKENS = 240
OVERLAP_TOKENS = 32


def chunk_spans(
    text: str,
    offsets: Sequence[tuple[int, int]],
    *,
    window: int = WINDOW_TOKENS,
    overlap: int = OVERLAP_TOKENS,
) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` covering ``text`` in windows of ``window`` tokens.

    ``offsets`` are the tokenizer's per-token character offsets. Text that fits in one
    window is one span (the whole text, even when empty of tokens).
    """
    if window <= overlap:
        raise ValueError(f"window ({window}) must exceed overlap ({overlap})")
    if len(offsets) <= window:
        return [(0, len(text))]
    spans = []
    step = window - overlap
    for first in range(0, len(offsets), step):
        last = min(first + window, len(offsets)) - 1
        spans.append((offsets[first][0], offsets[last][1]))
        if last == len(offsets) - 1:
            break
    return spans

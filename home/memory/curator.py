"""The slow curator's work on one agent's memories, off the turn: merge what is said twice.

The reflex deduplicates each fact against what it finds stored when it deposits; two
memories can still say one thing (two devices' evaluations at once, a fact written by
hand, a paraphrase the model path wrote). The curator (``agent.memory_curator``, woken
by the memorize reports of the agents it curates: :mod:`home.agents.curator_watch`)
reads the memories written since its last pass, and for each finds the stored memories
nearest to it: one as close as :data:`MERGE_COSINE` that brings no content word the
other lacks says the same thing, and is merged into it. A merge is a retraction
(``home memory forget``'s record) that supersedes the memory saying less, naming the one
kept; it carries the curator's provenance (the turn that woke it), so ``home memory
show`` and ``home timeline`` (a **merged** line) tell it, and ``--as-of`` before it
still finds both. Nothing is asked of a model: merging is decided on the words.

A pass then resolves the contradictions the fast path missed in the agent's knowledge
book (``knowledge/<agent>``, when granted): two open triples with one head (entity and
predicate, by stem) and two values (written at once from two devices, or before the book
knew the two predicates were one) are one belief replaced; the older is invalidated and
the memory it was said in retracted ("contradicted by #N by the curator …"), so recall
shows the later value only.

What the curator has read is a watermark per memory root (the highest id it has seen)
in its state file, so a pass costs the memories new since the last one.
See docs/architecture.md "Memory".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from home.jmfts.errors import JmftsError, NotFound
from home.memory.fidelity import content_stems, stem
from home.memory.kinds import USETYPE_PREFIX
from home.memory.knowledge import KnowledgeBook, same_value
from home.memory.memories import MemoryStore, StoredMemory
from home.memory.provenance import Provenance
from shared.files import write_atomic

#: Two memories this close (cosine), neither bringing a content word the other lacks,
#: say one thing. The reflex reinforces at its ``dedup_threshold`` (0.9 in the catalog)
#: when it deposits; the curator merges at the same closeness, after the fact.
MERGE_COSINE = 0.9
NEIGHBOURS = 5
#: Said in the retraction of a merged memory, ahead of the id it was merged into.
MERGED_INTO = "merged into #"
#: Said in the retraction of a memory whose belief a later one replaced, ahead of its id.
CONTRADICTED_BY = "contradicted by #"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Merge:
    """One memory merged into another: the retraction written, and both texts."""

    kept: int
    merged: int
    retraction: int
    kept_text: str
    merged_text: str
    score: float
    # Not said twice but replaced: a later belief with its head contradicts it.
    contradicted: bool = False

    def describe(self) -> str:
        """One line: what was merged into what (or which belief replaced which)."""
        how = CONTRADICTED_BY if self.contradicted else MERGED_INTO
        return f"#{self.merged} {self.merged_text!r} {how}{self.kept} ({self.score:.2f})"


def says_no_more(memory: str, other: str) -> bool:
    """Whether ``memory`` brings no content word (by stem) that ``other`` lacks."""
    return content_stems(memory) <= content_stems(other)


def _is_memory(doc: dict[str, Any]) -> bool:
    usetype = doc.get("usetype")
    return usetype is None or str(usetype).startswith(USETYPE_PREFIX)


class Watermarks:
    """The highest memory id each root's last pass read, in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, int]:
        """Every root's watermark; an absent or unreadable file is a first pass."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}

    def write(self, root: str, seen: int) -> None:
        """Record ``root``'s watermark (atomically: a new file renamed over the old)."""
        marks = {**self.read(), root: seen}
        write_atomic(self.path, json.dumps(marks, sort_keys=True))


class Curator:
    """Merges duplicate memories under the roots it is granted, as ``curator`` (its node)."""

    def __init__(self, store: MemoryStore, curator: str, watermarks: Watermarks) -> None:
        self.store = store
        self.curator = curator
        self.watermarks = watermarks

    async def curate(
        self, root: str, agent: str, *, binding_id: str | None = None, schema: str | None = None
    ) -> list[Merge]:
        """One pass over the memories of ``root`` (``agent``'s) new since the last: every
        duplicate merged. JMFTS errors propagate (the root not granted is a 404)."""
        root_id = await self.store.resolve(root)
        view = await self.store.client.request("GET", f"/workspace/{root_id}")
        current = [d for d in view.get("current", []) if _is_memory(d)]
        seen = self.watermarks.read().get(root, 0)
        origin = Provenance(agent, self.curator, binding_id, schema)
        gone: set[int] = set()
        merges = []
        for doc in sorted(current, key=lambda d: int(d["id"])):
            if int(doc["id"]) <= seen or int(doc["id"]) in gone:
                continue
            memory = StoredMemory.from_document(doc)
            for hit in await self.store.vector_search(memory.content, root_id, NEIGHBOURS):
                if hit.id == memory.id or hit.id in gone or hit.score < MERGE_COSINE:
                    continue
                keep, drop = _kept_and_merged(memory, hit)
                if not says_no_more(drop.content, keep.content):
                    continue
                said = f"{MERGED_INTO}{keep.id} by the curator: said again as {keep.content!r}"
                retraction = await self.store.retract(drop, said, origin)
                merge = Merge(keep.id, drop.id, retraction, keep.content, drop.content, hit.score)
                log.info("curator %s: %s", root, merge.describe())
                merges.append(merge)
                gone.add(drop.id)
                if drop.id == memory.id:
                    break
        if current:
            self.watermarks.write(root, max(seen, *(int(d["id"]) for d in current)))
        live = {int(d["id"]) for d in current} - gone
        return merges + await self.resolve(f"knowledge/{agent}", live, origin)

    async def resolve(self, knowledge: str, live: set[int], origin: Provenance) -> list[Merge]:
        """Close each open belief a later one with its head contradicts, and retract the
        memory it was said in (when still ``live``); nothing when ``knowledge`` is not
        granted. The changes are :class:`Merge` rows (kept: the later memory)."""
        book = KnowledgeBook(self.store.client, knowledge)
        try:
            await book.root_id()  # not granted (or none yet): a 404, nothing to resolve
            rows = await book.open_beliefs()
        except NotFound:
            return []
        heads: dict[tuple[int, frozenset[str]], list[dict[str, Any]]] = {}
        for row in rows:
            said = frozenset(stem(w) for w in str(row["predicate"]["name"]).split())
            heads.setdefault((int(row["subject"]["id"]), said), []).append(row)
        resolved = []
        for beliefs in heads.values():
            beliefs.sort(key=lambda r: (str(r.get("valid_from") or ""), int(r["id"])))
            latest = beliefs[-1]
            for older in beliefs[:-1]:
                if same_value(older["object_literal"], latest["object_literal"]):
                    continue
                await book.client.request(
                    "POST",
                    f"/triples/{older['id']}/invalidate",
                    json={"reason": f"{CONTRADICTED_BY}{latest['id']} (the curator)"},
                )
                change = await self._contradicted(older, latest, live, origin)
                if change is not None:
                    resolved.append(change)
        return resolved

    async def _contradicted(
        self,
        older: dict[str, Any],
        latest: dict[str, Any],
        live: set[int],
        origin: Provenance,
    ) -> Merge | None:
        """Retract the memory ``older`` was said in, replaced by ``latest``'s."""
        old_id, new_id = older.get("source_document_id"), latest.get("source_document_id")
        if not isinstance(old_id, int) or old_id == new_id or old_id not in live:
            return None
        try:
            old, new = await self.store.get(old_id), await self.store.get(int(new_id or 0))
        except JmftsError:
            return None
        said = (
            f"{CONTRADICTED_BY}{new.id} by the curator: {new.content!r} says "
            f"{latest['object_literal']!r}, not {older['object_literal']!r}"
        )
        retraction = await self.store.retract(old, said, origin)
        log.info("curator: #%d contradicted by #%d", old.id, new.id)
        return Merge(new.id, old.id, retraction, new.content, old.content, 0.0, True)


def _kept_and_merged(a: StoredMemory, b: StoredMemory) -> tuple[StoredMemory, StoredMemory]:
    """Which of two memories saying one thing is kept: the one with more to say, else the
    one said first (its review history stays with it)."""
    more_a, more_b = len(content_stems(a.content)), len(content_stems(b.content))
    if more_a != more_b:
        return (a, b) if more_a > more_b else (b, a)
    return (a, b) if (a.written_at, a.id) <= (b.written_at, b.id) else (b, a)

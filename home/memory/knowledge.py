"""The knowledge book: who is who, and what is believed of them, as JMFTS triples.

Each claim a kept fact makes (:mod:`home.memory.heads`) names a subject; the book
resolves it to one entity document under ``knowledge/<agent>`` (usetype ``entity``:
its kind, names and relations to the user), so "my sister", "ana" and "she" after ana
was named are one. The claim is a triple on that entity: predicate, value as a literal,
and the memory it was said in as evidence. A later claim with the same head (entity +
predicate) and another value supersedes the open triple: its record window closes
(``as_of`` before then still finds it) and its valid time ends where the new one starts.
The memory the closed triple was said in is what the new memory corrects, so a
correction in any words replaces what it corrects in recall too.

Everything here runs as the agent's principal; what it was not granted is a 404.
See docs/architecture.md "Memory".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from home.jmfts.client import JmftsClient
from home.jmfts.models import ENTITY_USETYPE
from home.memory.fidelity import stem
from home.memory.heads import NAMING, VERBS, Claim, EntityRef


@dataclass(frozen=True)
class Entity:
    """One entity document: its id, kind, names and relations to the user."""

    id: int
    kind: str
    names: tuple[str, ...] = ()
    relations: tuple[str, ...] = ()
    gender: str | None = None

    @classmethod
    def from_document(cls, doc: Any) -> Entity | None:
        """Read an entity document (as sent, a dict); anything else, or malformed, is None."""
        if not isinstance(doc, dict) or not isinstance(doc.get("id"), int):
            return None
        data = doc.get("structured_content")
        if doc.get("usetype") != ENTITY_USETYPE or not isinstance(data, dict):
            return None
        kind, names, relations = data.get("kind"), data.get("names"), data.get("relations")
        if not isinstance(kind, str) or not isinstance(names, list):
            return None
        gender = data.get("gender")
        return cls(
            doc["id"],
            kind,
            tuple(n for n in names if isinstance(n, str)),
            tuple(r for r in relations or [] if isinstance(r, str)),
            gender if gender in ("f", "m") else None,
        )

    @property
    def label(self) -> str:
        """How the entity is called ("sister ana", "the user")."""
        if self.kind == "user":
            return "the user"
        return " ".join([*self.relations[:1], *self.names[:1]]) or f"entity {self.id}"

    def structured(self) -> dict[str, Any]:
        """The document's structured content."""
        return {
            "kind": self.kind,
            "names": list(self.names),
            "relations": list(self.relations),
            "gender": self.gender,
        }

    @property
    def key(self) -> str:
        """What another's relation to it is said through ("son" in "son's best friend")."""
        return (self.relations or self.names or (str(self.id),))[0]


@dataclass(frozen=True)
class OpenBelief:
    """A triple not yet superseded: what is believed now for one head."""

    triple_id: int
    value: str
    evidence_id: int | None


@dataclass
class Plan:
    """What recording a claim will do, known before its memory is written: the head and
    the open belief it closes (its evidence is the memory the new one corrects)."""

    claim: Claim
    entity: Entity | None = None
    predicate: str | None = None
    predicate_id: int | None = None
    closes: OpenBelief | None = None
    same: bool = False  # the head already holds this value
    notes: list[str] = field(default_factory=list)

    @property
    def corrects(self) -> int | None:
        """The memory the new one corrects: the evidence of the belief it closes."""
        return self.closes.evidence_id if self.closes is not None else None


@dataclass(frozen=True)
class Change:
    """What the book wrote for one claim (for the memorize report and the timeline)."""

    entity: str
    predicate: str
    value: str
    triple_id: int | None
    closed: int | None = None

    def describe(self) -> str:
        """One line: "sister ana · lives in · lyon (#12, closes #9)"."""
        closes = f", closes #{self.closed}" if self.closed is not None else ""
        ident = f"#{self.triple_id}" if self.triple_id is not None else "unchanged"
        return f"{self.entity} · {self.predicate} · {self.value} ({ident}{closes})"


def expanded_query(query: str, entities: list[Entity]) -> str | None:
    """``query`` with each entity it names by relation or by name alone said both ways
    ("where does my sister live" → "... my sister ana live"), or None when it names none:
    a memory said with the name finds a question asked with the relation."""
    words = re.findall(r"[a-z0-9']+", query.lower())
    out, changed = [], False
    for word in words:
        out.append(word)
        for entity in entities:
            if entity.kind == "user" or not (entity.names and entity.relations):
                continue
            if word.removesuffix("'s") in entity.relations and not set(entity.names) & set(words):
                out.append(entity.names[-1])
                changed = True
                break
            if word.removesuffix("'s") in entity.names and not set(entity.relations) & set(words):
                out[-1:] = [entity.relations[0], word]
                changed = True
                break
    return " ".join(out) if changed else None


_VERB_STEMS = frozenset(stem(w) for w in VERBS)


def one_predicate(said: set[str], wanted: set[str]) -> bool:
    """Whether two predicates' stems name one attribute: the same, or a noun and the noun
    said one word closer ("shoes" and "shoe size", "favourite" and "favourite takeaway");
    not "gym" and "gym locker code", not "moved" and "moved into", not "favourite food"
    and "favourite drink"."""
    if said == wanted:
        return True
    small, big = sorted((said, wanted), key=len)
    return small < big and len(big - small) == 1 and not small & _VERB_STEMS


def same_value(a: str, b: str) -> bool:
    """Whether two values say one thing (the same stems: "tuesdays" and "tuesday")."""
    return {stem(w) for w in a.lower().split()} == {stem(w) for w in b.lower().split()}


class KnowledgeBook:
    """The entities and triples under one agent's ``knowledge/<agent>``."""

    def __init__(self, client: JmftsClient, root_path: str) -> None:
        self.client = client
        self.root_path = root_path
        self._root_id: int | None = None
        self._predicates: dict[str, int] = {}
        self._mentions: list[int] = []

    async def root_id(self) -> int:
        """The knowledge root's id (a 404 when the agent was not granted it)."""
        if self._root_id is None:
            self._root_id = (await self.client.resolve(self.root_path)).id
        return self._root_id

    async def entities(self) -> list[Entity]:
        """Every entity of the book, newest last."""
        children = await self.client.children(await self.root_id())
        found = [Entity.from_document(doc.data) for doc in children]
        return sorted((e for e in found if e is not None), key=lambda e: e.id)

    # -- who ------------------------------------------------------------------------------

    def _mentioned(self, entity_id: int) -> None:
        if entity_id in self._mentions:
            self._mentions.remove(entity_id)
        self._mentions.append(entity_id)

    def _recent(self, known: list[Entity]) -> list[Entity]:
        """Entities, the most recently mentioned last (unmentioned ones by age before)."""
        order = {eid: i for i, eid in enumerate(self._mentions)}
        return sorted(known, key=lambda e: (e.id in order, order.get(e.id, e.id)))

    def _by_pronoun(self, ref: EntityRef, known: list[Entity]) -> Entity | None:
        """The one a pronoun points at: a person (or pet) its own sentence named before it
        ("priya traded in her car, she's driving a mini now"), else the latest mentioned
        of its gender, else the latest whose gender nobody said."""
        beings = [e for e in self._recent(known) if e.kind in ("person", "pet")]
        named = [
            (max(i for i, w in enumerate(ref.said_before) if w in e.names), e)
            for e in beings
            if set(e.names) & set(ref.said_before)
            and (ref.gender is None or e.gender in (None, ref.gender))
        ]
        if named:
            return max(named, key=lambda n: n[0])[1]  # the name said nearest the pronoun
        if ref.gender is None:
            return beings[-1] if beings else None
        exact = [e for e in beings if e.gender == ref.gender]
        unknown = [e for e in beings if e.gender is None]
        latest = exact or unknown
        return latest[-1] if latest else None

    def _match(self, ref: EntityRef, relation: str | None, known: list[Entity]) -> Entity | None:
        if ref.kind == "user":
            return next((e for e in known if e.kind == "user"), None)
        if ref.pronoun is not None and relation is None:
            return self._by_pronoun(ref, known)
        recent = self._recent(known)
        if ref.name is not None:
            named = [e for e in recent if ref.name in e.names]
            if named:
                return named[-1]
            if relation is not None:  # "my sister ana" after "my sister" with no name
                return next(
                    (e for e in reversed(recent) if relation in e.relations and not e.names), None
                )
            return None
        related = [e for e in recent if relation in e.relations]
        return related[-1] if related else None

    async def resolve(self, ref: EntityRef, *, create: bool) -> Entity | None:
        """The one entity ``ref`` names (what it adds, a name, a relation or a gender, is kept
        on it), created when absent if ``create``; None for a pronoun nobody was named for."""
        known = await self.entities()
        relation = ref.relation
        if ref.owner is not None and relation is not None:
            owner = await self.resolve(ref.owner, create=create)
            if owner is None:
                return None
            if owner.kind != "user":
                relation = f"{owner.key}'s {relation}"  # "son's best friend"
            known = await self.entities()
        entity = self._match(ref, relation, known)
        if entity is None:
            if (ref.pronoun is not None and ref.relation is None) or not create:
                return None
            entity = Entity(
                0,
                ref.kind,
                (ref.name,) if ref.name else (),
                (relation,) if relation else (),
                ref.gender,
            )
            doc = await self.client.create(
                title=entity.label,
                content=f"{entity.label} ({ref.kind})",
                parent_id=await self.root_id(),
                usetype=ENTITY_USETYPE,
                structured_content=entity.structured(),
            )
            entity = Entity(doc.id, entity.kind, entity.names, entity.relations, entity.gender)
        else:
            new_name = ref.name if ref.name and ref.name not in entity.names else None
            names = entity.names + ((new_name,) if new_name else ())
            relations = entity.relations + (
                (relation,) if relation and relation not in entity.relations else ()
            )
            entity = await self._rewrite(
                entity,
                Entity(entity.id, entity.kind, names, relations, entity.gender or ref.gender),
            )
        self._mentioned(entity.id)
        return entity

    async def _rewrite(self, old: Entity, new: Entity) -> Entity:
        if new != old:
            await self.client.update(
                new.id, {"title": new.label, "structured_content": new.structured()}
            )
        return new

    async def rename(self, entity: Entity, old: str | None, new: str) -> Entity:
        """The entity called ``new`` from now on (instead of ``old``, when given)."""
        names = tuple(n for n in entity.names if n != old)
        names = names + ((new,) if new not in names else ())
        return await self._rewrite(
            entity, Entity(entity.id, entity.kind, names, entity.relations, entity.gender)
        )

    # -- what -----------------------------------------------------------------------------

    async def predicate_id(self, name: str) -> int:
        """The id of predicate ``name``, created (private to the agent) when absent."""
        if name not in self._predicates:
            found = [
                p
                for p in await self.client.request("GET", "/triples/predicates")
                if p.get("name") == name
            ]
            made = (
                found[0]
                if found
                else await self.client.request(
                    "POST", "/triples/predicates", json={"name": name, "namespace": "memory"}
                )
            )
            self._predicates[name] = int(made["id"])
        return self._predicates[name]

    async def open_beliefs(
        self, entity_id: int | None = None, predicate: str | None = None
    ) -> list[dict[str, Any]]:
        """The triples not yet superseded, about ``entity_id`` and of ``predicate`` if given."""
        params: dict[str, Any] = {"include_invalidated": False, "limit": 1000}
        if entity_id is not None:
            params.update(entity_id=entity_id, direction="outgoing")
        if predicate is not None:
            params["predicate"] = predicate
        rows = await self.client.request("GET", "/triples/query", params=params)
        return [r for r in rows if isinstance(r, dict) and r.get("object_literal") is not None]

    async def plan(self, claim: Claim) -> Plan:
        """What recording ``claim`` will close: the open belief of its head with another
        value, or, for "not X", the newest open belief whose value holds X."""
        plan = Plan(claim)
        if claim.identity and claim.subject is not None:
            await self.resolve(claim.subject, create=True)  # "dev is my best mate": one
            return plan
        if claim.has_head and claim.subject is not None and claim.predicate and claim.value:
            plan.entity = await self.resolve(claim.subject, create=True)
            if plan.entity is None:
                plan.notes.append(f"nobody named for {claim.subject.label!r}")
                return plan
            plan.predicate = claim.predicate
            plan.predicate_id = await self.predicate_id(claim.predicate)
            wanted = {stem(w) for w in claim.predicate.split()}
            for row in await self.open_beliefs(plan.entity.id):
                said = {stem(w) for w in str(row["predicate"]["name"]).split()}
                if not one_predicate(said, wanted):
                    continue
                if same_value(row["object_literal"], claim.value):
                    plan.same = True
                elif plan.closes is None or said == wanted:
                    plan.closes = OpenBelief(
                        row["id"], row["object_literal"], row.get("source_document_id")
                    )
        if plan.closes is None and not plan.same and claim.replaces and not claim.has_head:
            old = stem(claim.replaces.lower())
            for row in reversed(await self.open_beliefs()):
                if old in {stem(w) for w in row["object_literal"].lower().split()}:
                    plan.closes = OpenBelief(
                        row["id"], row["object_literal"], row.get("source_document_id")
                    )
                    if plan.entity is None:
                        plan.predicate = str(row["predicate"]["name"])
                        plan.predicate_id = int(row["predicate"]["id"])
                        plan.entity = Entity.from_document(row["subject"])
                    break
        return plan

    async def commit(self, plan: Plan, evidence_id: int, said_at: datetime) -> Change | None:
        """Record the planned triple with ``evidence_id`` (the memory it was said in),
        superseding the belief it closes; None when the claim had no head to record."""
        claim, entity = plan.claim, plan.entity
        if entity is None or plan.predicate is None or plan.predicate_id is None:
            return None
        predicate = plan.predicate
        if not claim.value:
            if plan.closes is None:
                return None
            # "we sold the kia": no longer so, and nothing said in its place.
            await self.client.request(
                "POST",
                f"/triples/{plan.closes.triple_id}/invalidate",
                json={"reason": f"said gone (memory #{evidence_id})"},
            )
            return Change(entity.label, predicate, "(gone)", None, closed=plan.closes.triple_id)
        if plan.same and plan.closes is None:
            return Change(entity.label, predicate, claim.value, None)
        body = {
            "subject_id": entity.id,
            "predicate_id": plan.predicate_id,
            "object_literal": claim.value,
            "source_document_id": evidence_id,
            "valid_from": said_at.isoformat(),
            "fact_type": "state",
        }
        if predicate == NAMING:
            entity = await self.rename(
                entity, plan.closes.value if plan.closes else None, claim.value
            )
        if plan.closes is None:
            made = await self.client.request("POST", "/triples", json=body)
            return Change(entity.label, predicate, claim.value, int(made["id"]))
        made = await self.client.request(
            "POST",
            f"/triples/{plan.closes.triple_id}/supersede",
            json={**body, "reason": f"said later: {claim.value} (memory #{evidence_id})"},
        )
        return Change(
            entity.label, predicate, claim.value, int(made["id"]), closed=plan.closes.triple_id
        )

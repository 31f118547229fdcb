"""What a kept fact claims, as a triple: who or what it is about, a predicate, a value. Pure.

A fact's *head* is its subject and predicate ("sister ana · lives in"); two claims with
one head and two values are one belief replaced by another, whatever words either was
said in: "my sister ana lives in porto" and later "ana moved to lyon last month" share
the head (the person ana, ``lives in``), so the second closes the first
(:mod:`home.memory.knowledge` keeps them, bitemporally, in JMFTS's triples).

Read from the draft (:mod:`home.memory.restate`: the user's own words in the third
person), never invented: the subject is a reference (:class:`EntityRef`: the user, a
relation such as "sister", a name, or a pronoun) that the knowledge book resolves to
one entity; the predicate is the fact's relation with its synonyms folded ("moved to",
"is living in" → ``lives in``); the value is the rest, less the words that only say when
("last month", "these days"). "it's tuesdays not mondays" claims no head but names the
value it replaces (``replaces``), which is how most spoken corrections point at what
they correct. See docs/architecture.md "Memory".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

from home.memory.correction import RELATION_SYNONYMS, RELATION_VERBS, read_slot
from home.memory.fidelity import NUMBER_WORDS

EntityKind = Literal["user", "person", "pet", "thing"]

_FEMALE_TEXT = """
sister mum mom mother wife girlfriend daughter grandma grandmother granny gran nan nana
nanna aunt auntie niece fiancee stepmum stepmom stepdaughter godmother stepsister
"""
_MALE_TEXT = """
brother dad father husband boyfriend son grandpa grandfather grandad granddad gramps uncle
nephew fiance stepdad stepson godfather stepbrother
"""
FEMALE = frozenset(_FEMALE_TEXT.split())
MALE = frozenset(_MALE_TEXT.split())
_PEOPLE_TEXT = """
parent parents partner kid kids child children baby grandson granddaughter cousin friend
boss manager neighbour neighbor colleague coworker flatmate roommate housemate sibling
teacher nanny babysitter bestie mate dentist doctor gp landlord landlady
"""
PEOPLE = frozenset(_PEOPLE_TEXT.split()) | FEMALE | MALE
# Relations said in more than one word; read before the one-word ones.
MULTI_WORD_PEOPLE = (
    "best friend", "best mate", "sister in law", "brother in law", "mother in law",
    "father in law", "daughter in law", "son in law", "other half",
)  # fmt: skip
_PETS_TEXT = """
dog cat puppy kitten rabbit bunny hamster parrot budgie fish tortoise horse pony
guinea pig retriever labrador spaniel terrier beagle
"""
PETS = frozenset(_PETS_TEXT.split())
_PRONOUNS = {"she": "f", "he": "m", "they": None, "her": "f", "him": "m"}
_POSSESSIVES = {"his": "m", "her": "f", "their": None}
_FUNCTION_TEXT = """
a an the this that these those and or but to of in on at for with from by as is are was
were be been it its it's not no so has have had
"""
_FUNCTION = frozenset(_FUNCTION_TEXT.split())
# Words a spoken correction opens with that are no part of the claim.
_OPENERS = re.compile(
    r"^(?:(?:actually|correction|sorry|no|oh|well|wait|okay|ok|so|and|but|oops|right|hmm|"
    r"scratch that|my mistake|the user was wrong|the user made a mistake|the user meant|"
    r"the user got it wrong|that's wrong|that was wrong|not quite|update|just to update)\b"
    r"[\s,.;:!-]*)+"
)
# "it's tuesdays not mondays", "not the twelfth the fourteenth", "oat milk not soy".
_NOT_AFTER = re.compile(r"\bnot\s+(?:on\s+|in\s+|at\s+|the\s+|a\s+|an\s+)*([a-z0-9']+)")
# Saying a thing is gone names the value it replaces: "we sold the kia", "he quit the
# warehouse", "we don't have biscuit anymore", "the oduyas moved out".
_GONE = re.compile(
    r"\b(?:sold|quit|left|lost|got rid of|gave up|cut out|stopped|moved out of|traded in|"
    r"(?:don't|doesn't|no longer) (?:have|has|go to|goes to|work at|works at|take|takes))\s+"
    r"(?:the |a |an |my |her |his |our |their |user's |household's |old )*([a-z0-9]+)"
    r"|\b(?:the )?([a-z0-9]+) (?:moved out|left|is gone|are gone|retired|passed away)\b"
)
_MONTHS = "january february march april may june july august september october november december"
# Words after a value that say when, not what: left out of the value.
_WHEN_TAIL = re.compile(
    r"(?:\s+(?:now|anymore|any more|these days|nowadays|at the moment|currently|recently|"
    r"instead|already|again|too|as well|at new year|at christmas|for good|"
    r"(?:in|this|last|next) (?:the )?(?:week|month|year|weekend|summer|winter|spring|autumn|"
    r"fall|" + _MONTHS.replace(" ", "|") + r")|"
    r"(?:since|from|as of|starting) (?:last |next |this )?[a-z0-9]+|"
    r"a (?:week|month|year|while|couple of \w+) ago|\w+ (?:weeks|months|years|days) ago|"
    r"yesterday|today|tonight))+$"
)
_EXTRA_VERBS = frozenset({"moved", "relocated", "became", "switched", "changed", "started"})
VERBS = RELATION_VERBS | _EXTRA_VERBS
# Relations that name one predicate however they were said.
_PREDICATES = {
    **RELATION_SYNONYMS,
    "relocated to": "lives in",
    "is living in": "lives in",
    "is moving to": "lives in",
    "lives at": "lives in",
    "moved in with": "lives in",
    "moved back to": "lives in",
    "moved down to": "lives in",
    "moved up to": "lives in",
    "moved over to": "lives in",
    "moved out to": "lives in",
    "lives in a": "lives in",
    "lives in an": "lives in",
    "works as": "is a",
    "works as a": "is a",
    "works as an": "is a",
    "is an": "is a",
    "is working as": "is a",
    "is working as a": "is a",
    "became": "is a",
    "became a": "is a",
    "became an": "is a",
    "is now a": "is a",
    "works for": "works at",
    "is working at": "works at",
    "renamed to": "is called",
    "name": "is called",
    "name is": "is called",
    "goes to school at": "goes to",
    "switched to": "uses",
}
#: Not a fact about the subject but who the subject is: "dev is the user's best mate".
IDENTITY = "is who"
#: The predicate that names its subject: its value is also the entity's name.
NAMING = "is called"


@dataclass(frozen=True)
class EntityRef:
    """How a claim names its subject: the user, a relation (to the user, or to ``owner``),
    a name, a pronoun (any may be absent but not all); ``gender`` as the words said it
    (``f``, ``m``), which a pronoun's resolution respects; ``said_before``, of a pronoun,
    the words its sentence said before it, where a name it points at comes first."""

    kind: EntityKind
    relation: str | None = None
    name: str | None = None
    pronoun: str | None = None
    owner: EntityRef | None = None
    gender: str | None = None
    said_before: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The subject as words ("the user", "sister ana", "ana", "she")."""
        if self.kind == "user":
            return "the user"
        words = [w for w in (self.relation, self.name) if w]
        if self.owner is not None and self.relation:
            words[0] = f"{self.owner.label}'s {self.relation}"
        return " ".join(words) if words else (self.pronoun or "")


USER = EntityRef("user")


def gender_of(relation: str | None) -> str | None:
    """``f`` or ``m`` when a relation word says so ("sister", "brother's wife": f)."""
    words = (relation or "").removesuffix(" in law").split()
    last = words[-1] if words else ""
    return "f" if last in FEMALE else "m" if last in MALE else None


@dataclass(frozen=True)
class Claim:
    """One fact as subject, predicate and value; ``replaces`` names a value it says is no
    longer so ("not mondays"), ``since`` the words that said when ("last month")."""

    subject: EntityRef | None
    predicate: str | None
    value: str | None
    replaces: str | None = None
    since: str | None = None

    @property
    def has_head(self) -> bool:
        """Whether it names a subject and a predicate (and a value to hold there)."""
        return self.subject is not None and bool(self.predicate) and bool(self.value)

    @property
    def identity(self) -> bool:
        """Whether it says who its subject is ("dev is the user's best mate")."""
        return self.subject is not None and self.predicate == IDENTITY


def _words(text: str) -> list[str]:
    lowered = text.lower().replace("’", "'")
    lowered = re.sub(r"^the user said:\s*", "", lowered)
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?(?:-[a-z]+)?", lowered)


# Words that follow "X's" only when it means "X is": "ana's moving", "dev's the user's ...".
_AFTER_IS_TEXT = """
now still called user's moving living working studying doing going getting staying
starting training teaching dating seeing leaving coming retiring expecting
"""
_AFTER_IS = frozenset(_AFTER_IS_TEXT.split())


def _is_copula_contraction(word: str, following: str | None) -> bool:
    """Whether ``X's`` before ``following`` is "X is" (not a possessive): "ana's a pilot"."""
    if following is None:
        return False
    return following in _FUNCTION or following in _AFTER_IS


_PARTICIPLES_TEXT = "been gone got had done made taken left quit become moved changed started"
_PARTICIPLES = frozenset(_PARTICIPLES_TEXT.split())


def _expanded(words: list[str]) -> list[str]:
    """Contractions a subject and its verb were said in, written out ("she's" → "she is",
    "he's moved" → "he has moved")."""
    out: list[str] = []
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else None
        if word.endswith("'s") and following in _PARTICIPLES:
            out += [word[:-2], "has"]
        elif word in {"she's", "he's", "it's", "that's", "there's", "who's"} or (
            word.endswith("'s") and _is_copula_contraction(word, following)
        ):
            out += [word[:-2], "is"]
        elif word.endswith("'re"):
            out += [word[:-3], "are"]
        else:
            out.append(word)
    return out


def _relation_at(rest: list[str]) -> tuple[str, list[str]] | None:
    """The one relation ``rest`` starts with ("sister in law", "son's" in "son's best
    friend") and what follows it, or None when it starts with none."""
    joined = " ".join(rest)
    for multi in MULTI_WORD_PEOPLE:
        if joined == multi or joined.startswith((multi + " ", multi + "'s")):
            n = len(multi.split())
            return " ".join(rest[:n]), rest[n:]
    if rest and (rest[0].removesuffix("'s") in PEOPLE or rest[0].removesuffix("'s") in PETS):
        return rest[0], rest[1:]
    return None


def _possessed(owner: EntityRef, rest: list[str]) -> tuple[EntityRef | None, str]:
    """What ``owner``'s ``rest`` names: one of their people or pets ("the user's sister
    ana", "the user's son's best friend"), or an attribute of theirs, returned as a
    predicate prefix ("favourite colour")."""
    found = _relation_at(rest)
    if found is None:
        return owner, " ".join(w for w in rest if w not in _FUNCTION)
    relation, after = found
    named_words = [w for w in after if w not in _FUNCTION]
    if not relation.endswith("'s") and named_words and named_words[0] in _HELD:
        # "the user's son's dentist appointment": the son's, no dentist named appointment
        return owner, " ".join(w for w in rest if w not in _FUNCTION)
    bare = relation.removesuffix("'s")
    kind: EntityKind = "pet" if bare.split()[-1] in PETS else "person"
    of = None if owner.kind == "user" else owner
    who = EntityRef(kind, relation=bare, owner=of, gender=gender_of(bare))
    if relation.endswith("'s"):  # "the user's sister's car", "the user's son's best friend"
        return _possessed(who, after)
    qualifier = next((i for i, w in enumerate(after) if w in _QUALIFYING), len(after))
    named = [w for w in after[:qualifier] if w not in _FUNCTION]  # "manager at work": no name
    for i, word in enumerate(named):
        if word.endswith("'s"):  # "brother kofi's wedding": kofi's, the wedding
            ref = EntityRef(kind, bare, " ".join([*named[:i], word[:-2]]), None, of, who.gender)
            after_name = named[i + 1 :]
            if after_name and _relation_at(after_name) is not None:
                return _possessed(ref, after_name)  # "sister zainab's husband": hers
            return ref, " ".join(after_name)
    return EntityRef(kind, bare, " ".join(named) or None, None, of, who.gender), ""


# What someone has or goes to, never a name: "dentist appointment", "piano lesson".
_HELD_TEXT = """
appointment appointments lesson lessons class classes practice training birthday party
school nursery club team shift shifts job office car bike phone number address flat house
room bedtime diet allergy size check checkup visit match game recital exam test meeting
interview wedding flight surgery operation bill fees
"""
_HELD = frozenset(_HELD_TEXT.split())
# Words after a relation that qualify it, never start its name: "manager at work".
_QUALIFYING = frozenset({"at", "from", "in", "on", "of", "next", "with", "who", "that"})
_NOT_NAMES_TEXT = """
what who where when why how which whose there here everyone everybody someone somebody
nobody anyone anybody everything something nothing anything you we they i me us them one
all both each some many most none other another today tomorrow yesterday please thanks
"""
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())


def _named(words: list[str]) -> tuple[EntityRef | None, str]:
    """A subject said by name ("ana", "maya's piano"), or None when the words are no name."""
    if not words or len(words) > 3 or any(w in _FUNCTION or w in VERBS for w in words):
        return None, ""
    if any(w.removesuffix("'s") in _NOT_NAMES for w in words):
        return None, ""
    if words[0].endswith("'s"):  # "maya's piano"
        owner = EntityRef("person", name=words[0][:-2])
        return _possessed(owner, words[1:]) if len(words) > 1 else (None, "")
    return EntityRef("person", name=" ".join(words)), ""


def _subject(words: list[str]) -> tuple[EntityRef | None, str]:
    """The reference the words before the verb make, and a predicate prefix they carry
    ("the user's favourite colour" → the user, ``favourite colour``)."""
    owner: EntityRef | None = None
    rest = words
    if words in (["the", "user"], ["the", "user's", "household"]):
        return USER, ""
    if len(words) == 1 and words[0] in _PRONOUNS:
        return EntityRef("person", pronoun=words[0], gender=_PRONOUNS[words[0]]), ""
    if words[:2] == ["the", "user's"]:
        owner, rest = USER, words[2:]
    elif words and words[0] in _POSSESSIVES:
        owner = EntityRef("person", pronoun=words[0], gender=_POSSESSIVES[words[0]])
        rest = words[1:]
    elif words and words[0] == "the" and 1 < len(words) <= 4:
        if _relation_at(words[1:]) is None:
            return EntityRef("thing", relation=" ".join(words[1:])), ""
        owner, rest = USER, words[1:]  # "the dog": the household's
    elif _relation_at(words) is not None:
        owner = USER  # "gran's in a care home": the user's gran, nobody named gran
    return _named(words) if owner is None else _possessed(owner, rest)


def _replaced(text: str) -> tuple[str, str | None]:
    """The text less its "not X" and the X it says is no longer so."""
    match = _NOT_AFTER.search(text)
    if match is None:
        return text, None
    rest = (text[: match.start()] + " " + text[match.end() :]).strip()
    return " ".join(rest.split()), match.group(1)


def _predicate(prefix: str, relation: str) -> str:
    words = [w for w in relation.split() if w != "the"]
    said = " ".join(words)
    if prefix:  # "favourite colour is": the attribute is the predicate
        bare = set(words) <= {"is", "are", "called", "a", "an"}
        said = prefix if bare else f"{prefix} {' '.join(w for w in words if w not in ('a', 'an'))}"
    return _PREDICATES.get(said, said)


_JOINING_TEXT = "of with to for from by at in on and or is are was were the a an"
_JOINING = frozenset(_JOINING_TEXT.split())


def _clauses(words: list[str]) -> list[list[str]]:
    """The words split where a pronoun or "the user" starts a new clause with a verb of
    its own ("she changed jobs she is a pilot now")."""
    starts = [0]
    for i in range(1, len(words) - 1):
        the_user = words[i : i + 3][:2] == ["the", "user"]
        starts_clause = words[i] in _PRONOUNS or the_user
        nxt = (words[i + 2 : i + 3] if the_user else [words[i + 1]]) or [""]
        if starts_clause and nxt[0] in VERBS and words[i - 1] not in VERBS:
            starts.append(i)
        elif (
            words[i] in _POSSESSIVES
            and words[i - 1] not in _JOINING | VERBS
            and any(w in VERBS for w in words[i + 2 : i + 4])
        ):
            starts.append(i)  # "she has gone off that her favourite is ethiopian"
    return [words[a:b] for a, b in zip(starts, [*starts[1:], len(words)], strict=True)]


_BEFORE_A_NOUN = frozenset({"at", "to", "from", "for", "after", "before", "off"})
_VALUE_ENDS = frozenset({"he", "she", "they", "we", "it", "i", "but", "because", "so", "and"})


def _claim_of(words: list[str]) -> Claim | None:
    # A verb word after a preposition is a noun: "the user's manager at work is ...".
    verb = next(
        (
            i
            for i, w in enumerate(words)
            if w in VERBS and (i == 0 or words[i - 1] not in _BEFORE_A_NOUN)
        ),
        None,
    )
    if verb is None or verb == 0:
        return None
    subject, prefix = _subject(words[:verb])
    after = words[verb:]
    end = next(
        (
            i
            for i, w in enumerate(after)
            if i > 1 and (w in _VALUE_ENDS or after[i : i + 2] == ["the", "user"])
        ),
        len(after),
    )
    rest = " ".join(after[:end])  # "drives a taxi now he quit in august": the taxi
    since_match = _WHEN_TAIL.search(rest)
    since = since_match.group(0).strip() if since_match else None
    if since_match is not None and read_slot(f"The user's x {rest[: since_match.start()]}."):
        rest = rest[: since_match.start()]
    else:
        since = None
    slot = read_slot(f"The user's x {rest}.")
    if slot is None:
        return Claim(subject, None, None, since=since)
    value = " ".join(w for w in slot.value.split() if w not in {"a", "an", "the"})
    predicate = _predicate(prefix, slot.relation)
    if subject is not None and subject.kind != "user" and not prefix and predicate == "is":
        owned = _relation_at(value.split()[1:]) if value.startswith("user's ") else None
        if owned is not None and not owned[1]:  # "dev is the user's best mate"
            ref = EntityRef(subject.kind, owned[0], subject.name, subject.pronoun)
            return Claim(ref, IDENTITY, None, since=since)
        if subject.relation and not subject.name and _may_name(value):
            predicate = NAMING  # "his best friend is ollie": a name
    if subject is not None and predicate in _PAST:
        return Claim(subject, None, value or None, since=since)  # what was, not what is
    if subject is not None and predicate in _COPULAS and after[0] in _COPULAS and not prefix:
        # "leo is allergic to peanuts", "leo's training tonight": said, and no head.
        head = _copula_head(subject, rest.split()[1:], value, since)
        return Claim(subject, head, value or None, since=since)
    return Claim(subject, predicate, value or None, since=since)


_COPULAS = frozenset({"is", "are", "is a"})
_PAST = frozenset({"was", "were"})
# What a bare "is" heads, by the words after it: a role, what someone is doing these
# days, a place, an age (:func:`_copula_head`). Anything else ("allergic to peanuts",
# "vegetarian") has no one value that a later "is" replaces, so it is no head
# (docs/architecture.md "Memory", the knowledge book).
LIVES_IN = "lives in"
AGE = "age"
# What someone is doing these days ("studying law", "seeing hana"): one at a time. Not what
# they do on one occasion ("training tonight", "going to portugal this summer").
DOING = "is doing"
_DOING = re.compile(r"[a-z]{2,}ing")
_FOR_NOW = re.compile(
    r"\b(?:tonight|today|tomorrow|later|this (?:morning|afternoon|evening|week|weekend|"
    r"summer|winter|spring|autumn|year)|next \w+|on (?:monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday)\b)"
)
_AGE_WORDS = frozenset({"years", "year", "old", "months", "month"})
# "in year six", "in hospital", "in charge": in, and no place.
_NOT_PLACES = frozenset(
    {"year", "class", "grade", "form", "reception", "bed", "hospital", "charge", "love"}
)


def _copula_head(subject: EntityRef, after: list[str], value: str, when: str | None) -> str | None:
    """The head of a bare "is" claim, or None: what someone is (a role, after "a") and is
    doing these days; and, of anyone but the user, where they live and their age."""
    if not after or not value:
        return None
    words, place = value.split(), after[0] in {"in", "at"}
    doing = _DOING.fullmatch(after[0]) is not None and not _FOR_NOW.search(when or "")
    heads = {
        "is a": after[0] in {"a", "an"},  # "priya's a midwife now"; not "on a new food"
        DOING: doing,  # "diego's studying law", "i'm learning spanish"; not "... tonight"
        # "i'm on ramipril", "i'm allergic to penicillin": no head of the user's.
        LIVES_IN: subject.kind != "user"
        and place
        and words[0] not in _NOT_PLACES,  # "claire's in cardiff now"; not "in year six"
        AGE: subject.kind != "user"
        and not place
        and all(w.isdigit() or w in NUMBER_WORDS or w in _AGE_WORDS for w in words),
    }
    return next((head for head, said in heads.items() if said), None)


# What someone is, said in one word that is no name: "is vegetarian", "is retired".
_STATES_TEXT = """
vegetarian vegan pescatarian pregnant married divorced engaged separated widowed single
retired unemployed ill sick poorly fine better worse older younger taller shorter away
home back busy fussy shy deaf blind diabetic coeliac celiac asthmatic left right handed
"""
_STATES = frozenset(_STATES_TEXT.split())
_STATE_ENDINGS = ("arian", "ous", "ful", "ive", "able", "ible", "ic", "ish", "less")


def _may_name(value: str) -> bool:
    """Whether a one-word value after a relation's "is" may be a name ("ollie"), not what
    they are ("vegetarian", "retired", "anxious")."""
    words = value.split()
    if len(words) != 1 or words[0] in _STATES or words[0] in _NOT_NAMES:
        return False
    return not (len(words[0]) >= 6 and words[0].endswith(_STATE_ENDINGS))


def read_claim(draft: str) -> Claim | None:
    """The claim of one fact's draft, or None when it makes none.

    The last clause that reads as a claim wins ("she changed jobs she is a pilot now"
    claims she is a pilot); a "not X" anywhere is kept as what it replaces.
    """
    text = " ".join(_expanded(_words(draft)))
    text = _OPENERS.sub("", text).strip()
    text = re.sub(r"\bmoved (?:down|back|up|over|out|away|across) to\b", "moved to", text)
    text = _ALONE.sub("", text)
    text, replaces = _replaced(text)
    gone = None if replaces is not None else _gone(text)
    if gone is not None:
        replaces = gone.group(1) or gone.group(2)
    words = text.split()
    claims = [c for c in (_claim_of(clause) for clause in _clauses(words)) if c is not None]
    headed = [c for c in claims if c.has_head]
    chosen = headed[-1] if headed else (claims[-1] if claims else None)
    if chosen is None:
        if replaces is None:
            return None
        # "we sold the kia": gone, nothing in its place; "not the twelfth the fourteenth".
        value = None if gone else " ".join(w for w in words if w not in _FUNCTION) or None
        return Claim(None, None, _as_said(value, draft), replaces=replaces)
    value = _as_said(chosen.value, draft)
    subject = _introduced(text, _earlier_subject(chosen.subject, claims))
    return Claim(subject, chosen.predicate, value, replaces, chosen.since)


# "lives on her own in a bungalow": how, not who; no pronoun of a subject.
_ALONE = re.compile(r"\b(?:on (?:her|his|their) own|by (?:herself|himself|themselves))\b")


def _gone(text: str) -> re.Match[str] | None:
    """The first place ``text`` says something is gone that names what ("he has left
    teaching": teaching, not the "has" of "has left")."""
    found = _GONE.search(text)
    while found is not None:
        said = found.group(1) or found.group(2)
        if said not in _FUNCTION and said not in _PRONOUNS:
            return found
        found = _GONE.search(text, found.start() + 1)  # the matches may overlap
    return None


def _earlier_subject(subject: EntityRef | None, claims: list[Claim]) -> EntityRef | None:
    """A pronoun's referent when an earlier clause of the same sentence named one of its
    gender ("my brother in law is called dev and he drives a red honda": dev), else
    ``subject`` as read."""
    if subject is None or subject.pronoun not in _PRONOUNS:
        return subject
    for claim in claims:
        ref = claim.subject
        if ref is None or ref.kind not in ("person", "pet") or ref.pronoun is not None:
            continue
        if subject.gender is not None and ref.gender not in (None, subject.gender):
            continue
        if claim.predicate == NAMING and claim.value and ref.name is None:
            return replace(ref, name=claim.value.lower())
        return ref
    return subject


# "the household has got a rabbit now as well": a being the sentence brings in.
_INTRODUCES = re.compile(
    r"\b(?:has|have|got|adopted|bought|getting|is getting) (?:got )?(?:a|an|another) "
    r"(?:new |little |baby |young )?([a-z]+)\b"
)


def _introduced(text: str, subject: EntityRef | None) -> EntityRef | None:
    """A pronoun's referent when the same sentence brings in a being before it ("we've got
    a rabbit now she's called clover": the rabbit, not the dog said of days ago);
    otherwise ``subject`` as read, with the words said before the pronoun."""
    if subject is None or subject.pronoun is None or subject.pronoun not in _PRONOUNS:
        return subject
    at = text.find(f" {subject.pronoun} ")
    found = _INTRODUCES.search(text)
    if found is None or found.start() > at:
        before = [w.removesuffix("'s") for w in text[: max(at, 0)].split()]
        return replace(subject, said_before=tuple(before))
    word = found.group(1)
    if word in PETS:
        return EntityRef("pet", relation=word, gender=subject.gender)
    if word in PEOPLE:
        return EntityRef("person", relation=word, gender=subject.gender or gender_of(word))
    return subject


def _as_said(value: str | None, draft: str) -> str | None:
    """``value`` (read lower case) in the case the draft has it ("Lyon"), when found."""
    if value is None:
        return None
    pattern = r"\W+".join(re.escape(w) for w in value.split())
    found = re.search(rf"(?<![\w']){pattern}(?![\w'])", draft, re.IGNORECASE)
    return found.group(0) if found is not None else value


def swapped_value(memory: str, old: str, new: str) -> str | None:
    """``memory`` with the value ``old`` said as ``new`` ("The user's sister ana lives in
    porto." → "... lives in lyon."), or None when ``memory`` does not hold ``old`` as words.

    A correction stored this way reads as the fact it corrects, so the questions that
    found the old memory find the new one; every word of it was said (the old memory's
    then, the new value now)."""
    pattern = re.compile(rf"(?<![\w']){re.escape(old)}(?![\w'])", re.IGNORECASE)
    if not old.strip() or not new.strip() or pattern.search(memory) is None:
        return None
    return pattern.sub(lambda _: new, memory, count=1)

"""The intent step: conversation, or one of the verbs, decided before any model.

A person can ask home for a few things that are not conversation: write a note in the
journal, remember or forget a fact, correct one, hand a question to the operator, set,
cancel or list reminders. The embedded model (SmolLM2-135M) answers everything in prose
and never names a tool, so the choice is made here, in the spirit of the keep gate
(:mod:`home.memory.keep_gate`): on the turn's MiniLM embedding and its words, against
labelled utterances (:data:`EXAMPLES_FILE`, :data:`TRAINING_FILE`), embedded and fitted
when the step loads; no weights are stored.

What a turn asks is said in its first words; the rest is what it is about. MiniLM's
vector of a whole turn is mostly the latter ("remember my boiler is a combi" sits by
"my boiler is a combi"), so a turn is also embedded by its *frame* (:func:`frame`, the
first :data:`FRAME_WORDS` words past any "um" or "can you").

Cues carry what the embedding blurs. "remind me to take the bread out" and "remind me
what my sister's name is" sit close in MiniLM's space; only the word after "remind me"
tells a reminder from a question. Each verb has patterns of the form a request to the
assistant takes ("forget ..." at the start, after any "um" or "can you", never "i
forgot ..."); each is one column of the classifier's input (:func:`features`).

:func:`decide` reads the classifier's probabilities; :class:`IntentStep` fits the classifier
and embeds text.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from home.intent.errors import IntentError
from shared.errors import SchemaError
from shared.yaml_source import load_yaml

if TYPE_CHECKING:
    from home.jmfts.embedder import Embedder

#: The labelled utterances the step learns from: examples written for it, and the tuning
#: halves of its labelled sets (provenance in the file's header).
EXAMPLES_FILE = Path(__file__).with_name("intent_examples.yaml")
TRAINING_FILE = Path(__file__).with_name("intent_training.yaml")
#: Words of a turn read at most: a request says what it asks long before this, and the
#: cue patterns' cost stays bounded on any input.
MAX_WORDS = 80
#: Words of a turn's frame, read past its lead-in.
FRAME_WORDS = 3
#: The scale of a cue feature beside the unit embeddings' coordinates.
CUE_SCALE = 1.0
#: Inverse regularisation strength of the classifier.
REGULARISATION_C = 10.0

Vectors = npt.NDArray[np.float32]


class Verb(enum.Enum):
    """What a turn asks of home."""

    CHAT = "chat"
    NOTE = "note"
    REMEMBER = "remember"
    FORGET = "forget"
    CORRECT = "correct"
    ASK_OPERATOR = "ask_operator"
    REMIND = "remind"
    CANCEL_REMINDER = "cancel_reminder"
    LIST_REMINDERS = "list_reminders"


# What may stand before a request without changing it: fillers, discourse openers, a
# polite frame ("can you", "i want you to", "please").
_LEAD = (
    r"^(?:(?:um+|uh+|uhm|erm|er|ah|hmm|okay|ok|so|hey|hi|well|oh|and|right|alright|now|"
    r"listen|quick|quickly|just|also|then|tether|hey\s+tether)\s+)*"
    r"(?:(?:can|could|would|will)\s+you\s+|i\s+(?:want|need|'d\s+like|would\s+like)\s+you\s+to\s+)?"
    r"(?:please\s+)?(?:just\s+)?"
)
# "the alarm code", "the timer light": a reminder word naming something else.
_REMINDERS = (
    r"(?:reminders?|timers?|alarms?|wake\s*up\s+calls?)"
    r"(?!\s+(?:codes?|clocks?|systems?|company|panel|letters?|lights?|sounds?|buttons?))"
)
_QUESTION_WORD = r"(?:what|who|whom|whose|where|when|which|how|whether|if|of)"
_DURATION = (
    r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|thirty|forty|"
    r"half|\d+)"
)

_CUES: dict[Verb, tuple[str, ...]] = {
    Verb.REMIND: (
        _LEAD + rf"remind\s+me\b(?!\s+{_QUESTION_WORD}\b)",
        _LEAD + r"(?:set|start|put\s+on)\s+(?:up\s+)?(?:a|an|the|me\s+a)?\s*(?:[\w-]+\s+){0,2}"
        r"(?:timer|reminder|alarm)\b",
        _LEAD + r"(?:a\s+)?(?:timer|alarm)\s+(?:for|at|of|in)?\s*" + _DURATION,
        _LEAD + r"wake\s+me\b",
        _LEAD + r"(?:in|at|after|on)\s+.{1,40}?\b(?:remind|tell|ping|nudge|wake|call)\s+me\b",
        _LEAD + r"(?:give\s+me\s+a\s+(?:shout|nudge|buzz|call)|nudge\s+me|ping\s+me)\b",
        r"\b(?:make|create|add|give\s+me|i\s+need|i\s+want|i\s+wanna|i'd\s+like|set\s+up|schedule|"
        r"(?:wanna|want\s+to|like\s+to)\s+have)\s+"
        rf"(?:(?:a|an|one|me\s+a|me\s+an|another|two|some)\s+)?(?:[\w-]+\s+)?{_REMINDERS}\b(?!\s+(?:is|was|went)\b)",
        rf"\b(?:need|want)\s+(?:an?\s+|some\s+|two\s+)?{_REMINDERS}\s+(?:set|for|at|to)\b",
        r"\b(?:let\s+me\s+know|tell\s+me|alert\s+me|warn\s+me)\s+when\b.*\b(?:minutes?|hours?|seconds?)\b",
        r"^(?!.*\b(?:don't|do\s+not)\s+(?:wake|get)\b).*\b(?:get|wake)\s+me\s+up\b",
    ),
    Verb.CANCEL_REMINDER: (
        r"\b(?:cancel|stop|delete|remove|clear|kill|scrap|drop|undo|turn\s+off|switch\s+off|"
        r"get\s+rid\s+of|call\s+off|never\s+mind|forget|don't\s+need|no\s+need)\b"
        rf"(?:\s+[\w']+){{0,6}}?\s+{_REMINDERS}\b",
        rf"\b{_REMINDERS}\s+off\b",
        rf"\b{_REMINDERS}\b(?:\s+[\w']+){{0,4}}?\s+(?:cancelled|removed|deleted|silenced|gone)\b",
        rf"\b(?:take\s+away|silence|disable|snooze)\b(?:\s+[\w']+){{0,4}}?\s+{_REMINDERS}",
        rf"\b(?:don't|do\s+not)\s+(?:want|need)\s+(?:any|the|my|that|this|a)\b(?:\s+[\w']+){{0,3}}?\s+{_REMINDERS}",
        _LEAD + r"(?:don't|no\s+need\s+to)\s+remind\s+me\b",
        r"\b(?:don't|do\s+not)\s+wake\s+me\b",
    ),
    Verb.LIST_REMINDERS: (
        r"\b(?:what|which|any|list|show|read|tell\s+me|how\s+many|do\s+i\s+have|have\s+i\s+got|"
        rf"check|is\s+there|are\s+there|did\s+i\s+set)\b(?:\s+[\w']+){{0,5}}?\s+{_REMINDERS}\b",
        r"\bhow\s+(?:long|much\s+time|many\s+minutes)\b.{0,25}\b(?:left|remaining|until|till)\b",
        rf"\bwhen(?:'s|\s+is|\s+does|\s+will)\s+(?:my|the)\s+(?:next\s+)?(?:[\w-]+\s+)?{_REMINDERS}\b",
        rf"\bis\s+(?:the|my)\s+(?:[\w-]+\s+)?{_REMINDERS}\s+still\b",
        r"\b(?:what|anything)\b.{0,30}\bto\s+remind\s+me\b",
        rf"\b(?:give\s+me|i\s+want\s+to\s+(?:know|see|hear)|let\s+me\s+(?:know|see|hear))\s+"
        rf"(?:my|the|all|all\s+my|all\s+the)\s+{_REMINDERS}",
        r"\bon\s+my\s+reminders?\s+list\b",
        r"\b(?:should|need\s+to)\s+be\s+reminded\b",
        r"\bwhat\s+(?:did|have)\s+i\s+(?:ask|asked|told|tell)\s+you\s+to\s+remind\s+me\b",
        rf"\b{_REMINDERS}\s+(?:situation|status|schedule)\b",
        rf"\bdid\s+you\s+(?:set|place|make|add|create|put)\s+(?:the|a|my|that)\s+{_REMINDERS}",
    ),
    Verb.FORGET: (
        _LEAD + r"(?:forget|erase|delete|wipe|scrub|remove|unlearn|drop|purge|get\s+rid\s+of)\b"
        r"(?!\s+(?:it|to)\b)(?!.*\b(?:list|contacts?|e-?mails?|songs?|playlist|files?|photos?|apps?|"
        r"events?|meetings?|calendar|messages?|texts?)\b)",
        _LEAD + r"(?:stop\s+remembering|don't\s+(?:remember|keep|store|save)|"
        r"do\s+not\s+(?:remember|keep))\b",
        r"\bi\s+don't\s+want\s+you\s+to\s+(?:remember|keep|know)\b",
        r"\bdon't\s+(?:keep|store|save|remember)\s+(?:it|that|this)\b",
        r"\byou\s+can\s+(?:forget|delete|erase|drop|bin)\b",
        r"\b(?:everything|all|what)\s+you\s+know\s+about\b(?!.*\?$)(?=.*\b(?:forget|erase|delete|wipe|purge|clear)\b|^(?:forget|erase|delete|wipe|purge|clear)\b)",
    ),
    Verb.REMEMBER: (
        _LEAD
        + r"(?:remember|memori[sz]e|don't\s+forget|do\s+not\s+forget|make\s+sure\s+you\s+remember)"
        r"\b(?!\s+to\b)",
        _LEAD + r"(?:keep\s+(?:this\s+|that\s+)?in\s+mind|don't\s+let\s+me\s+forget|"
        r"for\s+future\s+reference|"
        r"(?:save|store|commit|hold\s+on\s+to|hang\s+on\s+to|hold\s+onto|keep\s+hold\s+of|keep)\s+(?:this|that)"
        r"(?:\s+to\s+memory)?)\b",
    ),
    Verb.NOTE: (
        _LEAD + r"(?:make|take|add|write|put|leave)\s+(?:a\s+|an\s+|this\s+|that\s+|it\s+)?"
        r"(?:note|journal|diary|entry|down|in\s+my\s+(?:journal|diary|notes))\b",
        _LEAD + r"(?:note|jot|log|journal|record)\b(?!\s+(?:me|in)\b)",
        _LEAD + r"(?:write|jot)\s+(?:this\s+|that\s+|it\s+)?down\b",
        r"\b(?:in|to|into)\s+(?:my\s+|the\s+)?(?:[\w']+\s+)?(?:journal|diary|notes|log)\b",
        r"^(?:dear\s+diary|note\s+to\s+self|(?:a\s+)?new\s+(?:note|journal\s+entry|diary\s+entry))\b",
    ),
    Verb.CORRECT: (
        r"^(?:(?:um+|uh+|oh|no|nope|sorry|wait|hang\s+on|small|quick)\s+)*"
        r"(?:actually\b(?!\s+(?:can|could|would|will|what|who|how|where|when|why|is|are|do|does|"
        r"i\s+think|never\s+mind|let's|please)\b)|correction|wrong|i\s+meant|i\s+misspoke|let\s+me\s+correct|"
        r"that's\s+(?:wrong|not\s+right|incorrect|not\s+true|not\s+what\s+i\s+said)|"
        r"that\s+is\s+(?:wrong|not\s+right|incorrect)|you(?:'ve|\s+have)?\s+got\s+(?:it|that|this)\s+wrong|"
        r"(?:update|change|fix)\s+that)",
        r"\b[\w']+\s+not\s+(?:[\w']+\s+){0,2}[\w']+$",
    ),
    Verb.ASK_OPERATOR: (
        r"\b(?:ask|check\s+with|get|have|let|tell|message|query|consult|see\s+if|pass\s+(?:this|it)\s+to|"
        r"run\s+it\s+past)\s+(?:the\s+)?operator\b",
        _LEAD + r"(?:the\s+)?operator\b(?!\s+(?:at|of|from|was|is)\b)",
        r"\b(?:can|could|will|would)\s+the\s+operator\b",
        r"\b(?:send|forward|pass|give|put)\s+(?:this|it|that)?\s*(?:to|over\s+to)\s+the\s+operator\b",
    ),
}
# A recogniser or a keyboard may drop the apostrophe: "dont", "whats". Every apostrophe
# in a cue is optional.
_COMPILED: dict[Verb, tuple[re.Pattern[str], ...]] = {
    verb: tuple(re.compile(p.replace("'", "'?")) for p in patterns)
    for verb, patterns in _CUES.items()
}
_NOT_WORDS = re.compile(r"[^a-z0-9' ]+")


_LEAD_IN = re.compile(_LEAD)


def spoken_form(text: str) -> str:
    """``text`` as the recogniser would write it: lower case, no punctuation but
    apostrophes, single spaces (typed turns are read like spoken ones); its first
    :data:`MAX_WORDS` words."""
    words = _NOT_WORDS.sub(" ", text[: MAX_WORDS * 40].lower().replace("’", "'")).split()
    return " ".join(words[:MAX_WORDS])


def frame(text: str) -> str:
    """The first :data:`FRAME_WORDS` words of ``text`` past its lead-in (fillers,
    openers, "can you", "please"): where a request says what it asks."""
    spoken = spoken_form(text)
    lead_in = _LEAD_IN.match(spoken)
    rest = spoken[lead_in.end() :] if lead_in else spoken
    return " ".join(rest.split()[:FRAME_WORDS]) or spoken


def cues(text: str) -> frozenset[Verb]:
    """The verbs whose cue patterns match ``text`` (read in :func:`spoken_form`)."""
    spoken = spoken_form(text)
    return frozenset(
        v for v, patterns in _COMPILED.items() if any(p.search(spoken) for p in patterns)
    )


@dataclass(frozen=True)
class Decision:
    """The intent step's verdict on one turn: the verb, its probability, and how far
    ahead of the runner-up it is."""

    verb: Verb
    score: float
    margin: float
    cues: frozenset[Verb]
    scores: Mapping[Verb, float]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "verb": self.verb.value,
            "score": self.score,
            "margin": self.margin,
            "cues": sorted(v.value for v in self.cues),
            "scores": {v.value: s for v, s in self.scores.items()},
        }


def features(
    whole: Vectors, framed: Vectors, matched: frozenset[Verb], *, use_cues: bool
) -> Vectors:
    """One turn's row: its whole and frame embeddings, then one column per verb for its cue."""
    parts = [whole, framed]
    if use_cues:
        parts.append(np.array([CUE_SCALE if v in matched else 0.0 for v in Verb], dtype=np.float32))
    return np.concatenate(parts)


def decide(
    probabilities: Sequence[float], verbs: Sequence[Verb], matched: frozenset[Verb]
) -> Decision:
    """The decision from the classifier's probabilities over ``verbs`` (its class order)."""
    scores = {verb: round(float(p), 4) for verb, p in zip(verbs, probabilities, strict=True)}
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    (verb, best), (_, second) = ranked[0], ranked[1]
    return Decision(verb, best, round(best - second, 4), matched, scores)


def _read_yaml(path: Path) -> object:
    try:
        return load_yaml(path)
    except SchemaError as exc:  # names the file and, for bad YAML, the line
        raise IntentError(f"the intent step's examples: {exc}") from exc


def _read_section(path: Path, where: str, raw: object) -> dict[Verb, tuple[str, ...]]:
    if not isinstance(raw, dict):
        raise IntentError(
            f"{path}: {where}expected a mapping of verb to utterances, got {raw!r:.80}"
        )
    names = {v.value for v in Verb}
    examples: dict[Verb, tuple[str, ...]] = {}
    for key, items in raw.items():
        if key not in names:
            raise IntentError(
                f"{path}: {where}{key!r}: not a verb (one of {', '.join(sorted(names))})"
            )
        if not isinstance(items, list):
            raise IntentError(f"{path}: {where}{key}: expected a list of utterances")
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                raise IntentError(f"{path}: {where}{key}[{i}]: expected an utterance, got {item!r}")
        examples[Verb(key)] = tuple(item.strip() for item in items)
    return examples


def read_examples(path: Path = EXAMPLES_FILE) -> dict[Verb, tuple[str, ...]]:
    """Read a ``verb: [utterance, ...]`` examples file (every verb at least once); errors
    name the file and key."""
    examples = _read_section(path, "", _read_yaml(path))
    missing = [v.value for v in Verb if not examples.get(v)]
    if missing:
        raise IntentError(f"{path}: {missing[0]!r}: expected at least one utterance")
    return examples


def merged(*sources: Mapping[Verb, Sequence[str]]) -> dict[Verb, tuple[str, ...]]:
    """The utterances of every source, per verb, in order."""
    out: dict[Verb, tuple[str, ...]] = {}
    for source in sources:
        for verb, texts in source.items():
            out[verb] = (*out.get(verb, ()), *texts)
    return out


def read_training(path: Path = TRAINING_FILE) -> dict[Verb, tuple[str, ...]]:
    """Read a file of named sections, each ``verb: [utterance, ...]``, merged."""
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise IntentError(f"{path}: expected a mapping of section to verbs, got {raw!r:.80}")
    return merged(*(_read_section(path, f"{name}: ", body) for name, body in raw.items()))


class IntentStep:
    """A classifier fitted on the labelled utterances when built, and an embedder to
    judge new turns with.

    Multinomial logistic regression over the features of :func:`features`, classes
    weighted by their size (chat has the most examples; a verb should not lose for it).
    Fitting takes well under a second; embedding the examples takes the rest of loading.
    ``use_cues`` off fits and decides without the cue columns: what the words add.
    """

    def __init__(
        self,
        embedder: Embedder,
        examples: Mapping[Verb, Sequence[str]],
        *,
        use_cues: bool = True,
    ) -> None:
        # Imported here: scikit-learn loads only when a step is actually built.
        from sklearn.linear_model import LogisticRegression  # noqa: PLC0415

        self.embedder = embedder
        self.examples = examples
        self.use_cues = use_cues
        texts = [t for texts in examples.values() for t in texts]
        labels = [verb.value for verb, texts in examples.items() for _ in texts]
        self.model = LogisticRegression(
            C=REGULARISATION_C, class_weight="balanced", max_iter=5000, random_state=0
        )
        rows = self._rows(texts, self._cues(texts))
        if use_cues:
            # Each example is shown twice, with and without its cue columns. The cues were
            # written from these very examples, so every one matches its own: fitted on
            # that alone, the model would learn that a turn no cue matches is chat, and
            # a request worded in a way no cue foresaw would always be lost. Shown without
            # them too, it learns the verbs from the embeddings, and a cue adds to that.
            blind = rows.copy()
            blind[:, -len(Verb) :] = 0.0
            rows, labels = np.concatenate([rows, blind]), labels + labels
        self.model.fit(rows, labels)
        self.verbs = [Verb(c) for c in self.model.classes_]
        # The first decisions pay for what grows lazily (onnxruntime's buffers for each
        # new batch shape, scikit-learn's first predict: 20-28 ms, then 6): loading pays
        # it, with turns of a request's usual lengths, instead of a person's first turns.
        warm = "remind me in ten minutes to take the bins out and the recycling " * 3
        for words in (4, 12, 24, 12):
            self.decide([" ".join(warm.split()[:words])])

    def _embed(self, texts: Sequence[str]) -> Vectors:
        try:
            return self.embedder.embed([spoken_form(t) for t in texts])
        except Exception as exc:  # the embedder's own failures stop here, named
            raise IntentError(f"the embedder failed on {len(texts)} utterances: {exc}") from exc

    def _cues(self, texts: Sequence[str]) -> list[frozenset[Verb]]:
        return [cues(t) if self.use_cues else frozenset() for t in texts]

    def _rows(self, texts: Sequence[str], matched: Sequence[frozenset[Verb]]) -> Vectors:
        vectors = self._embed([*texts, *(frame(t) for t in texts)])
        wholes, frames = vectors[: len(texts)], vectors[len(texts) :]
        return np.stack(
            [
                features(w, f, m, use_cues=self.use_cues)
                for w, f, m in zip(wholes, frames, matched, strict=True)
            ]
        )

    def decide(self, texts: Sequence[str]) -> list[Decision]:
        """A decision per turn, in order."""
        if not texts:
            return []
        matched = self._cues(texts)
        probabilities = self.model.predict_proba(self._rows(texts, matched))
        return [decide(row, self.verbs, m) for row, m in zip(probabilities, matched, strict=True)]


def load_intent_step(
    embedder: Embedder | None = None,
    examples: Path = EXAMPLES_FILE,
    training: Path | None = TRAINING_FILE,
    *,
    use_cues: bool = True,
) -> IntentStep:
    """The step fitted on the shipped examples and training utterances, with JMFTS's
    int8 MiniLM graph unless told otherwise (one onnxruntime thread, as the keep gate: it
    runs beside the language model). The step only compares its own vectors, so the int8
    graph's small drift from JMFTS's is no matter: on the training utterances (five-fold)
    it scored as the float graph did (accuracy 0.953 against 0.951), in about a third of
    the time a turn (one of 17 words: 5 against 14 ms p50; `make bench NAME=intent`)."""
    if embedder is None:
        # Imported here: onnxruntime loads only when a step is actually built.
        from home.jmfts.embedder import OnnxMiniLM  # noqa: PLC0415
        from home.jmfts.errors import EmbedderError  # noqa: PLC0415

        try:
            embedder = OnnxMiniLM(threads=1, quantized=True)
        except EmbedderError as exc:
            raise IntentError(f"the intent step has no embedder: {exc}") from exc
    labelled = read_examples(examples)
    if training is not None:
        labelled = merged(labelled, read_training(training))
    return IntentStep(embedder, labelled, use_cues=use_cues)

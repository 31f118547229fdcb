"""A verb's call read by the words its request is made in: its frame.

Most requests say what they ask in a frame the desk knows ("note that …", "ask the
operator …", "forget what I said about …", "remind me in ten minutes to …"), and what
follows the frame is the call's argument: :func:`framed_call` reads it in microseconds.
On the call set's note, ask and forget turns the frames alone were right on 89 % (tuning
half) and 75 % (held-out), the embedded model writing every call under its grammar on
46 % and 64 %, and frames first, the model where no frame is known, on 96 % and 79 %
(``make bench NAME=verb_calls``). A request in a frame these patterns do not know ("put
in my diary that …", "stop remembering that …") has no framed call; the embedded model
writes it (home/intent/calls.py), and a desk whose model takes no grammar hands the
whole turn on (:func:`unframed_call`). docs/architecture.md "The intent step".
"""

from __future__ import annotations

import re

from home.intent.calls import VerbCall
from home.intent.step import Verb, spoken_form

_NOTE_FRAME = re.compile(
    r"^(?:.*?\b)?(?:make\s+a\s+note|take\s+a\s+note|note\s+down|note|write\s+down|jot\s+down|"
    r"add\s+(?:a\s+note\s+)?to\s+(?:my|the)\s+(?:journal|notes)|journal|log)"
    r"(?:\s+(?:that|of|this|down|it))*\s*"
)
_FORGET_THAT = re.compile(
    r"\b(?:forget|delete|scratch|erase|remove|drop|unlearn)\s+(?:that|it|this|the\s+last\s+"
    r"(?:thing|one|fact)|what\s+i\s+just\s+said)\b|\bdon'?t\s+(?:remember|keep)\s+(?:that|it|this)\b"
)
_FORGET_ABOUT = re.compile(
    r"\b(?:forget|delete|erase|remove)\s+(?:what\s+i\s+(?:said|told\s+you)\s+(?:about|of)\s+|"
    r"(?:everything\s+|anything\s+)?about\s+|my\s+)?(?P<topic>.+)$"
)
_ASK_FRAME = re.compile(
    r"^(?:.*?\b)?(?:ask|check\s+with|find\s+out\s+from|get|have)\s+(?:the\s+)?(?:jmfts\s+)?"
    r"(?:operator|memory|archive)(?:\s+(?:to\s+(?:find\s+out|check|look\s+up|tell\s+me)|"
    r"to|if|whether|about|for))*\s*"
)


# Words a request to cancel shares with any reminder without naming it.
NOT_NAMING = frozenset({
    "a", "an", "the", "to", "my", "me", "i", "about", "of", "for", "on", "in", "at", "and",
    "please", "cancel", "stop", "delete", "remove", "drop", "reminder", "reminders",
    "timer", "timers", "that", "this", "it", "um", "uh", "er", "okay", "ok", "so", "hey",
    "never", "mind", "can", "could", "would", "you", "just", "now",
})  # fmt: skip


def framed_call(verb: Verb, text: str) -> VerbCall | None:
    """``verb``'s call read from ``text`` by its frame; None when ``text`` is a note, a
    question for the operator or a forget in a frame not known here. A reminder's time and
    task are read from all of it (home/reminders/when.py), and so is a cancel's choice."""
    spoken = spoken_form(text)
    if verb is Verb.NOTE or verb is Verb.ASK_OPERATOR:
        pattern = _NOTE_FRAME if verb is Verb.NOTE else _ASK_FRAME
        framed = pattern.match(spoken)
        return VerbCall(verb, {"text": spoken[framed.end() :].strip()}) if framed else None
    if verb is Verb.FORGET:
        if _FORGET_THAT.search(spoken):
            return VerbCall(verb, {"about": ""})
        about = _FORGET_ABOUT.search(spoken)
        return VerbCall(verb, {"about": about["topic"].strip()}) if about else None
    if verb is Verb.REMIND:
        return VerbCall(verb, {"when": spoken, "text": ""})
    return VerbCall(verb, {"which": " ".join(naming_words(spoken))})


def naming_words(text: str) -> list[str]:
    """The words of a request to cancel that could name a reminder ("the oven timer" is
    ``["oven"]``; "cancel my reminder" names none)."""
    return [w for w in spoken_form(text).split() if w not in NOT_NAMING]


def unframed_call(verb: Verb, text: str) -> VerbCall:
    """``verb``'s call when its frame is not known and no model writes it: all of ``text``
    is the argument."""
    spoken = spoken_form(text)
    key = "about" if verb is Verb.FORGET else "which" if verb is Verb.CANCEL_REMINDER else "text"
    if verb is Verb.REMIND:
        return VerbCall(verb, {"when": spoken, "text": ""})
    return VerbCall(verb, {key: spoken})

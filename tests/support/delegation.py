"""The scripted model's part in a delegation: one responder that plays both agents.

The asker is the request that offers ``speak``; the operator the one that offers
``memory_search``. Each reply is built from what τ actually sent (the tool results,
the prompts the nodes wrote), so a test that passes shows those reached the model.
"""

from __future__ import annotations

from typing import Any

from tests.support.scripted_model import RecordedRequest, Reply, content_text

QUESTION = "what do you remember about the blue shed"
FACT = "The blue shed behind the garden holds the lawnmower and two bicycles."
FINDING_OUT = "Let me find out."
ANSWER_MARK = "Its answer: "
NO_ANSWER_MARK = "It has no answer: "


def _last(request: RecordedRequest) -> dict[str, Any]:
    return request.messages[-1] if request.messages else {}


def _operator(request: RecordedRequest) -> Reply:
    final = _last(request)
    if final.get("role") == "tool":
        # The search leaves the conversations' own turns out (the question itself would
        # match): the first hit is what was remembered.
        hits = content_text(final.get("content")).splitlines()
        found = hits[0].split(": ", 1)[1] if hits and ": " in hits[0] else ""
        return Reply.say(f"I remember this: {found}")
    return Reply.call("memory_search", {"query": "blue shed"})


def _asker(request: RecordedRequest) -> Reply:
    final = _last(request)
    if final.get("role") == "tool":
        result = content_text(final.get("content"))
        if result.startswith("The operator took the question"):
            return Reply.call("speak", {"text": FINDING_OUT})
        return Reply.call("speak", {"text": f"I could not ask: {result}"[:280]})
    text = request.last_user_text
    if ANSWER_MARK in text:
        return Reply.call("speak", {"text": text.split(ANSWER_MARK, 1)[1].splitlines()[0][:280]})
    if NO_ANSWER_MARK in text:
        why = text.split(NO_ANSWER_MARK, 1)[1].splitlines()[0]
        return Reply.call("speak", {"text": f"Sorry, I could not find out: {why}"[:280]})
    return Reply.call("delegate", {"text": text})


def delegation_responder(request: RecordedRequest) -> Reply:
    """Asker: delegate the user's words, say it is finding out, speak what comes back.
    Operator: search memory, answer with the first hit."""
    if "memory_search" in request.tool_names:
        return _operator(request)
    return _asker(request)

"""The operator's search without the model: how a small model's operator answers.

A 135M model answers in prose and never calls ``memory_search`` (docs/architecture.md
"Prose rules"), so an operator served by one would answer a delegated question from
nothing. Its node answers the task itself instead: a vector search over everything its
principal may read (the same search ``memory_search`` makes, under the same token, so
what it was not granted answers 404 and is never seen), and the closest memories, in
the words they were kept in, as the answer. Nothing close enough is an answer that says
so; the asker's node tells the user either (docs/architecture.md "Delegation").
"""

from __future__ import annotations

import logging
import re
from typing import Any

from home.agents.admission import PendingTurn
from home.agents.delegation_desk import DelegationDesk
from home.intent.step import spoken_form
from home.jmfts.client import JmftsClient
from home.jmfts.errors import JmftsError
from home.jmfts.models import EXCLUDED_WITH_TURNS
from home.llm.endpoint import ModelEndpoint
from shared.schema import NodeSpec

log = logging.getLogger(__name__)

# A memory this close to the question answers it (the reflex's recall gate is 0.3 on
# whole utterances; a question's topic is shorter and sits closer to its memory).
ANSWER_MATCH = 0.35
LIMIT = 5
SAID = 2

_ABOUT = re.compile(
    r"^(?:(?:what|everything|anything)\s+(?:did\s+)?(?:i|we)\s+(?:said|say|told\s+you|tell\s+you|"
    r"mentioned|mention|noted|note)\s+(?:about|of|on|regarding)\s+|(?:what\s+)?about\s+)"
)


def search_topic(question: str) -> str:
    """What to search for: "what I said about my car" is ``"my car"``."""
    spoken = spoken_form(question)
    return _ABOUT.sub("", spoken).strip() or spoken


def answer_from(results: list[dict[str, Any]]) -> str | None:
    """The answer from search results: the closest memories' own words, or None."""
    said: list[str] = []
    for result in results:
        document, score = result.get("document"), result.get("score")
        if not isinstance(document, dict) or not isinstance(score, int | float):
            continue
        if score < ANSWER_MATCH:
            continue
        content = str(document.get("content") or "").strip().rstrip(".")
        if content and content not in said:
            said.append(content)
        if len(said) == SAID:
            break
    if not said:
        return None
    return "You told me: " + "; and: ".join(said) + "."


class OperatorSearch:
    """Answers delegated tasks by searching, for an operator whose model calls no tools."""

    def __init__(self, name: str, client: JmftsClient, delegations: DelegationDesk) -> None:
        self.name = name
        self.client = client
        self.delegations = delegations
        self.answered = 0
        self.unanswered = 0

    async def take(self, turn: PendingTurn) -> bool:
        """Answer ``turn`` if it is a delegated task; False leaves it to τ."""
        delegated = turn.delegated
        if delegated is None:
            return False
        topic = search_topic(delegated.question)
        try:
            # From what was remembered, never a conversation's own turns (the question
            # itself, asked a moment ago, would be the closest match).
            found = await self.client.search(
                topic, "vector", LIMIT, threshold=0.0, exclude_types=list(EXCLUDED_WITH_TURNS)
            )
        except JmftsError as exc:
            log.warning("%s: search for a delegated task failed: %s", self.name, exc)
            self.unanswered += 1
            await self.delegations.answer(turn, "", f"memory could not be searched: {exc}")
            return True
        results = [r for r in found.get("results", []) if isinstance(r, dict)]
        answer = answer_from(results)
        if answer is None:
            self.unanswered += 1
            await self.delegations.answer(turn, "", f"nothing remembered is about {topic}")
        else:
            self.answered += 1
            await self.delegations.answer(turn, answer, None)
        return True

    def passed(self, turn: PendingTurn) -> None:
        """Every turn it does not take goes to τ as before."""

    async def close(self) -> None:
        """Close the memory client."""
        await self.client.close()


def searches_for_small_model(spec: NodeSpec, model: ModelEndpoint) -> bool:
    """Whether ``spec``'s node answers delegated tasks by searching itself: its agent is
    given ``memory_search`` (the operator) and its model declares a decode grammar, the
    mark of the small embedded model that answers in prose and calls no tool."""
    has_search = any(ext.name == "memory_tools" for ext in spec.extensions)
    return has_search and model.grammar is not None

"""The embedded model's answers are worth hearing: over the everyday prompt set, as shipped.

What is scored is what reached the speaker for each prompt (tests/support/answer_quality.py):
an answer that repeats the user's words is a parrot, and text a speech synthesizer would
read out wrongly (entities, markup, symbols, links) is unspeakable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from home.llm.endpoint import embedded_endpoint
from home.llm.server import LlamaServer
from shared.schema.catalog import NodeCatalog
from tests.support.answer_quality import SEEDED, AnswerSetup, measure


@pytest.mark.slow
async def test_answers_to_everyday_prompts_rarely_parrot_and_are_always_speakable(
    llm: LlamaServer, catalog: NodeCatalog, tmp_path: Path
) -> None:
    shipped = AnswerSetup("shipped", lambda url: embedded_endpoint(url, "speak", sampling=SEEDED))
    report = await measure(shipped, llm.url, catalog["agent.edge_asr"], tmp_path)

    assert len(report.answers) >= 60
    worst = "\n".join(report.worst())
    assert report.unspeakable_rate == 0, worst
    assert report.parrot_rate <= 0.05, worst
    # Scored on answers that were spoken: a turn left silent is a failure of its own.
    assert report.silent_rate <= 0.05, worst

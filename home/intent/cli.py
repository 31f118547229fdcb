"""``home intent judge TEXT...``: what the intent step makes of each utterance.

Exit codes: 0 judged; otherwise the wrapper's (shared/cli.py) for the step's
IntentError when it cannot load (its examples or its embedder).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from home.intent.step import load_intent_step
from home.substrate.cli.common import AsJson, console
from shared.cli import CommandApp

intent_app = CommandApp(
    help="The intent step: whether a turn is conversation (chat) or one of the verbs home "
    "carries out (note, remember, forget, correct, ask_operator, remind, cancel_reminder, "
    "list_reminders). It runs before any model, on the turn's MiniLM embedding and words.",
    no_args_is_help=True,
    add_completion=False,
)


@intent_app.command("judge")
def judge(
    utterances: Annotated[
        list[str],
        typer.Argument(help="Utterances to judge, one argument each.", show_default=False),
    ],
    as_json: AsJson = False,
) -> None:
    """Say which verb each utterance asks for, with its score and margin.

    A classifier fitted when the step loads, on the shipped labelled utterances
    (home/intent/intent_examples.yaml, intent_training.yaml), reads the turn's MiniLM
    embedding, that of its first three words, and which verbs' cues match its words (a
    cue is the shape a request takes: "remind me to ...", never "remind me what ...").
    `score` is the winning verb's probability, `margin` how far ahead of the runner-up
    it is; `cues` lists the verbs whose cues matched.

    Example: home intent judge "remind me in ten minutes to take the bread out" "i forgot my keys"
    """
    step = load_intent_step()  # an IntentError is named and given its exit code by the wrapper
    decisions = step.decide(utterances)
    if as_json:
        rows = [{"utterance": u, **d.to_dict()} for u, d in zip(utterances, decisions, strict=True)]
        print(json.dumps({"decisions": rows}))
        return
    table = Table(title="intent step")
    for column in ("utterance", "verb", "score", "margin", "cues"):
        table.add_column(column, justify="right" if column in ("score", "margin") else "left")
    for utterance, d in zip(utterances, decisions, strict=True):
        cue_text = ", ".join(sorted(v.value for v in d.cues)) or "-"
        table.add_row(
            escape(utterance), d.verb.value, f"{d.score:.3f}", f"{d.margin:.3f}", cue_text
        )
    console.print(table)

"""``home intent judge TEXT...``: what the intent step makes of each utterance.

Exit codes: 0 judged; otherwise the wrapper's (shared/cli.py) for the step's
IntentError when it cannot load (its examples or its embedder).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from home.intent.calls import PARAMETERS
from home.intent.frames import framed_call
from home.intent.step import Verb, load_intent_step
from home.substrate.cli.common import AsJson, console
from shared.cli import CommandApp

intent_app = CommandApp(
    help="The intent step: whether a turn is conversation (chat) or one of the verbs home "
    "carries out (note, remember, forget, correct, ask_operator, remind, cancel_reminder, "
    "list_reminders). It runs before any model, on the turn's MiniLM embedding and words.",
    no_args_is_help=True,
    add_completion=False,
)


def call_of(verb: Verb, utterance: str) -> dict[str, Any] | None:
    """What the verb desk would carry ``verb`` out with: the call its frame reads,
    ``{"by": "model"}`` where the embedded model would write it (a frame not known),
    ``{"by": "reminders"}`` for a reminder or a cancel (their time, task and choice are
    read from the whole turn by home/reminders/, which `home reminders list` shows once
    set), None for a verb without arguments or not the desk's."""
    if verb in (Verb.REMIND, Verb.CANCEL_REMINDER):
        return {"by": "reminders"}
    if verb not in PARAMETERS:
        return None
    framed = framed_call(verb, utterance)
    if framed is None:
        return {"by": "model"}
    return {"by": "frame", "arguments": framed.arguments}


def _call_text(call: dict[str, Any] | None) -> str:
    if call is None:
        return "-"
    if call["by"] == "reminders":
        return "time and task read from the whole turn"
    if "arguments" not in call:
        return "written by the model"
    return "; ".join(f"{k}: {v!r}" for k, v in call["arguments"].items())


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
    it is; `cues` lists the verbs whose cues matched. `call` is what the verb would be
    carried out with: read from the words after its frame ("note that ..."), or written
    by the embedded model under a grammar of the turn's own words when the frame is not
    one the desk knows (a reminder's time and task are read from the whole turn).

    Example: home intent judge "remind me in ten minutes to take the bread out" "i forgot my keys"
    """
    step = load_intent_step()  # an IntentError is named and given its exit code by the wrapper
    decisions = step.decide(utterances)
    calls = [call_of(d.verb, u) for u, d in zip(utterances, decisions, strict=True)]
    if as_json:
        rows = [
            {"utterance": u, **d.to_dict(), "call": c}
            for u, d, c in zip(utterances, decisions, calls, strict=True)
        ]
        print(json.dumps({"decisions": rows}))
        return
    table = Table(title="intent step")
    for column in ("utterance", "verb", "score", "margin", "cues", "call"):
        table.add_column(column, justify="right" if column in ("score", "margin") else "left")
    for utterance, d, call in zip(utterances, decisions, calls, strict=True):
        cue_text = ", ".join(sorted(v.value for v in d.cues)) or "-"
        table.add_row(
            escape(utterance),
            d.verb.value,
            f"{d.score:.3f}",
            f"{d.margin:.3f}",
            cue_text,
            escape(_call_text(call)),
        )
    console.print(table)

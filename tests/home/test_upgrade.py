"""An upgrade: today's `home up` opens a data directory an earlier release wrote.

`tests/fixtures/home_a657f4b.tar.xz` is the data directory of `home up` at commit
a657f4b (there is no tagged release to take it from; `tests/fixtures/README.md`
says how it was made): the `edge_asr_memory` agent, one turn from the `kitchen`
device ("my dog is called Biscuit"), answered, its memory deposited, home stopped
cleanly. Its sessions book, turn ledger, JMFTS database and index, bus users and
event log with the agents' durable inbox consumers are all as that release left
them. Today's `home up` must start on it, read the old conversation back, find
the old memory, and answer the device in the same conversation with it recalled.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.home.memory.conftest import is_evaluation, user_texts
from tests.home.test_home_turn import play_edge_turn
from tests.support.home_fixtures import REPO_ROOT
from tests.support.home_up import running_home
from tests.support.scripted_model import RecordedRequest, Reply, ScriptedModel

pytestmark = pytest.mark.slow
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "home_a657f4b.tar.xz"
AGENT = "edge_asr_memory"
DEVICE = "kitchen"
TOLD = "my dog is called Biscuit"
ASKED = "what is my dog called"
FACT = "The user's dog is called Biscuit."


def answer(request: RecordedRequest) -> Reply:
    if is_evaluation(request):
        return Reply.say("NONE")
    return Reply.call("speak", {"text": f"You said {request.last_user_text}."})


async def test_todays_home_opens_the_data_dir_of_a657f4b_and_keeps_its_conversation_and_memory(
    tmp_path: Path,
) -> None:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    data_dir = tmp_path / "home"
    (old_session,) = json.loads((data_dir / "agents" / AGENT / "sessions.json").read_text())[
        "sessions"
    ]
    async with (
        ScriptedModel(responder=answer) as model,
        running_home(data_dir, model.url, apply=(AGENT,)) as home,
    ):
        code, found = await home.cli("memory", "search", "dog", "--json")
        assert code == 0, found
        _, spoken, asked = await play_edge_turn(home.nats_url, ASKED, 120, device=DEVICE)
        code, listed = await home.cli("sessions", "list", "--device", DEVICE, "--json")
        assert code == 0, listed
        code, shown = await home.cli("sessions", "show", old_session["session_id"], "--json")
        assert code == 0, shown

    # The old memory is found, and recalled for the new question.
    assert FACT in [hit["snippet"] for hit in json.loads(found)["results"]], found
    (request,) = [r for r in model.requests if not is_evaluation(r)]
    assert FACT in "\n".join(user_texts(request))
    # The question is answered in the old conversation, which the model saw.
    assert spoken.binding_id == asked.binding_id
    assert TOLD in user_texts(request)
    assert [row["session_id"] for row in json.loads(listed)] == [old_session["session_id"]]
    turns = [t for t in json.loads(shown)["turns"] if t["binding_id"] is not None]
    assert [(t["said"], t["answer"]) for t in turns] == [
        (TOLD, [f"speak: You said {TOLD}."]),
        (ASKED, [f"speak: You said {ASKED}."]),
    ], turns

"""The agent node's pure parts: the RPC wire, the launch, inbound parsing, restarts, turn queue."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from home.agents.errors import (
    AgentConfigError,
    InboundError,
    RestartBudgetExhausted,
    SessionBookError,
    TauProtocolError,
)
from home.agents.inbound import parse_inbound
from home.agents.protocol import (
    RpcResponse,
    WireEvent,
    check_capabilities,
    encode_request,
    parse_line,
)
from home.agents.restart import RestartTracker
from home.agents.sessions import (
    FileStore,
    JmftsStore,
    TurnRecord,
    read_sessions,
    tau_store_config,
)
from home.agents.tau_command import RunContext, build_launch, read_extension, write_tau_home
from home.agents.transcript import turns_of
from home.agents.turn_queue import DeviceQueues
from home.llm.endpoint import ModelEndpoint
from shared.event import Event
from shared.schema.catalog import ExtensionSpec, NodeCatalog, RestartPolicy
from tests.support.home_fixtures import REPO_ROOT

# --- protocol ---------------------------------------------------------------


def test_request_is_one_json_rpc_line() -> None:
    line = encode_request(7, "prompt", {"text": "hi"})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "prompt",
        "params": {"text": "hi"},
    }


def test_a_prompt_answers_twice_acceptance_then_agent_end() -> None:
    accepted = parse_line(
        b'{"jsonrpc":"2.0","id":3,"result":{"accepted":true,"submission_id":"s"}}'
    )
    ended = parse_line(
        b'{"jsonrpc":"2.0","method":"event","params":{"type":"agent_end",'
        b'"submission_id":"s","end_reason":"terminate","is_error":false}}'
    )
    assert isinstance(accepted, RpcResponse) and accepted.ok and accepted.id == 3
    assert isinstance(ended, WireEvent)
    assert (ended.type, ended.submission_id, ended.end_reason) == ("agent_end", "s", "terminate")


def test_a_refused_submission_is_an_error_response() -> None:
    refused = parse_line(
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-32000,"message":"a turn is already in flight"}}'
    )
    assert isinstance(refused, RpcResponse)
    assert not refused.ok and refused.error_code == -32000


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[1,2]",
        b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","method":"event","params":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}',
        b'{"jsonrpc":"2.0","id":1,"result":[]}',
    ],
)
def test_malformed_lines_are_protocol_errors(line: bytes) -> None:
    with pytest.raises(TauProtocolError):
        parse_line(line)


def test_capabilities_check_the_major_version_and_the_verbs() -> None:
    commands = [{"name": n} for n in ("prompt", "abort", "get_capabilities")]
    caps = check_capabilities({"protocol_version": "3.0", "commands": commands})
    assert "abort" in caps.commands
    with pytest.raises(TauProtocolError, match=r"protocol 4\.1"):
        check_capabilities({"protocol_version": "4.1", "commands": commands})
    with pytest.raises(TauProtocolError, match="lacks the commands"):
        check_capabilities({"protocol_version": "3.2", "commands": commands[:1]})


# --- launch -----------------------------------------------------------------


def context(tmp_path: Path) -> RunContext:
    return RunContext(
        agent="edge_asr",
        nats_url="nats://127.0.0.1:4222",
        binding_file=tmp_path / "binding.json",
        jmfts_url="http://127.0.0.1:8700",
        jmfts_token_file=tmp_path / "token",
    )


def test_launch_is_headless_without_builtin_tools_and_hands_extensions_by_path(
    catalog: NodeCatalog, tmp_path: Path
) -> None:
    launch = build_launch(
        catalog["agent.edge_asr"], repo_root=REPO_ROOT, run_dir=tmp_path, context=context(tmp_path)
    )
    argv = launch.argv
    assert argv[1:3] == ["--mode", "rpc"]
    for flag in ("--no-builtin-tools", "--no-extensions", "--no-session", "--bus"):
        assert flag in argv
    # --no-tools would also strip the extension tools: the verbs must stay.
    assert "--no-tools" not in argv
    assert argv[argv.index("--extension") + 1] == str(REPO_ROOT / "home/tau_extensions/handset.py")
    config = launch.extensions_config
    assert config["handset"]["agent"] == "edge_asr"
    assert config["handset"]["binding_file"] == str(tmp_path / "binding.json")
    assert config["verbs"]["ack_timeout_s"] == 10
    # The token file is a fact only an extension that names it receives.
    assert not any("jmfts_token_file" in c for c in config.values())
    # Configs go into the τ home's config.json: the bus URL carries credentials.
    assert "--ext-config" not in argv
    assert not any("nats://" in a for a in argv)
    assert set(launch.env) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT",
                               "TAU_HOME", "HOME", "PYTHONUNBUFFERED"}  # fmt: skip


def test_environment_is_allow_listed(catalog: NodeCatalog, tmp_path: Path) -> None:
    launch = build_launch(
        catalog["agent.edge_asr"],
        repo_root=REPO_ROOT,
        run_dir=tmp_path,
        context=context(tmp_path),
        environ={"PATH": "/usr/bin", "JMFTS_TOKEN": "secret", "OPENAI_API_KEY": "sk-x"},
    )
    assert launch.env["PATH"] == "/usr/bin"
    assert "JMFTS_TOKEN" not in launch.env and "OPENAI_API_KEY" not in launch.env


def test_bus_flag_only_when_an_extension_touches_the_bus(
    catalog: NodeCatalog, tmp_path: Path
) -> None:
    quiet = tmp_path / "quiet.py"
    quiet.write_text(
        'RUN_CONTEXT = ("agent", "jmfts_token_file")\n\ndef register(api):\n    pass\n'
    )
    spec = replace(
        catalog["agent.edge_asr"], extensions=(ExtensionSpec(name="quiet", path=str(quiet)),)
    )
    launch = build_launch(spec, repo_root=REPO_ROOT, run_dir=tmp_path, context=context(tmp_path))
    assert "--bus" not in launch.argv
    assert launch.extensions_config["quiet"]["jmfts_token_file"] == str(tmp_path / "token")
    assert "nats_url" not in launch.extensions_config["quiet"]


def test_extension_declarations_are_read_without_importing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('RUN_CONTEXT = ("agent", "password")\n')
    with pytest.raises(AgentConfigError, match="password"):
        read_extension("bad", bad, {})
    broken = tmp_path / "broken.py"
    broken.write_text("def register(:\n")
    with pytest.raises(AgentConfigError, match=r"broken.py:1"):
        read_extension("broken", broken, {})
    with pytest.raises(AgentConfigError, match="cannot read"):
        read_extension("missing", tmp_path / "missing.py", {})


def test_model_endpoint_becomes_one_tau_config_entry() -> None:
    entry = ModelEndpoint(base_url="http://127.0.0.1:8080/v1", extra_body={"x": 1}).tau_entry()
    assert entry["backend"] == "openai"
    assert entry["base_url"] == "http://127.0.0.1:8080/v1"
    assert entry["extra_body"] == {"x": 1}


# --- inbound ----------------------------------------------------------------


def sensation(payload: dict[str, object], **kw: object) -> bytes:
    event = Event.new("sensation.turn", payload, source="router", sequence_number=1, **kw)  # type: ignore[arg-type]
    data: bytes = event.to_json()
    return data


def test_inbound_device_from_payload_then_subject_then_edge_node() -> None:
    assert parse_inbound(sensation({"text": "hi", "device": "board"})).device == "board"
    with_subject = json.loads(sensation({"text": "hi"}))
    with_subject["audit"] = {"subject": "events.sensation.tui.turn"}
    assert parse_inbound(json.dumps(with_subject).encode()).device == "tui"
    from_edge = json.loads(sensation({"text": "hi"}))
    from_edge["origin_node"] = "edge.audio.board"
    assert parse_inbound(json.dumps(from_edge).encode()).device == "board"
    assert parse_inbound(sensation({"text": "hi"})).device is None


def test_inbound_keeps_the_binding_id_and_mints_one_only_when_absent() -> None:
    assert parse_inbound(sensation({"text": "hi"}, binding_id="abc123")).binding_id == "abc123"
    assert len(parse_inbound(sensation({"text": "hi"})).binding_id) == 32


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{", "not valid JSON"),
        (b'{"event_type": "x"}', "event_id"),
        (sensation({"words": ["hi"]}), "payload.text"),
        (sensation({"text": "  "}), "payload.text"),
    ],
)
def test_bad_inbound_events_say_what_is_wrong(raw: bytes, message: str) -> None:
    with pytest.raises(InboundError, match=message):
        parse_inbound(raw)


# --- restart policy -----------------------------------------------------------


def test_restart_backoff_doubles_to_the_cap_and_the_budget_is_per_window() -> None:
    tracker = RestartTracker(
        RestartPolicy(max_restarts=3, window_s=60, backoff_s=0.5, backoff_max_s=1.5)
    )
    assert [tracker.next_delay(t) for t in (0.0, 1.0, 2.0)] == [0.5, 1.0, 1.5]
    with pytest.raises(RestartBudgetExhausted):
        tracker.next_delay(3.0)
    assert tracker.next_delay(61.5) == 1.0  # the first restart left the window


# --- turn queue ---------------------------------------------------------------


def test_device_queues_serve_devices_round_robin_and_a_silent_one_last() -> None:
    queues: DeviceQueues[tuple[str | None, int]] = DeviceQueues(lambda item: item[0])
    for n in range(3):
        queues.push(("board", n))
    queues.push(("tui", 0))
    queues.push((None, 0))
    queues.push(("tui", 1))
    assert len(queues) == 6
    assert [queues.pop() for _ in range(4)] == [("board", 0), ("tui", 0), (None, 0), ("board", 1)]
    queues.mark_unresponsive("board")
    assert queues.waiting_elsewhere("board")
    queues.push(("tui", 2), urgent=True)
    assert [queues.pop() for _ in range(3)] == [("tui", 2), ("tui", 1), ("board", 2)]
    assert not queues.waiting_elsewhere("board")
    queues.mark_responsive("board")
    assert not queues.is_unresponsive("board")
    with pytest.raises(IndexError):
        queues.pop()


def test_a_stored_conversation_reads_back_as_turns_with_their_binding_ids() -> None:
    def user(text: str, at: str) -> dict[str, Any]:
        content = [{"type": "text", "text": text}]
        return {"type": "message", "timestamp": at, "message": {"role": "user", "content": content}}

    def speak(text: str) -> dict[str, Any]:
        call = {"type": "toolCall", "name": "speak", "arguments": {"text": text}}
        return {"type": "message", "message": {"role": "assistant", "content": [call]}}

    entries = [
        {"type": "session_info", "name": "edge_asr kitchen"},
        user("my name is Ada", "t1"),
        speak("Hello Ada."),
        user("what is my name", "t2"),  # τ died here; the node delivered it again
        user("what is my name", "t3"),
        {"type": "message", "message": {"role": "assistant", "content": "Ada."}},
    ]
    ledger = [
        TurnRecord("s", "b1", "kitchen", "t1", "my name is Ada"),
        TurnRecord("s", "b2", "kitchen", "t2", "what is my name"),
    ]
    turns = turns_of(entries, ledger)
    assert [(t.at, t.said, t.binding_id, t.answer) for t in turns] == [
        ("t1", "my name is Ada", "b1", ["speak: Hello Ada."]),
        ("t2", "what is my name", "b2", []),
        ("t3", "what is my name", "b2", ["Ada."]),
    ]


def test_the_session_book_names_the_file_and_key_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text('{"sessions": [{"agent": "a", "device": "kitchen", "store": "file"}]}')
    with pytest.raises(SessionBookError, match=r"sessions\.json: sessions\[0\]\.ref"):
        read_sessions(path)
    path.write_text("{")
    with pytest.raises(SessionBookError, match=r"sessions\.json:1: not JSON"):
        read_sessions(path)


def test_the_file_store_is_named_on_the_command_line_and_jmfts_in_the_tau_home(
    catalog: NodeCatalog, tmp_path: Path
) -> None:
    spec = catalog["agent.edge_asr"]
    on_disk = build_launch(
        spec, repo_root=REPO_ROOT, run_dir=tmp_path, context=context(tmp_path),
        sessions=FileStore(tmp_path / "sessions"),
    )  # fmt: skip
    assert on_disk.argv[on_disk.argv.index("--session-dir") + 1] == str(tmp_path / "sessions")
    # τ refuses --no-session beside --session-dir; without it τ starts on a scratch one.
    assert "--no-session" not in on_disk.argv
    token = tmp_path / "token"
    token.write_text("tok-secret\n")
    store = JmftsStore("http://127.0.0.1:8700", token, "journal/edge_asr/sessions")
    in_jmfts = build_launch(
        spec, repo_root=REPO_ROOT, run_dir=tmp_path, context=context(tmp_path), sessions=store
    )
    assert "--no-session" in in_jmfts.argv and "--session-dir" not in in_jmfts.argv
    assert not any("tok-secret" in a for a in in_jmfts.argv)
    write_tau_home(
        tmp_path / "home", ModelEndpoint("http://m/v1"), session_store=tau_store_config(store, 7)
    )
    config = tmp_path / "home" / "config.json"
    assert json.loads(config.read_text())["session_store"] == {
        "backend": "jmfts", "url": "http://127.0.0.1:8700", "token": "tok-secret", "parent_id": 7,
    }  # fmt: skip
    assert config.stat().st_mode & 0o777 == 0o600

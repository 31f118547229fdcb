"""``edge run`` as the board's systemd unit starts it: readiness, watchdog, SIGTERM, exit codes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.pair import pair
from shared.event import Event
from shared.proc import free_port
from shared.subjects import sensation_turn_subject, speak_subject
from tests.edge.conftest import GRAMMAR, Collector, connect, wait_for

EDGE = str(Path(sys.executable).parent / "edge")
LIMIT_S = 60.0


def write_config(path: Path, *, port: int, answer_timeout_s: float) -> Path:
    grammar = ", ".join(json.dumps(p, ensure_ascii=False) for p in GRAMMAR)
    path.write_text(
        f"device: board\nnats: {{port: {port}}}\nasr: {{grammar: [{grammar}]}}\n"
        f"run: {{answer_timeout_s: {answer_timeout_s}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[socket.socket]:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


async def next_notification(sock: socket.socket, wanted: str) -> str:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(LIMIT_S):
        while True:
            message = (await loop.sock_recv(sock, 4096)).decode()
            if wanted in message:
                return message


def test_bad_config_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    config = tmp_path / "edge.yaml"
    config.write_text("device: board\naudio:\n  block_ms: zero\n")
    done = subprocess.run(
        [EDGE, "run", "--config", str(config)],
        check=False,
        capture_output=True,
        text=True,
        timeout=LIMIT_S,
    )
    assert done.returncode == 2
    assert f"{config}:3: audio.block_ms: expected an integer" in " ".join(done.stderr.split())


@pytest.mark.slow
async def test_a_file_turn_is_answered_played_and_the_run_exits(
    annyeong_wav: Path, tmp_path: Path, notify_socket: socket.socket
) -> None:
    port = free_port("127.0.0.1")
    config = write_config(tmp_path / "edge.yaml", port=port, answer_timeout_s=30)
    out = tmp_path / "out.wav"
    env = {
        **os.environ,
        "NOTIFY_SOCKET": notify_socket.getsockname(),
        "WATCHDOG_USEC": "400000",
    }
    proc = await asyncio.create_subprocess_exec(
        EDGE,
        "run",
        "-c",
        str(config),
        "--audio-in",
        str(annyeong_wav),
        "--audio-out",
        str(out),
        "--json",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        ready = await next_notification(notify_socket, "READY=1")
        assert "STATUS=listening as board" in ready
        await next_notification(notify_socket, "WATCHDOG=1")
        client = await connect(f"nats://127.0.0.1:{port}")
        try:
            # A stand-in for home: answer the board's turn on its speak subject.
            bus = await Collector(client).watch(sensation_turn_subject("board"))
            await wait_for(lambda: bus.on(sensation_turn_subject("board")), "the turn")
            (turn,) = bus.on(sensation_turn_subject("board"))
            answer = Event.new(
                "speak",
                {"text": "Hello to you too."},
                source="agent.edge_asr",
                sequence_number=0,
                binding_id=turn.binding_id,
            )
            await bus.publish(speak_subject("edge_asr", "board"), answer)
        finally:
            await client.close()
        async with asyncio.timeout(LIMIT_S):
            stdout, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    summary = json.loads(stdout)
    assert [t["text"] for t in summary["turns"]] == ["안녕하세요"]
    assert summary["acks"] == [
        {"binding_id": turn.binding_id, "ok": True, "interrupted": False, "error": None}
    ]
    assert summary["unanswered"] == []
    with wave.open(str(out), "rb") as wav:
        assert wav.getnframes() > wav.getframerate() // 2


@pytest.mark.slow
async def test_sigterm_stops_every_node_and_the_nats_server(
    tmp_path: Path, notify_socket: socket.socket
) -> None:
    long_silence = tmp_path / "silence.wav"
    with wave.open(str(long_silence), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\0\0" * 16000 * 120)
    port = free_port("127.0.0.1")
    config = write_config(tmp_path / "edge.yaml", port=port, answer_timeout_s=0)
    proc = await asyncio.create_subprocess_exec(
        EDGE,
        "run",
        "-c",
        str(config),
        "--audio-in",
        str(long_silence),
        "--audio-out",
        str(tmp_path / "out.wav"),
        env={**os.environ, "NOTIFY_SOCKET": notify_socket.getsockname()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await next_notification(notify_socket, "READY=1")
        client = await connect(f"nats://127.0.0.1:{port}")
        await client.close()
        proc.send_signal(signal.SIGTERM)
        stopping = await next_notification(notify_socket, "STOPPING=1")
        assert stopping == "STOPPING=1"
        async with asyncio.timeout(LIMIT_S):
            _, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    with pytest.raises(OSError):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()


@pytest.mark.slow
async def test_the_nats_server_does_not_outlive_a_killed_edge(
    tmp_path: Path, notify_socket: socket.socket
) -> None:
    quiet = tmp_path / "silence.wav"
    with wave.open(str(quiet), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(b"\0\0" * 16000 * 120)
    port = free_port("127.0.0.1")
    config = write_config(tmp_path / "edge.yaml", port=port, answer_timeout_s=0)
    proc = await asyncio.create_subprocess_exec(
        EDGE,
        "run",
        "-c",
        str(config),
        "--audio-in",
        str(quiet),
        "--audio-out",
        str(tmp_path / "out.wav"),
        env={**os.environ, "NOTIFY_SOCKET": notify_socket.getsockname()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await next_notification(notify_socket, "READY=1")
    finally:
        proc.kill()
        await proc.wait()

    async def port_closed() -> None:
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return
            writer.close()
            await writer.wait_closed()
            await asyncio.sleep(0.05)

    async with asyncio.timeout(LIMIT_S):
        await port_closed()


@pytest.mark.slow
async def test_a_board_whose_home_is_down_reports_ready_says_so_and_keeps_listening(
    annyeong_wav: Path, tmp_path: Path, notify_socket: socket.socket
) -> None:
    # As an emulated board runs it: spool folders for audio, a paired half whose home
    # is not up (nothing listens on its port). It must not exit or crash-loop.
    home_port = free_port("127.0.0.1")
    paired = pair("board", f"127.0.0.1:{home_port}", tmp_path / "bridge")
    spool_in, spool_out = tmp_path / "audio/in", tmp_path / "audio/out"
    config = write_config(tmp_path / "edge.yaml", port=free_port("127.0.0.1"), answer_timeout_s=0)
    with config.open("a") as extra:
        extra.write(
            f"audio: {{input: {{kind: spool, dir: {spool_in}}}, "
            f"output: {{kind: spool, dir: {spool_out}}}}}\n"
            f"bridge: {{half: {paired.edge_half}, secrets: {paired.client_key.parent}}}\n"
        )
    proc = await asyncio.create_subprocess_exec(
        EDGE,
        "run",
        "-c",
        str(config),
        env={
            **os.environ,
            "NOTIFY_SOCKET": notify_socket.getsockname(),
            "WATCHDOG_USEC": "2000000",
        },
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await next_notification(notify_socket, "READY=1")
        status = await next_notification(notify_socket, "home unreachable")
        assert f"127.0.0.1:{home_port}" in status
        # A turn made now gets the local notice, played into the output spool.
        os.link(annyeong_wav, spool_in / "hello.tmp")
        os.replace(spool_in / "hello.tmp", spool_in / "hello.wav")
        await wait_for(lambda: list(spool_out.glob("*-notice.wav")), "the spoken notice")
        await next_notification(notify_socket, "WATCHDOG=1")
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(LIMIT_S):
            _, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    assert "home is unreachable" in " ".join(stderr.decode().split())
    assert (spool_in / "done/hello.wav").exists()

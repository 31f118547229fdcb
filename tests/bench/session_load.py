"""τ loading one conversation from JMFTS: the cost of a session switch at its root.

A switch (``switch_session``) makes τ's JMFTS store read the conversation's whole
subtree in one ``GET /documents/{id}/subtree`` and rebuild its entries
(``tau_jmfts.store.JmftsSessionLog.load``). τ stores each entry under the one
before, so a conversation is a chain as deep as it is long.

Measured here, in one run against one server, on conversations of 25, 100 and 250
agent turns (four entries a turn: the utterance, the speak call, its result, the
closing reply), each load in turn:

- τ's load as shipped, descendants answered without their ancestor paths (the
  server's default, docs/architecture.md "Sessions");
- peer: the same load with ``paths=true``, the answer every subtree read gave
  before, each entry carrying the ids of all the entries above it.

Also the answer's size each way. No goal of its own: this is the part of the
``agents`` benchmark's switch (goal: ≤ 5 ms p99 added) that grows with length.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tau_jmfts.client import JmftsClient
from tau_jmfts.store import JmftsSessionLog

from tests.bench.report import Result, publish, quantile

SIZES = (25, 100, 250)
LOADS = int(os.environ.get("BENCH_SESSION_LOADS", "40"))


class PathsClient(JmftsClient):
    """τ's client asking every subtree read for its descendants' paths (the old answer)."""

    def get_subtree(self, doc_id: int, *, max_depth: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"paths": "true"}
        if max_depth is not None:
            params["max_depth"] = max_depth
        result: dict[str, Any] = self._request("GET", f"/documents/{doc_id}/subtree", params=params)
        return result


def grow(log: JmftsSessionLog, leaf: str, start: int, turns: int) -> str:
    """Append ``turns`` agent turns after ``leaf``; the new leaf."""
    for i in range(start, start + turns):
        call = {"type": "toolCall", "id": f"c{i}", "name": "speak",
                "arguments": {"text": f"You said question {i}."}}  # fmt: skip
        for payload in (
            {"role": "user", "content": f"question {i}, asked from the kitchen"},
            {"role": "assistant", "content": [call]},
            {
                "role": "toolResult",
                "toolCallId": f"c{i}",
                "toolName": "speak",
                "content": [{"type": "text", "text": "spoken"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ):
            leaf = asyncio.run(log.append_at(leaf, "message", {"message": payload}))
    return leaf


def timed_loads(client: JmftsClient, root: int) -> tuple[list[float], int]:
    """(ms per load, entries loaded)."""
    times: list[float] = []
    loaded = 0
    for _ in range(LOADS):
        started = time.perf_counter()
        loaded = len(JmftsSessionLog.load(client, root).entries())
        times.append((time.perf_counter() - started) * 1000)
    return times, loaded


def answer_kib(client: JmftsClient, root: int) -> float:
    return len(json.dumps(client.get_subtree(root))) / 1024


def run() -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [sys.executable, "-m", "home.cli", "jmfts", "serve", "--data-dir", f"{tmp}/jmfts",
             "--port", "0", "--json"], stdout=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            info = json.loads(server.stdout.readline())
            token = Path(info["admin_token_file"]).read_text().strip()
            with (
                JmftsClient(info["url"], token=token) as shipped,
                PathsClient(info["url"], token=token) as with_paths,
            ):
                log = JmftsSessionLog.create(shipped, tmp, "m", "openai", system_prompt="Speak.")
                assert log.root_doc_id is not None
                leaf, held = log.entries()[-1]["id"], 0
                for size in SIZES:
                    leaf = grow(log, leaf, held, size - held)
                    held = size
                    ours, entries = timed_loads(shipped, log.root_doc_id)
                    peer, _ = timed_loads(with_paths, log.root_doc_id)
                    for label, q in (("p50", 0.5), ("p99", 0.99)):
                        results.append(
                            Result(
                                metric=f"τ loads a {size}-turn conversation from JMFTS {label}",
                                value=quantile(ours, q),
                                unit="ms",
                                n=len(ours),
                                peer="with ancestor paths (paths=true)",
                                peer_value=quantile(peer, q),
                                note=f"{entries} entries",
                            )
                        )
                    results.append(
                        Result(
                            metric=f"subtree answer, {size}-turn conversation",
                            value=answer_kib(shipped, log.root_doc_id),
                            unit="KiB",
                            n=1,
                            peer="with ancestor paths",
                            peer_value=answer_kib(with_paths, log.root_doc_id),
                        )
                    )
        finally:
            server.terminate()
            server.wait(timeout=30)
    return results


def main() -> None:
    """Run the benchmark, print the table, write bench-results/session_load.json."""
    publish("session_load", run())

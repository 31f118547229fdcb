"""Fixtures every test package shares: a real nats-server for the session, the board image."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from tests.support import hypothesis_profiles
from tests.support.board_image import BuiltQemuImage, build_qemu_image
from tests.support.loopback_nats import loopback_nats_server

# Before any test module builds its @settings: they inherit what they leave unnamed.
hypothesis_profiles.load()


@pytest.fixture(scope="session")
def built_qemu_image(tmp_path_factory: pytest.TempPathFactory) -> BuiltQemuImage:
    """A ``qemu`` board image, built once per session (see tests/support/board_image.py).

    Slow: about a minute warm, plus the base system on a cold cache. Paired with
    a home at ``127.0.0.1:home_port`` that nobody runs until a test does.
    """
    return build_qemu_image(tmp_path_factory.mktemp("qemu-image"))


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    """Start a real nats-server on 127.0.0.1 for the session; yield its URL."""
    with loopback_nats_server() as url:
        yield url


# Parallel workers (pytest-xdist; `make test` runs `-n auto`): a module's tests stay on
# one worker, so its module fixtures start once, and modules that share a session
# fixture too costly to make twice share a worker too. (xdist's own ``loadgroup`` marks
# rename node ids, which pytest 9 no longer lets a plugin do: a scheduler says it here.)
SHARED_WORKER = {
    # the one qemu image and its one boot (tests/support/board_image.py)
    "tests/firmware/test_image_boot.py": "board-image",
    "tests/hil/test_qemu.py": "board-image",
}
# The longest work units first, so no worker is left alone with one of them at the end.
LONGEST_FIRST = (
    "board-image",
    "tests/home/llm/test_loaded_machine.py",
    "tests/hil/test_virtual.py",
    "tests/home/llm/test_answer_quality.py",
    "tests/home/llm/test_factual_answers.py",
    "tests/hil/test_ssh_board.py",
    "tests/home/memory/test_embedded_correction.py",
    "tests/home/substrate/test_cluster.py",
)


def work_unit(nodeid: str) -> str:
    """The work unit of the test ``nodeid``: its module, or the group its module shares."""
    module = nodeid.split("::", 1)[0]
    return SHARED_WORKER.get(module, module)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling:
    """Schedule whole work units (:func:`work_unit`) in collection order."""

    class WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnits(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker, collect the longest work units first (every worker sorts alike)."""
    if hasattr(config, "workerinput"):
        rank = {unit: n for n, unit in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))

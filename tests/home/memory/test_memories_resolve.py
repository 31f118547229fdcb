"""The reflex's client resolves ``workspace/<agent>`` to the workspace, not the journal."""

from __future__ import annotations

from home.jmfts.testing import RunningJmfts
from home.memory.memories import MemoryStore


async def test_an_agent_seeing_two_roots_of_its_name_resolves_each_path_to_its_own(
    jmfts: RunningJmfts,
) -> None:
    # As `home up` provisions an agent: journal/<agent> first, then workspace/<agent>; the
    # agent sees both as roots titled <agent>.
    token = await jmfts.principal("twin", ["journal/twin", "workspace/twin"])
    journal = await jmfts.ensure_path("journal/twin")
    workspace = await jmfts.ensure_path("workspace/twin")
    async with MemoryStore(jmfts.url, token=token) as store:
        assert await store.resolve("workspace/twin") == workspace
        assert await store.resolve("journal/twin") == journal
        written = await store.deposit(workspace, "The user's dog is called Biscuit.")
        corrected = await store.deposit(workspace, "The user's dog is Rex.", supersedes=written.id)
    assert corrected.id != written.id, "a correction in a workspace is a new record"

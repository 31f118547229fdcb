"""Which waiting turn an agent takes next: one queue per device, taken in turn.

An agent has one τ process, so its turns run one at a time; the order is what
keeps one device from holding up another. A single arrival-order queue let a
board that never acks playback (each of its turns waits the whole speak-ack
timeout) push another device's turns past their TTL. Here:

- each device has its own first-in-first-out queue, and devices with turns
  waiting are served round robin: a device waits at most one turn of each other
  device, not all of them;
- a device whose last speech went unacknowledged is *unresponsive* and served
  only when no responsive device has a turn waiting; its next ack makes it
  responsive again;
- a re-prompt (the rewrite of a refused answer) goes ahead of everything, since
  it finishes a turn already begun.

Pure: no I/O, no clock. ``T`` is the node's pending turn; ``device_of`` names its
device (None, a turn that named none, is a device of its own).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class DeviceQueues(Generic[T]):
    """Per-device FIFO queues, served round robin, unresponsive devices last."""

    def __init__(self, device_of: Callable[[T], str | None]) -> None:
        self._device_of = device_of
        self._urgent: deque[T] = deque()
        # Devices in the order they are next served; a served device moves to the end.
        self._queues: OrderedDict[str | None, deque[T]] = OrderedDict()
        self._unresponsive: set[str | None] = set()

    def __len__(self) -> int:
        return len(self._urgent) + sum(len(q) for q in self._queues.values())

    def __iter__(self) -> Iterator[T]:
        """Every waiting turn: re-prompts first, then each device's queue in serving order."""
        yield from self._urgent
        for queue in self._queues.values():
            yield from queue

    def push(self, item: T, *, urgent: bool = False) -> None:
        """Queue ``item`` behind its device's earlier turns, or ahead of all when ``urgent``."""
        if urgent:
            self._urgent.appendleft(item)
            return
        device = self._device_of(item)
        queue = self._queues.get(device)
        if queue is None:
            queue = self._queues[device] = deque()
        queue.append(item)

    def pop(self) -> T:
        """The next turn to run; ``IndexError`` when none waits."""
        if self._urgent:
            return self._urgent.popleft()
        waiting = [d for d, q in self._queues.items() if q]
        if not waiting:
            raise IndexError("no turn waits")
        responsive = [d for d in waiting if d not in self._unresponsive]
        device = (responsive or waiting)[0]
        queue = self._queues.pop(device)
        item = queue.popleft()
        if queue:
            self._queues[device] = queue  # to the back of the round
        return item

    def waiting_elsewhere(self, device: str | None) -> bool:
        """Whether a responsive device other than ``device`` has a turn waiting."""
        return any(
            q and d != device and d not in self._unresponsive for d, q in self._queues.items()
        )

    def mark_unresponsive(self, device: str | None) -> None:
        """``device`` did not acknowledge its last speech: serve it after the others."""
        self._unresponsive.add(device)

    def mark_responsive(self, device: str | None) -> None:
        """``device`` acknowledged speech again."""
        self._unresponsive.discard(device)

    def is_unresponsive(self, device: str | None) -> bool:
        """Whether ``device`` is served last."""
        return device in self._unresponsive

"""Where the parent's walk and the forked verifier's meet (`split`), in shared memory."""

from __future__ import annotations

import mmap


class Claims:
    """Where the two walks meet, in memory both processes share (an anonymous mmap).

    Slot 0: how many subdirectories the parent has taken from the front; slot 1:
    the lowest one the child has taken from the back; slot 2: how many
    directories the child has walked (its pulse, for `split.STALL`). Each process
    writes only its own slots and reads the other's before it takes one more.
    Two takes at the same moment can both succeed: that subdirectory is walked
    twice, and the parent's walk counts. Nothing is lost either way: whatever
    the child gives no verdict on, the parent walks at the end.
    """

    def __init__(self, count: int) -> None:
        self.map = mmap.mmap(-1, 24)  # MAP_SHARED: the child's writes are the parent's
        self.slots: memoryview | None = memoryview(self.map).cast("q")
        self.slots[0], self.slots[1], self.slots[2] = 0, count, 0

    def take(self, front: int) -> bool:
        """In the parent: take subdirectory `front` unless the child has taken it."""
        slots = self.slots
        if slots is None or front >= slots[1]:
            return False
        slots[0] = front + 1
        return True

    def take_back(self, back: int) -> bool:
        """In the child: take subdirectory `back` unless the parent has taken it."""
        slots = self.slots
        assert slots is not None
        slots[1] = back
        return slots[0] <= back

    def tick(self) -> None:
        """In the child: one more directory walked."""
        assert self.slots is not None
        self.slots[2] += 1

    def walked(self) -> int:
        """In the parent: the directories the child has walked so far."""
        return -1 if self.slots is None else self.slots[2]

    def close(self) -> None:
        if self.slots is not None:
            self.slots.release()
            self.slots = None
            self.map.close()

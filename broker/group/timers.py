"""Timers for the group coordinator: the event loop's, or a manual one for tests.

A timer is ``timers.call_later(delay_ms, fn) -> handle`` with ``handle.cancel()``; the callback
runs on the event loop and must not block.  ``now_ms()`` is the wall clock in milliseconds used for
record timestamps (commit timestamps, state timestamps, offset expiry).

``ManualTimers`` fires callbacks only when a test calls ``advance(ms)``, in deadline order, and
its wall clock moves with it, so state-machine tests are deterministic and instant.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Callable


class LoopTimers:
    """Timers on the running asyncio event loop; wall clock from ``time.time``."""

    def __init__(self, wall_clock: Callable[[], float] = time.time):
        self._wall = wall_clock

    def call_later(self, delay_ms: float, fn: Callable[[], None]):
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, fn)

    def now_ms(self) -> int:
        return int(self._wall() * 1000)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self):
        self.cancelled = False

    def cancel(self):
        self.cancelled = True


class ManualTimers:
    """Deterministic timers: nothing with a positive delay fires until ``advance``; a zero delay
    runs on the next loop iteration."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms
        self._heap: list = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: float, fn: Callable[[], None]):
        if delay_ms <= 0:       # due now: run soon on the loop, as the loop's timers would
            return asyncio.get_running_loop().call_soon(fn)
        h = _ManualHandle()
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), next(self._seq), h, fn))
        return h

    def advance(self, ms: float) -> None:
        """Move time forward by ``ms``, firing every timer that falls due on the way (including
        timers scheduled by the callbacks themselves)."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            when, _, h, fn = heapq.heappop(self._heap)
            self._now = max(self._now, when)
            if not h.cancelled:
                fn()
        self._now = target

    def pending(self) -> int:
        return sum(1 for e in self._heap if not e[2].cancelled)

"""Background tasks a coordinator starts (log writes, marker sends, expiry passes) and keeps hold
of: a failure is logged instead of lost, ``idle()`` waits until every one has finished, and the
owner's ``stop()`` decides whether to wait for or cancel what is left (``tasks``)."""
from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("odradek.tasks")


class BackgroundTasks:
    def __init__(self, owner: str):
        self.owner = owner                  # for the log line, e.g. "group coordinator"
        self.tasks: set[asyncio.Task] = set()

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task failed", self.owner, exc_info=task.exception())

    async def idle(self) -> None:
        """Wait until every task has finished (including ones started meanwhile)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

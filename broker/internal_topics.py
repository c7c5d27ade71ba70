"""Creating an internal topic on first use: ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state``.

Each coordinator asks ``InternalTopic.ensure_created`` before it writes; the first caller
creates the topic and the others wait for that same creation.  As Kafka 3.x does for internal
topics, the replication factor is the configured one capped at the live brokers, and the topic
is compacted.  An existing topic keeps its partition count (``partition_count``): the key hash
that places a group or id on a partition must not change under it.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from controller.api import CreatableTopic
from protocol.errors import ErrorCode as E

log = logging.getLogger("odradek.server")


class InternalTopic:
    def __init__(self, broker, name: str, partitions_key: str, replication_key: str,
                 configs: Callable[[object, int], dict]):
        """``configs(broker config, replication factor)`` gives the topic's configs."""
        self.broker = broker
        self.name = name
        self.partitions_key = partitions_key
        self.replication_key = replication_key
        self.configs = configs
        self._creating: asyncio.Future | None = None

    def partition_count(self) -> int:
        info = self.broker.controller.topic(self.name)
        if info is not None and info.partitions:
            return len(info.partitions)
        return self.broker.config.get(self.partitions_key)

    async def ensure_created(self) -> None:
        if self.broker.controller.topic(self.name) is not None:
            return
        if self._creating is None:
            self._creating = asyncio.ensure_future(self._create())
        await asyncio.shield(self._creating)

    async def _create(self) -> None:
        cfg = self.broker.config
        try:
            rf = min(cfg.get(self.replication_key), max(1, len(self.broker.controller.brokers())))
            res = await self.broker.controller.create_topics(
                [CreatableTopic(self.name, cfg.get(self.partitions_key), rf, None, self.configs(cfg, rf))])
            if res[0].error_code not in (0, E.TOPIC_ALREADY_EXISTS):
                log.error("could not create %s: %s", self.name, res[0].error_message)
        finally:
            self._creating = None

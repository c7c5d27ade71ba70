"""InitProducerId (key 22), v0-5.

v0-1: a new producer id (epoch 0) for an idempotent producer.  v2+ flexible.  v3+ the producer
may pass its current id and epoch (KIP-360): the broker bumps the epoch instead of handing out a
new id, so sequence numbers restart without losing the producer's identity; an epoch at its
maximum gets a fresh id.  v4-5 add error codes for transactions (KIP-588/890).

Producer ids come in blocks from the controller (the embedded store, or ZooKeeper's
``/latest_producer_id_block`` in a cluster).  Transactional ids go to the transaction coordinator
when one is running; until then they are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (a
fatal error, so the client stops with a clear message instead of retrying forever) and a log
line saying that transactions are not available on this broker.
"""
from __future__ import annotations

import logging

from broker.dispatch import handler
from protocol.errors import ErrorCode as E
from protocol.messages import InitProducerIdResponse

log = logging.getLogger("odradek.producer")
R = InitProducerIdResponse
MAX_EPOCH = 32767


class ProducerIdManager:
    """Hands out producer ids from blocks allocated by the controller."""

    def __init__(self, broker):
        self.broker = broker
        self.next_id = 0
        self.end = 0

    async def next(self) -> int:
        if self.next_id >= self.end:
            start, length = await self.broker.controller.allocate_producer_ids(self.broker.broker_id)
            self.next_id, self.end = start, start + length
        pid = self.next_id
        self.next_id += 1
        return pid


@handler(22, 0, 5)
async def init_producer_id(ctx, req):
    broker = ctx.broker
    if req.transactional_id is not None:
        txns = getattr(broker, "txns", None)
        if txns is not None:
            return await txns.handle_init_producer_id(ctx, req)
        log.warning("client %s asked for transactional id %r, but transactions are not "
                    "available on this broker", ctx.client_id, req.transactional_id)
        return R(throttle_time_ms=0, error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                 producer_id=-1, producer_epoch=-1)
    mgr = getattr(broker, "producer_ids", None)
    if mgr is None:
        mgr = broker.producer_ids = ProducerIdManager(broker)
    if ctx.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
        if req.producer_epoch < MAX_EPOCH - 1:
            return R(throttle_time_ms=0, error_code=0, producer_id=req.producer_id,
                     producer_epoch=req.producer_epoch + 1)
    pid = await mgr.next()
    return R(throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)

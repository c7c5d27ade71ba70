"""Share groups (KIP-932): ShareGroupHeartbeat (76) v1, ShareGroupDescribe (77) v1, ShareFetch
(78) v1-2 and ShareAcknowledge (79) v1-2, served by ``broker/share/manager.py``; and the admin
APIs DescribeShareGroupOffsets (90) v0-1, AlterShareGroupOffsets (91) v0 and
DeleteShareGroupOffsets (92) v0 (Kafka 4.1; v1 of 90 adds the lag, Kafka 4.2).

Kafka 4.1 made v1 the first stable version of each and removed the early-access v0; ShareFetch
and ShareAcknowledge v2 (Kafka 4.2) add the renew acknowledgement and the acquire mode.  The APIs
are always advertised, as Kafka 4.2 does, and answer UNSUPPORTED_VERSION while share groups are
disabled (``group.share.enable=false``, or a ZooKeeper cluster; docs/groups.md, "Share groups").
"""
from __future__ import annotations

import asyncio
import logging

from broker.dispatch import handler
from broker.handlers.groups import GROUP_AUTHORIZED_OPERATIONS, INT_MIN, _client_host
from broker.share.manager import FINAL_EPOCH, INITIAL_EPOCH, PARTITION_READ_BYTES, _now_ms
from broker.replica import wait_for_wake
from protocol.errors import ErrorCode as E
from protocol.messages import (AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsResponse,
                               DescribeShareGroupOffsetsResponse, ShareAcknowledgeResponse, ShareFetchResponse,
                               ShareGroupDescribeResponse, ShareGroupHeartbeatResponse)
from protocol.primitives import UUID0

log = logging.getLogger("odradek.share")


def _share(ctx):
    s = getattr(ctx.broker, "share", None)
    return s if s is not None and s.enabled() else None


@handler(76, 1, 1)
async def share_group_heartbeat(ctx, req):
    R = ShareGroupHeartbeatResponse
    share = _share(ctx)
    if share is None:
        return R(error_code=E.UNSUPPORTED_VERSION, error_message="Share groups are not enabled on this broker.")
    out = await share.heartbeat(req.group_id, req.member_id, req.member_epoch, req.rack_id,
                                req.subscribed_topic_names, ctx.client_id or "", _client_host(ctx))
    assignment = None
    if out["assignment"] is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in sorted(out["assignment"].items(), key=lambda kv: str(kv[0])) if ps])
    return R(error_code=out["error"], error_message=out["message"], member_id=out["member_id"],
             member_epoch=out["member_epoch"], heartbeat_interval_ms=out["heartbeat_interval_ms"],
             assignment=assignment)


@handler(77, 1, 1)
async def share_group_describe(ctx, req):
    D = ShareGroupDescribeResponse
    share = _share(ctx)
    ops = GROUP_AUTHORIZED_OPERATIONS if req.include_authorized_operations else INT_MIN
    groups = []
    for gid in req.group_ids:
        if share is None:
            groups.append(D.DescribedGroup(error_code=E.UNSUPPORTED_VERSION, group_id=gid, group_state="",
                                           assignor_name=""))
            continue
        err, message, g = share.describe(gid)
        if err:
            groups.append(D.DescribedGroup(error_code=err, error_message=message, group_id=gid, group_state="",
                                           assignor_name=""))
            continue
        members = []
        for m in g.members.values():
            tps = []
            for tid, ps in sorted(m.current.items(), key=lambda kv: str(kv[0])):
                name = share.topic_name(tid)
                if name is not None and ps:
                    tps.append(D.TopicPartitions(topic_id=tid, topic_name=name, partitions=list(ps)))
            members.append(D.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
                                    client_id=m.client_id, client_host=m.client_host,
                                    subscribed_topic_names=list(m.subscribed),
                                    assignment=D.Assignment(topic_partitions=tps)))
        groups.append(D.DescribedGroup(error_code=E.NONE, group_id=gid, group_state=g.state,
                                       group_epoch=g.epoch, assignment_epoch=g.assignment_epoch,
                                       assignor_name="simple", members=members, authorized_operations=ops))
    return D(groups=groups)


def _member_id_ok(member_id) -> bool:
    """Kafka 4.2 takes any member id of 1 to 36 characters (4.1 wanted a base64 UUID)."""
    return member_id is not None and 1 <= len(member_id) <= 36


def _acks_of(topics) -> list:
    out = []
    for t in topics or ():
        for p in t.partitions or ():
            batches = p.acknowledgement_batches or ()
            if batches:
                out.append((t.topic_id, p.partition_index,
                            [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]))
    return out


def _leader(ctx, topic, p):
    part = ctx.broker.replicas.get(topic, p) if topic is not None else None
    if part is None:
        return -1, -1
    return part.leader_id, part.leader_epoch


@handler(78, 1, 2)
async def share_fetch(ctx, req):
    R = ShareFetchResponse
    share = _share(ctx)
    lock_ms = 0
    if share is None:
        return R(error_code=E.UNSUPPORTED_VERSION, acquisition_lock_timeout_ms=0, responses=[])
    group, member = req.group_id, req.member_id
    if not group or not _member_id_ok(member):
        return R(error_code=E.INVALID_REQUEST, acquisition_lock_timeout_ms=0, responses=[])
    renew = ctx.api_version >= 2 and req.is_renew_ack
    if renew and (req.max_bytes or req.min_bytes or req.max_records or req.max_wait_ms):
        return R(error_code=E.INVALID_REQUEST, acquisition_lock_timeout_ms=0, responses=[],
                 error_message="maxBytes must be set to 0, minBytes must be set to 0, maxWaitMs must be set to 0 "
                               "and maxRecords must be set to 0 if isRenewAck is true.")
    lock_ms = share.lock_ms(group)
    epoch = req.share_session_epoch
    acks = _acks_of(req.topics)
    if epoch == INITIAL_EPOCH and acks:
        return R(error_code=E.INVALID_REQUEST, acquisition_lock_timeout_ms=0, responses=[])
    now = _now_ms()
    err, session = share._session_for(group, member, epoch, now, ctx.connection)
    if err == E.SHARE_SESSION_LIMIT_REACHED and req.max_wait_ms > 0:
        await asyncio.sleep(req.max_wait_ms / 1000)     # as Kafka: the answer waits MaxWaitMs
    if err:
        return R(error_code=err, acquisition_lock_timeout_ms=0, responses=[])
    named: dict = {}                       # (topic id, partition) -> PartitionData, in request order
    for t in req.topics or ():
        name = share.topic_name(t.topic_id)
        for p in t.partitions or ():
            key = (t.topic_id, p.partition_index)
            pd = named.get(key)
            if pd is None:
                pd = named[key] = R.PartitionData(partition_index=p.partition_index, error_code=0,
                                                  acknowledge_error_code=0,
                                                  current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                                                  records=b"", acquired_records=[])
            if name is None:
                pd.error_code = E.UNKNOWN_TOPIC_ID
            if epoch != FINAL_EPOCH:
                # an unknown topic id stays in the session (reported each time, as Kafka does)
                session.partitions[key] = name
    for ft in req.forgotten_topics_data or ():
        for p in ft.partitions or ():
            session.partitions.pop((ft.topic_id, p), None)
    results = await share.acknowledge(group, member, acks, now, renew) if acks else {}
    for key, (code, message) in results.items():
        pd = named.get(key)
        if pd is not None:
            pd.acknowledge_error_code = code
            pd.acknowledge_error_message = message
    if epoch == FINAL_EPOCH or renew:       # closing or renewing: the acknowledgements' answers only
        if epoch == FINAL_EPOCH:
            await share._close_session(group, member)
        return R(error_code=E.NONE, acquisition_lock_timeout_ms=lock_ms,
                 responses=_by_topic(R, ctx, share, {k: v for k, v in named.items() if k in results}))
    if ctx.api_version >= 2 and req.share_acquire_mode not in (0, 1) and session.partitions:
        # Kafka looks the mode up only when it fetches, after the acknowledgements: an unknown
        # one fails the whole request (its ShareAcquireMode.forId throws)
        log.warning("ShareFetch from %s of group %s: unknown share acquire mode %d", member, group,
                    req.share_acquire_mode)
        return R(error_code=E.UNKNOWN_SERVER_ERROR, acquisition_lock_timeout_ms=0, responses=[])
    max_records = max(req.max_records, 0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    waits = req.max_wait_ms > 0 and bool(session.partitions) and max_records > 0
    # MinBytes, as Kafka's delayed share fetch: nothing is acquired until that many bytes are
    # there to read past the partitions' next offsets, or MaxWaitMs has passed
    # (Kafka caps MinBytes at MaxBytes and the broker's fetch.max.bytes)
    min_bytes = min(req.min_bytes, req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF,
                    ctx.broker.config.get("fetch.max.bytes"))
    while waits and min_bytes > 1 and share.readable_bytes(session, min_bytes) < min_bytes \
            and await _park(ctx, share, session, deadline):
        pass
    found = await _acquire_all(ctx, share, session, named, req, max_records)
    while waits and not found and await _park(ctx, share, session, deadline):
        found = await _acquire_all(ctx, share, session, named, req, max_records)
    return R(error_code=E.NONE, acquisition_lock_timeout_ms=lock_ms, responses=_by_topic(R, ctx, share, named))


async def _park(ctx, share, session, deadline: float) -> bool:
    """Wait for an append to a partition of the session, or for records that come free, until
    ``deadline``; False without waiting once it has passed, the connection closed, the session
    was replaced or the broker is stopping."""
    loop = asyncio.get_running_loop()
    if loop.time() >= deadline or ctx.connection.closed or ctx.broker.stopping \
            or share.sessions.get((session.group, session.member)) is not session:
        return False
    hosted = [ctx.broker.replicas.get(n, p) for (_tid, p), n in session.partitions.items() if n is not None]
    await wait_for_wake([h for h in hosted if h is not None] + [share], deadline)
    return True


async def _acquire_all(ctx, share, session, named, req, max_records) -> int:
    """Acquire records from every partition of the session; returns how many were acquired."""
    R = ShareFetchResponse
    group, member = session.group, session.member
    remaining_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    found = 0
    now = _now_ms()
    items = list(session.partitions.items())
    if items:                       # start at a different partition each time, so none starves
        k = session.rotation % len(items)
        session.rotation += 1
        items = items[k:] + items[:k]
    for (tid, p), name in items:
        if found >= max_records or remaining_bytes <= 0:
            break
        pd = named.get((tid, p))
        if name is None:
            name = session.partitions[(tid, p)] = share.topic_name(tid)     # created since?
            if name is None:
                if pd is None:
                    pd = named[(tid, p)] = _empty(R, p)
                pd.error_code = E.UNKNOWN_TOPIC_ID
                continue
        try:
            sp = await share._share_partition(group, tid, name, p, create=False)
        except Exception as e:      # noqa: BLE001 - uninitialized (never assigned) or unreadable state
            if pd is None:
                pd = named[(tid, p)] = _empty(R, p)
            pd.error_code = getattr(e, "code", None) or E.UNKNOWN_SERVER_ERROR
            continue
        code, records, runs = share.acquire(group, member, tid, name, p, sp, max_records - found,
                                            min(remaining_bytes, PARTITION_READ_BYTES), now,
                                            batch_size=max(req.batch_size, 0),
                                            record_limit=ctx.api_version >= 2 and req.share_acquire_mode == 1)
        if code and pd is None:
            pd = named[(tid, p)] = _empty(R, p)
        if pd is not None:
            pd.error_code = pd.error_code or code
        if not runs:
            continue
        if pd is None:
            pd = named[(tid, p)] = _empty(R, p)
        pd.records = records
        pd.acquired_records = [R.AcquiredRecords(first_offset=a, last_offset=b, delivery_count=c)
                               for a, b, c in runs]
        found += sum(b - a + 1 for a, b, _ in runs)
        remaining_bytes -= records.length
    return found


def _empty(R, p):
    return R.PartitionData(partition_index=p, error_code=0, acknowledge_error_code=0,
                           current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                           records=b"", acquired_records=[])


def _by_topic(R, ctx, share, named):
    topics: dict = {}
    for (tid, p), pd in named.items():
        leader, epoch = _leader(ctx, share.topic_name(tid), p)
        pd.current_leader = R.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        topics.setdefault(tid, []).append(pd)
    return [R.ShareFetchableTopicResponse(topic_id=tid, partitions=ps) for tid, ps in topics.items()]


@handler(79, 1, 2)
async def share_acknowledge(ctx, req):
    R = ShareAcknowledgeResponse
    share = _share(ctx)
    if share is None:
        return R(error_code=E.UNSUPPORTED_VERSION, responses=[])
    group, member = req.group_id, req.member_id
    if not group or not _member_id_ok(member):
        return R(error_code=E.INVALID_REQUEST, responses=[])
    lock_ms = share.lock_ms(group)
    epoch = req.share_session_epoch
    if epoch == INITIAL_EPOCH:
        return R(error_code=E.INVALID_SHARE_SESSION_EPOCH, responses=[])
    now = _now_ms()
    err, session = share._session_for(group, member, epoch, now, ctx.connection)
    if err:
        return R(error_code=err, responses=[])
    acks = _acks_of(req.topics)
    results = await share.acknowledge(group, member, acks, now, ctx.api_version >= 2 and req.is_renew_ack)
    if epoch == FINAL_EPOCH:
        await share._close_session(group, member)
    topics: dict = {}
    for (tid, p), (code, message) in results.items():
        leader, lepoch = _leader(ctx, share.topic_name(tid), p)
        topics.setdefault(tid, []).append(R.PartitionData(
            partition_index=p, error_code=code, error_message=message,
            current_leader=R.LeaderIdAndEpoch(leader_id=leader, leader_epoch=lepoch)))
    return R(error_code=E.NONE, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()])


# --------------------------------------------------------------------------- offsets (admin)
def _group_error(share, group_id: str):
    """(error, message) refusing an admin request for a share group, or (0, None)."""
    if share is None:
        return E.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker."
    err = share._coordinator_error(group_id)
    if err:
        return err, None
    if share._other_group_type(group_id) is not None:
        return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
    return E.NONE, None


@handler(90, 0, 1)
async def describe_share_group_offsets(ctx, req):
    """The start offset of each share partition of a group (-1 where it has none), and from v1
    its lag: the records below the high watermark not yet done with."""
    D = DescribeShareGroupOffsetsResponse
    share = _share(ctx)
    groups = []
    for g in req.groups:
        err, message = _group_error(share, g.group_id)
        if err == E.GROUP_ID_NOT_FOUND:         # Kafka does not look at the group's type here
            err, message = E.NONE, None
        if err:
            groups.append(D.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[], error_code=err,
                                                                   error_message=message))
            continue
        known = share.start_offsets(g.group_id)
        if g.topics is None:
            wanted: dict = {}
            for tid, p in sorted(known, key=lambda k: (str(k[0]), k[1])):
                name = share.topic_name(tid)
                if name is not None:
                    wanted.setdefault(name, []).append(p)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, parts in wanted.items():
            info = ctx.broker.controller.topic(name)
            tid = info.topic_id if info is not None else UUID0
            out = []
            for p in parts:
                # unknown topics and partitions, and partitions without state, are "no data":
                # start offset -1, leader epoch 0, lag -1 (Kafka turns the persister's errors so)
                start, done = known.get((tid, p), (-1, 0)) if info is not None else (-1, 0)
                part = ctx.broker.replicas.get(name, p) if info is not None and p in info.partitions else None
                lag = -1
                if start >= 0 and part is not None and part.log is not None:
                    lag = max(part.high_watermark - start - done, 0)
                epoch = info.partitions[p].leader_epoch if start >= 0 and part is not None else 0
                out.append(D.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=start, leader_epoch=epoch, lag=lag, error_code=0))
            topics.append(D.DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid, partitions=out))
        groups.append(D.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=topics, error_code=0))
    return D(groups=groups)


def _empty_group_error(share, group_id: str):
    """(error, message) refusing to change the offsets of a group, or (0, None): it must be a
    share group (or none) without members."""
    err, message = _group_error(share, group_id)
    if err:
        return err, message
    g = share.groups.get(group_id)
    if g is not None and g.members:
        return E.NON_EMPTY_GROUP, "The group is not empty."
    return E.NONE, None


@handler(91, 0, 0)
async def alter_share_group_offsets(ctx, req):
    A = AlterShareGroupOffsetsResponse
    share = _share(ctx)
    err, message = _empty_group_error(share, req.group_id)
    if err:
        return A(error_code=err, error_message=message, responses=[])
    wanted = {}
    for t in req.topics:
        info = ctx.broker.controller.topic(t.topic_name)
        for p in t.partitions:
            if info is not None and p.partition_index in info.partitions:
                wanted[(info.topic_id, p.partition_index)] = p.start_offset
    results = await share.alter_start_offsets(req.group_id, wanted)
    topics: dict = {}
    for t in req.topics:
        info = ctx.broker.controller.topic(t.topic_name)
        tid = info.topic_id if info is not None else UUID0
        for p in t.partitions:
            code, msg = results.get((tid, p.partition_index), (E.UNKNOWN_TOPIC_OR_PARTITION, None))
            topics.setdefault((t.topic_name, tid), []).append(
                A.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index, error_code=code,
                                                          error_message=msg))
    return A(error_code=0, responses=[A.AlterShareGroupOffsetsResponseTopic(topic_name=n, topic_id=tid, partitions=ps)
                                      for (n, tid), ps in topics.items()])


@handler(92, 0, 0)
async def delete_share_group_offsets(ctx, req):
    R = DeleteShareGroupOffsetsResponse
    share = _share(ctx)
    err, message = _empty_group_error(share, req.group_id)
    if not err and not share.has_group(req.group_id):
        err, message = E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found."
    if err:
        return R(error_code=err, error_message=message, responses=[])
    out, tids = [], []
    known = {tid for tid, _ in share.start_offsets(req.group_id)}
    for t in req.topics:
        info = ctx.broker.controller.topic(t.topic_name)
        if info is None:
            out.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=UUID0, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="This server does not host this topic-partition."))
        elif info.topic_id not in known:
            out.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=info.topic_id, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="There is no offset information to delete."))
        else:
            tids.append(info.topic_id)
            out.append(R.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name, topic_id=info.topic_id,
                                                              error_code=0))
    await share.delete_start_offsets(req.group_id, tids)
    return R(error_code=0, responses=out)

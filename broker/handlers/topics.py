"""CreateTopics (key 19) v0-7, DeleteTopics (key 20) v0-6, CreatePartitions (key 37) v0-3.

CreateTopics
    v1+ ``validate_only`` and error messages.  v2+ throttle time.  v4: num_partitions and
    replication_factor may be -1 (``num.partitions`` / ``default.replication.factor``).
    v5+ flexible; a created (or validated) topic's result carries its partition count,
    replication factor and every topic config (value, source, read-only, sensitive), and a
    failed one carries -1/-1 and no configs.  v7+ the new topic id (zero for validate_only).
    Explicit assignments exclude num_partitions/replication_factor (INVALID_REQUEST);
    duplicate partition indexes or bad replica lists are INVALID_REPLICA_ASSIGNMENT.
    A null config value is INVALID_REQUEST; an unknown or bad one INVALID_CONFIG.

DeleteTopics
    v0-5 by name.  v5+ error messages.  v6 entries name a topic or a topic id (both set:
    INVALID_REQUEST; unknown id: UNKNOWN_TOPIC_ID) and results carry the topic id.
    ``delete.topic.enable=false``: TOPIC_DELETION_DISABLED (v3+) or INVALID_REQUEST (v0-2).

CreatePartitions
    v1 as v0, v2+ flexible, v3 as v2.  A topic listed twice is INVALID_REQUEST for both.

Controller mutation quotas (``controller_mutation_rate``, KIP-599; broker/client_quota.py)
    Each created partition, new partition or deleted topic's partition is one mutation.
    CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ are strict: going through the
    request's topics in order, a topic that passes its checks is admitted while the client's
    token bucket is not below zero, and refused with THROTTLING_QUOTA_EXCEEDED once it is;
    older versions are permissive: everything is done and counted.  Either way a bucket below
    zero sets ``throttle_time_ms`` (the time it takes to refill to zero) and mutes the
    connection.  ``validate_only`` requests count nothing.

Size limit (KRaft's ``MAX_RECORDS_PER_USER_OP``)
    A CreateTopics or CreatePartitions request whose changes add up to more than 10,000
    metadata records (a topic record, a record per partition and per config) fails whole:
    POLICY_VIOLATION "Unable to perform excessively large batch operation." for each topic, as
    a KRaft controller answers.  A ZooKeeper-mode Kafka has no such limit and would try to lay
    out 2^31 - 1 partitions if asked; this broker applies the limit in both modes.

Timeouts: the embedded controller applies a change before answering, so every request
completes inside its timeout; unlike a ZooKeeper-mode Kafka broker, ``timeout_ms <= 0`` is
not answered with REQUEST_TIMED_OUT (KRaft brokers behave like this too).
"""
from __future__ import annotations

import logging

from broker.client_quota import apply_mutation_throttle
from broker.config import describe_topic_configs
from broker.dispatch import handler
from controller.api import CreatableTopic, TopicResult
from protocol.errors import ErrorCode as E
from protocol.messages import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse
from protocol.primitives import UUID0

log = logging.getLogger("odradek.admin")

CR = CreateTopicsResponse
DR = DeleteTopicsResponse
PR = CreatePartitionsResponse

THROTTLED = "The throttling quota has been exceeded."
MAX_RECORDS_PER_USER_OP = 10_000        # Kafka's QuorumController limit
TOO_LARGE = "Unable to perform excessively large batch operation."


def _mutation_quota(ctx, strict_since: int, validate_only: bool = False):
    """The request's controller mutation quota (None: no quota applies to its client)."""
    mq = ctx.broker.mutation_quota
    if mq is None or validate_only:
        return None
    return mq.quota_for(ctx, strict=ctx.api_version >= strict_since)


async def _create_within_quota(ctrl, specs, quota):
    """Strict quota: check every topic first, then admit the valid ones in order while the
    bucket allows, and create those."""
    outcome = list(await ctrl.create_topics(specs, validate_only=True))
    admitted = []
    for i, r in enumerate(outcome):
        if r.error_code:
            continue
        if quota.admit(r.num_partitions):
            admitted.append(i)
        else:
            outcome[i] = TopicResult(specs[i].name, E.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    if admitted:
        done = await ctrl.create_topics([specs[i] for i in admitted])
        for i, r in zip(admitted, done):
            outcome[i] = r
    return outcome


# ----------------------------------------------------------------------------- CreateTopics

def _spec_from_request(t):
    """(CreatableTopic, None) or (None, (error_code, message)) for one request entry."""
    nulls = [c.name for c in t.configs or () if c.value is None]
    if nulls:
        return None, (E.INVALID_CONFIG,      # Kafka's InvalidConfigurationException
                      "Null value not supported for topic configs: " + ",".join(nulls))
    configs = {c.name: c.value for c in t.configs or ()}
    assignments = None
    if t.assignments:
        assignments = {}
        for a in t.assignments:
            if a.partition_index in assignments:
                return None, (E.INVALID_REPLICA_ASSIGNMENT,
                              f"Found multiple manual partition assignments for partition "
                              f"{a.partition_index}")
            assignments[a.partition_index] = list(a.broker_ids)
    return CreatableTopic(t.name, t.num_partitions, t.replication_factor, assignments, configs), None


def _topic_configs(cfg, overrides):
    out = []
    for e in describe_topic_configs(cfg, overrides):
        out.append(CR.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                            config_source=e.source, is_sensitive=e.sensitive))
    return out


@handler(19, 0, 7)
async def create_topics(ctx, req):
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    validate_only = bool(req.validate_only) if v >= 1 else False
    results = []
    specs = []
    for t in req.topics:
        res = CR.CreatableTopicResult(name=t.name, topic_id=UUID0, error_code=0, error_message=None,
                                      num_partitions=-1, replication_factor=-1, configs=[])
        results.append(res)
        spec, err = _spec_from_request(t)
        if err is not None:
            res.error_code, res.error_message = err
            continue
        specs.append((res, spec))
    quota = _mutation_quota(ctx, 6, validate_only)
    if specs and _create_records(specs, broker.config) > MAX_RECORDS_PER_USER_OP:
        for res, _ in specs:
            res.error_code, res.error_message = E.POLICY_VIOLATION, TOO_LARGE
        specs = []
    if specs and broker.policies is not None and broker.policies.create_topic is not None:
        verdicts = await create_policy_verdicts(broker, [s for _, s in specs])
        for (res, _spec), verdict in zip(specs, verdicts):
            if verdict is not None:
                res.error_code, res.error_message = verdict
        specs = [pair for pair, verdict in zip(specs, verdicts) if verdict is None]
    if specs:
        if quota is not None and quota.strict:
            outcome = await _create_within_quota(ctrl, [s for _, s in specs], quota)
        else:
            outcome = await ctrl.create_topics([s for _, s in specs], validate_only=validate_only)
            if quota is not None:           # permissive: count what was created
                for r in outcome:
                    if not r.error_code:
                        quota.admit(r.num_partitions)
        for (res, spec), r in zip(specs, outcome):
            res.error_code = r.error_code
            res.error_message = r.error_message if r.error_code else None
            if r.error_code:
                continue
            res.num_partitions = r.num_partitions
            res.replication_factor = r.replication_factor
            if r.topic_id is not None:
                res.topic_id = r.topic_id
            if v >= 5:
                res.configs = _topic_configs(broker.config, spec.configs)
            if not validate_only:
                log.info("created topic %s (%d partitions, replication factor %d) for %s",
                         spec.name, r.num_partitions, r.replication_factor, ctx.client_id)
    return CR(throttle_time_ms=apply_mutation_throttle(ctx, quota), topics=results)


async def create_policy_verdicts(broker, specs) -> list:
    """create.topic.policy.class.name (broker/policy.py): each CreatableTopic that passes the
    broker's own checks goes to the policy, as in Kafka; (error code, message) for a refusal, else
    None (also for a topic the broker's checks refuse: its own creation reports that)."""
    checked = await broker.controller.create_topics(list(specs), validate_only=True)
    out = []
    for spec, r in zip(specs, checked):
        verdict = None if r.error_code else broker.policies.check_create(spec, r.num_partitions,
                                                                         r.replication_factor)
        if verdict is not None:
            log.info("creation of topic %s refused by the create-topic policy: %s", spec.name, verdict[1])
        out.append(verdict)
    return out


def _create_records(specs, cfg) -> int:
    """The metadata records a KRaft controller would write for ``specs``: per topic one, one
    per partition and one per config (entries that fail validation count as they are)."""
    n = 0
    for _, spec in specs:
        if spec.assignments is not None:
            parts = len(spec.assignments)
        else:
            parts = spec.num_partitions if spec.num_partitions != -1 else cfg.get("num.partitions")
        n += 1 + max(parts, 0) + len(spec.configs)
    return n


# ----------------------------------------------------------------------------- DeleteTopics

@handler(20, 0, 6)
async def delete_topics(ctx, req):
    broker = ctx.broker
    ctrl = broker.controller
    v = ctx.api_version
    results: list = []
    targets = []          # (result, name-or-uuid)
    seen = set()
    if v >= 6:
        entries = [(s.name, s.topic_id) for s in req.topics]
    else:
        entries = [(n, UUID0) for n in req.topic_names]
    for name, tid in entries:
        key = name if name is not None else tid
        if key in seen:
            continue
        seen.add(key)
        res = DR.DeletableTopicResult(name=name, topic_id=tid or UUID0, error_code=0,
                                      error_message=None)
        results.append(res)
        if name is not None and tid not in (None, UUID0):
            res.error_code = E.INVALID_REQUEST
            res.error_message = "You may not specify both topic name and topic id."
            continue
        if name is None:
            info = ctrl.topic_by_id(tid) if tid not in (None, UUID0) else None
            if info is None:
                res.error_code = E.UNKNOWN_TOPIC_ID
                res.error_message = "This server does not host this topic ID."
                continue
            res.name = info.name
        if not broker.config.get("delete.topic.enable"):
            res.error_code = E.TOPIC_DELETION_DISABLED if v >= 3 else E.INVALID_REQUEST
            res.error_message = "Topic deletion is disabled."
            continue
        targets.append((res, res.name))
    quota = _mutation_quota(ctx, 5)
    if quota is not None and targets:
        admitted = []
        for res, name in targets:           # each topic counts its partitions; an unknown one is
            info = ctrl.topic(name)         # refused as such by the controller, as in Kafka
            if info is None or quota.admit(len(info.partitions)):
                admitted.append((res, name))
            else:
                res.error_code, res.error_message = E.THROTTLING_QUOTA_EXCEEDED, THROTTLED
        targets = admitted
    if targets:
        outcome = await ctrl.delete_topics([n for _, n in targets])
        for (res, _), r in zip(targets, outcome):
            res.error_code = r.error_code
            res.error_message = r.error_message if r.error_code else None
            if r.topic_id is not None:
                res.topic_id = r.topic_id
            if not r.error_code:
                log.info("deleted topic %s for %s", res.name, ctx.client_id)
    return DR(throttle_time_ms=apply_mutation_throttle(ctx, quota), responses=results)


# ----------------------------------------------------------------------------- CreatePartitions

@handler(37, 0, 3)
async def create_partitions(ctx, req):
    ctrl = ctx.broker.controller
    quota = _mutation_quota(ctx, 3, bool(req.validate_only))
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results = []
    added = 0
    for t in req.topics:
        info = ctrl.topic(t.name)
        if info is not None and counts[t.name] == 1:
            added += max(t.count - len(info.partitions), 0)
    too_large = added > MAX_RECORDS_PER_USER_OP
    answered = set()
    for t in req.topics:
        if counts[t.name] > 1 and t.name in answered:
            continue                  # Kafka answers a topic named twice once
        answered.add(t.name)
        res = PR.CreatePartitionsTopicResult(name=t.name, error_code=0, error_message=None)
        results.append(res)
        if too_large:
            res.error_code, res.error_message = E.POLICY_VIOLATION, TOO_LARGE
            continue
        if counts[t.name] > 1:
            res.error_code = E.INVALID_REQUEST
            res.error_message = "Duplicate topic in request."
            continue
        assignments = None
        if t.assignments is not None:
            assignments = [list(a.broker_ids) for a in t.assignments]
        if quota is None:
            r = await ctrl.create_partitions(t.name, t.count, assignments,
                                             validate_only=bool(req.validate_only))
        else:
            r = await _create_partitions_within_quota(ctrl, t, assignments, quota)
        if r.error_code:
            res.error_code = r.error_code
            res.error_message = r.error_message
        elif not req.validate_only:
            log.info("topic %s now has %d partitions (requested by %s)", t.name, t.count,
                     ctx.client_id)
    return PR(throttle_time_ms=apply_mutation_throttle(ctx, quota), results=results)


async def _create_partitions_within_quota(ctrl, t, assignments, quota):
    """The new partitions count as mutations: checked first, then admitted (strict) or just
    counted (permissive)."""
    info = ctrl.topic(t.name)
    added = t.count - (len(info.partitions) if info is not None else 0)
    if quota.strict:
        r = await ctrl.create_partitions(t.name, t.count, assignments, validate_only=True)
        if r.error_code:
            return r
        if not quota.admit(added):
            return TopicResult(t.name, E.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    r = await ctrl.create_partitions(t.name, t.count, assignments)
    if not quota.strict and not r.error_code:
        quota.admit(added)
    return r

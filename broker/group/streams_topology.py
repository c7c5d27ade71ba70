"""Streams groups (KIP-1071): the topology a group is initialised with, how it is configured
against the cluster's topics, and how tasks are assigned.  Pure functions and plain data; the
protocol itself is ``streams_protocol.py``.

Configuring a topology (Kafka 4.2's rules, as its InternalTopicManager applies them)
------------------------------------------------------------------------------------
1. Every source topic must exist, else status MISSING_SOURCE_TOPICS ("Source topics a, b are
   missing.") and the topology is not ready.
2. Repartition topics get partition counts: a fixed count from the topology, else the largest
   count among the source and repartition source topics of the subtopology that writes to it,
   repeated until every repartition topic has one.  No progress while some are still unknown,
   or a repartition source topic that no subtopology writes to: STREAMS_INVALID_TOPOLOGY.
3. Copartition groups: repartition topics of a group take the count of its external topics,
   which must all be equal; a group of repartition topics only takes the count of its fixed ones
   (all equal) or the largest.  Unequal counts: status INCORRECTLY_PARTITIONED_TOPICS.
4. A changelog topic has as many partitions as the subtopology has tasks: the largest count among
   its source and repartition source topics.
5. Internal topics (repartition sources and changelogs) that do not exist are to be created; one
   that exists with another partition count is INCORRECTLY_PARTITIONED_TOPICS.  While some are
   missing the status is MISSING_INTERNAL_TOPICS and the topology is not ready.

A ready topology has, per subtopology, its number of tasks; tasks are (subtopology, partition).

Assignment (``assign``): sticky and balanced
--------------------------------------------
Active tasks: each member gets floor(tasks / members) of them and the remainder one more each.  A
task stays with the member that held it in the previous target while that member has room, else
goes to a member that held it as a standby, else to the least loaded member (fewest active tasks; then the process with the
fewest tasks per member; then the member id).  Standby tasks (``num.standby.replicas`` per task
of a stateful subtopology, one with changelog topics) go to members of other processes than the
task's active one and than its other standbys, previous holders first, then the least loaded; a
replica no process can take is left out.  No warm-up tasks are assigned (Kafka 4.2's sticky
assignor assigns none either).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# StreamsGroupHeartbeat status codes
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS = 0, 1, 2
MISSING_INTERNAL_TOPICS, SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED = 3, 4, 5


class InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY: the topology cannot be configured at all."""


class _TopicConfigError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0               # 0: decided by the coordinator
    replication_factor: int = 0       # 0: the broker's default
    configs: tuple = ()               # ((key, value), ...)


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple = ()
    source_topic_regex: tuple = ()
    state_changelog_topics: tuple = ()        # TopicInfo
    repartition_sink_topics: tuple = ()
    repartition_source_topics: tuple = ()     # TopicInfo
    copartition_groups: tuple = ()            # ((source idx...), (regex idx...), (repartition idx...))

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def input_topics(self) -> list[str]:
        return list(self.source_topics) + [t.name for t in self.repartition_source_topics]


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple              # Subtopology, in the order the member sent them

    def by_id(self) -> dict:
        return {s.subtopology_id: s for s in self.subtopologies}

    def required_topics(self) -> list[str]:
        """Every topic the topology names (sources, repartition sinks and sources, changelogs)."""
        out: list[str] = []
        for s in self.subtopologies:
            out += list(s.source_topics) + list(s.repartition_sink_topics)
            out += [t.name for t in s.repartition_source_topics] + [t.name for t in s.state_changelog_topics]
        return sorted(set(out))

    def source_topic_map(self) -> dict:
        """Input topic (source or repartition source) -> subtopology id."""
        out = {}
        for s in self.subtopologies:
            for t in s.input_topics():
                out[t] = s.subtopology_id
        return out


def _info(t) -> TopicInfo:
    return TopicInfo(t.name, t.partitions, t.replication_factor,
                     tuple((kv.key, kv.value) for kv in (getattr(t, "topic_configs", None) or ())))


def topology_from_message(msg) -> Topology:
    """From a StreamsGroupHeartbeat request's or a StreamsGroupTopologyValue record's topology."""
    subs = []
    for s in msg.subtopologies or ():
        subs.append(Subtopology(
            s.subtopology_id, tuple(s.source_topics or ()), tuple(s.source_topic_regex or ()),
            tuple(_info(t) for t in s.state_changelog_topics or ()), tuple(s.repartition_sink_topics or ()),
            tuple(_info(t) for t in s.repartition_source_topics or ()),
            tuple((tuple(g.source_topics or ()), tuple(g.source_topic_regex or ()),
                   tuple(g.repartition_source_topics or ())) for g in s.copartition_groups or ())))
    return Topology(msg.epoch, tuple(subs))


def topology_to_message(cls, topo: Topology):
    """As a StreamsGroupTopologyValue (``cls``) for the group's record."""
    def info(t: TopicInfo):
        return cls.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                             topic_configs=[cls.TopicConfig(key=k, value=v) for k, v in t.configs])
    return cls(epoch=topo.epoch, subtopologies=[cls.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        source_topic_regex=list(s.source_topic_regex),
        state_changelog_topics=[info(t) for t in s.state_changelog_topics],
        repartition_sink_topics=list(s.repartition_sink_topics),
        repartition_source_topics=[info(t) for t in s.repartition_source_topics],
        copartition_groups=[cls.CopartitionGroup(source_topics=list(a), source_topic_regex=list(b),
                                                 repartition_source_topics=list(c))
                            for a, b, c in s.copartition_groups]) for s in topo.subtopologies])


@dataclass
class Configured:
    """A topology checked against the cluster's topics."""
    epoch: int
    metadata_hash: int
    tasks: dict = field(default_factory=dict)        # subtopology id -> number of tasks (ready only)
    to_create: dict = field(default_factory=dict)    # internal topic -> TopicInfo with its partitions
    internal: dict = field(default_factory=dict)     # every internal topic -> TopicInfo with its partitions
    status: tuple | None = None                      # (status code, detail) when not ready

    @property
    def ready(self) -> bool:
        return self.status is None


def metadata_hash(topo: Topology, partitions_of) -> int:
    """A stable 64-bit digest of the partition counts of every topic the topology names (-1 for
    a missing one): a change means the topology must be configured again."""
    sig = ";".join(f"{t}={partitions_of(t) if partitions_of(t) is not None else -1}"
                   for t in topo.required_topics())
    return int.from_bytes(hashlib.blake2b(sig.encode(), digest_size=8).digest(), "big", signed=True)


def _summary(topics) -> str:
    topics = list(topics)
    if not topics:
        return "<none>"
    out = ", ".join(topics[:3])
    return out + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure(topo: Topology, partitions_of, hash_: int | None = None) -> Configured:
    """``partitions_of(name)``: the partition count of an existing topic, else None.  Raises
    ``InvalidTopology`` for a topology that can never be configured."""
    h = metadata_hash(topo, partitions_of) if hash_ is None else hash_
    try:
        missing = sorted({t for s in topo.subtopologies for t in s.source_topics if partitions_of(t) is None})
        if missing:
            raise _TopicConfigError(MISSING_SOURCE_TOPICS, f"Source topics {_summary(missing)} are missing.")
        decided = _repartition_counts(topo, partitions_of)

        def count(t):
            n = partitions_of(t)
            return n if n is not None else decided.get(t)
        _copartition(topo, count, decided)
        tasks = {}
        for s in topo.subtopologies:
            counts = [count(t) for t in s.input_topics()]
            if not counts or any(c is None for c in counts):
                raise InvalidTopology(f"No source topics found for subtopology {s.subtopology_id}")
            tasks[s.subtopology_id] = max(counts)
            for t in s.state_changelog_topics:
                decided[t.name] = tasks[s.subtopology_id]
        wanted: dict = {}
        for s in topo.subtopologies:
            for t in list(s.repartition_source_topics) + list(s.state_changelog_topics):
                wanted[t.name] = TopicInfo(t.name, decided[t.name], t.replication_factor, t.configs)
        internal = dict(wanted)
        for name in topo.required_topics():
            have = partitions_of(name)
            want = wanted.get(name)
            if have is not None and want is not None:
                if have != want.partitions:
                    raise _TopicConfigError(INCORRECTLY_PARTITIONED_TOPICS,
                                            f"Existing topic {name} has different number of partitions: expected "
                                            f"{want.partitions}, found {have}")
                del wanted[name]
        if wanted:
            return Configured(topo.epoch, h, tasks, wanted, internal,
                              (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summary(sorted(wanted))}"))
        return Configured(topo.epoch, h, tasks, internal=internal)
    except _TopicConfigError as e:
        return Configured(topo.epoch, h, status=(e.status, e.detail))


def _repartition_counts(topo: Topology, partitions_of) -> dict:
    counts = {t.name: t.partitions for s in topo.subtopologies for t in s.repartition_source_topics if t.partitions}
    while True:
        needed = progress = False
        for s in topo.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                cands = [counts[t.name] for t in s.repartition_source_topics if t.name in counts]
                cands += [n for n in (partitions_of(t) for t in s.source_topics) if n is not None]
                if cands:
                    counts[sink] = max(cands)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics. There may be "
                                  "loops in the topology that cannot be resolved.")
    for s in topo.subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics, because a "
                                  "repartition source topic is never used as a sink topic.")
    return counts


def _copartition(topo: Topology, count, decided: dict) -> None:
    fixed = {t.name for s in topo.subtopologies for t in s.repartition_source_topics if t.partitions}
    flexible = {t.name for s in topo.subtopologies for t in s.repartition_source_topics if not t.partitions}
    for s in topo.subtopologies:
        for src_idx, _regex_idx, rep_idx in s.copartition_groups:
            group = {s.source_topics[i] for i in src_idx if 0 <= i < len(s.source_topics)}
            group |= {s.repartition_source_topics[i].name for i in rep_idx if 0 <= i < len(s.repartition_source_topics)}
            if not group:
                continue
            repart = {t: count(t) for t in group if t in fixed or t in flexible}
            external = {t: count(t) for t in group if t not in repart}
            if not external:
                if fixed:
                    first = count(next(iter(sorted(fixed))))
                    if any(count(t) != first for t in fixed):
                        raise _TopicConfigError(INCORRECTLY_PARTITIONED_TOPICS,
                                                f"Following topics do not have the same number of partitions: "
                                                f"[{_counts(repart)}]")
                    n = first
                else:
                    n = max(repart.values(), default=0)
                    if n == 0:
                        raise InvalidTopology(f"All topics in the copartition group had undefined partition "
                                              f"number: {sorted(repart)}")
            else:
                n = next(iter(external.values()))
                if any(v != n for v in external.values()):
                    raise _TopicConfigError(INCORRECTLY_PARTITIONED_TOPICS,
                                            f"Following topics do not have the same number of partitions: "
                                            f"[{_counts(external)}]")
            for t, have in repart.items():
                if t in fixed and have != n:
                    raise _TopicConfigError(INCORRECTLY_PARTITIONED_TOPICS,
                                            f"Number of partitions [{have}] of repartition topic [{t}] doesn't match "
                                            f"number of partitions [{n}] of the source topic.")
                decided[t] = n


def _counts(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items()))


# ----------------------------------------------------------------------------- assignment
def assign(members: dict, tasks: dict, stateful: set, num_standby: int, previous: dict) -> dict:
    """``members``: member id -> process id; ``tasks``: subtopology -> number of tasks;
    ``previous``: member id -> (active {sid: set}, standby {sid: set}, warmup) of the last target.
    Returns member id -> (active, standby, warmup), each {sid: set(partition)}."""
    out = {m: ({}, {}, {}) for m in members}
    if not members or not tasks:
        return out
    all_tasks = [(sid, p) for sid in sorted(tasks) for p in range(tasks[sid])]
    by_process: dict = {}
    for m, proc in members.items():
        by_process.setdefault(proc, []).append(m)
    active_load = dict.fromkeys(members, 0)
    total_load = dict.fromkeys(members, 0)
    owner: dict = {}
    prev_active, prev_standby = {}, {}
    for m, (act, stb, _w) in previous.items():
        if m not in members:
            continue
        for sid, ps in act.items():
            for p in ps:
                prev_active.setdefault((sid, p), m)
        for sid, ps in stb.items():
            for p in ps:
                prev_standby.setdefault((sid, p), []).append(m)
    # balanced: every member gets ``base`` active tasks and ``extra`` of them one more
    base, extra = divmod(len(all_tasks), len(members))
    room = [extra]

    def can_take(m):
        return active_load[m] < base or (active_load[m] == base and room[0] > 0)

    def give(m, t):
        if active_load[m] == base:
            room[0] -= 1
        owner[t] = m
        out[m][0].setdefault(t[0], set()).add(t[1])
        active_load[m] += 1
        total_load[m] += 1

    def process_load(m):
        proc = members[m]
        return sum(total_load[x] for x in by_process[proc]) / len(by_process[proc])

    rest = []
    for t in sorted(all_tasks, key=lambda t: (t[1], t[0])):
        m = prev_active.get(t)
        if m is not None and can_take(m):
            give(m, t)
        else:
            rest.append(t)
    left = []
    for t in rest:
        holders = [m for m in prev_standby.get(t, ()) if can_take(m)]
        if holders:
            give(min(holders, key=lambda m: (active_load[m], m)), t)
        else:
            left.append(t)
    for t in sorted(left):
        give(min(members, key=lambda m: (active_load[m], process_load(m), m)), t)

    if num_standby > 0:
        for t in all_tasks:
            if t[0] not in stateful:
                continue
            used = {members[owner[t]]}
            for _ in range(num_standby):
                cands = [m for m in members if members[m] not in used]
                if not cands:
                    break
                prev = [m for m in prev_standby.get(t, ()) if m in cands]
                m = min(prev or cands, key=lambda m: (total_load[m], process_load(m), m))
                out[m][1].setdefault(t[0], set()).add(t[1])
                total_load[m] += 1
                used.add(members[m])
    return out


__all__ = ["Topology", "Subtopology", "TopicInfo", "Configured", "InvalidTopology", "configure", "assign",
           "topology_from_message", "topology_to_message", "metadata_hash", "STALE_TOPOLOGY",
           "MISSING_SOURCE_TOPICS", "INCORRECTLY_PARTITIONED_TOPICS", "MISSING_INTERNAL_TOPICS",
           "SHUTDOWN_APPLICATION", "ASSIGNMENT_DELAYED"]

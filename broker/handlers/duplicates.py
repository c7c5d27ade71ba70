"""Requests that name a partition twice.

Kafka reads Produce, Fetch, DeleteRecords and OffsetFetch requests (among others) into maps
keyed by partition: a partition named twice counts once, at the place it first appears, with
the last entry given for it, and a topic named twice is answered as one.  ``by_partition``
does the same for any request of topics holding partitions.

Fetch keeps its own loop (``broker/fetch_session.py``, ``_entries``): Kafka answers a Fetch in
runs of consecutive partitions of one topic (FetchResponse.of), so a topic whose partitions are
named apart is answered in as many topic entries, where the answers built from this module's
map (Produce's among them) list a topic once."""
from __future__ import annotations


def by_partition(topics, name: str, parts: str, index: str) -> list[tuple[str, list]] | None:
    """[(topic name, [partition entry])] with each (topic, partition) once, or None when the
    request names none twice (the common case, answered from the request as it is).  ``name``,
    ``parts`` and ``index`` are the attribute names of the topic's name, its partition list and
    a partition's index."""
    if len(topics) == 1 and len(getattr(topics[0], parts) or ()) <= 1:
        return None
    merged: dict = {}
    n = 0
    for t in topics:
        tname = getattr(t, name)
        entries = getattr(t, parts) or ()
        n += len(entries)
        for p in entries:
            merged[(tname, getattr(p, index))] = p       # an existing key keeps its position
    if len(merged) == n and len({getattr(t, name) for t in topics}) == len(topics):
        return None
    out: dict = {}
    for (tname, _), p in merged.items():
        out.setdefault(tname, []).append(p)
    return list(out.items())


def repeated_partitions(topics, name: str, parts: str, index: str) -> set:
    """The (topic name, partition index) pairs the request names more than once (ListOffsets
    v1+ refuses every entry of those)."""
    seen, repeated = set(), set()
    for t in topics:
        tname = getattr(t, name)
        for p in getattr(t, parts) or ():
            key = (tname, getattr(p, index))
            if key in seen:
                repeated.add(key)
            seen.add(key)
    return repeated

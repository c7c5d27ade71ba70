"""Requests that name topics by id (Produce v13, OffsetCommit v10, OffsetFetch v10): the id is
turned into the topic's name once, in place, before the ACL check and the handler look at the
request, as Kafka does with its metadata cache.  An id that no topic has keeps the name "", and
the handler answers its partitions UNKNOWN_TOPIC_ID."""
from __future__ import annotations

from protocol.primitives import UUID0


def name_topics(ctrl, topics) -> None:
    """Give each topic entry (``.name``, ``.topic_id``) whose name is empty the name of its id,
    when a topic has that id.  Entries that already have a name are left alone, so a second
    call (the handler after the ACL check) changes nothing."""
    for t in topics or ():
        if not t.name:
            info = ctrl.topic_by_id(t.topic_id)
            if info is not None:
                t.name = info.name


def topic_id_of(ctrl, name: str):
    """The id of the topic called ``name``; the zero id when there is none."""
    info = ctrl.topic(name) if name else None
    return info.topic_id if info is not None else UUID0

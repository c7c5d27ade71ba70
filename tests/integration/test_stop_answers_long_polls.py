"""A clean stop (SIGTERM) answers the long polls in flight: a Fetch parked for its MaxWaitMs and
a ShareFetch parked for its own are answered, empty, as the broker stops, instead of keeping the
stop waiting and then losing their connections."""
from __future__ import annotations

import threading
import uuid

import pytest

from protocol.messages import FindCoordinatorRequest, ShareFetchRequest, ShareGroupHeartbeatRequest
from tests.support import BrokerProcess
from tests.support.net import wait_for
from tests.support.rawkafka import RawConnection

pytestmark = pytest.mark.integration


def test_sigterm_answers_parked_fetches(tmp_path):
    b = BrokerProcess(tmp_path, name="broker", props={"num.partitions": 1})
    b.start()
    answers: dict = {}
    try:
        topic, group, member = "parked", "parked-share", uuid.uuid4().hex[:22]
        with RawConnection(b.host, b.port) as c:
            c.metadata([topic])                          # created, empty
            tid = c.metadata([topic], version=12).topics[0].topic_id

            def joined():
                c.request(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
                return c.request(76, 1, ShareGroupHeartbeatRequest(
                    group_id=group, member_id=member, member_epoch=0, rack_id=None,
                    subscribed_topic_names=[topic])).error_code == 0
            wait_for(joined, 30, what="the share group coordinator")
        F = ShareFetchRequest

        def share_fetch(conn, epoch, wait):
            return conn.request(78, 1, F(group_id=group, member_id=member, share_session_epoch=epoch,
                                         max_wait_ms=wait, min_bytes=1, max_bytes=1 << 20, max_records=500,
                                         batch_size=500, topics=[F.FetchTopic(topic_id=tid, partitions=[
                                             F.FetchPartition(partition_index=0, partition_max_bytes=0,
                                                              acknowledgement_batches=[])])] if epoch == 0 else [],
                                         forgotten_topics_data=[]))
        fetch_conn, share_conn = RawConnection(b.host, b.port, timeout=60), RawConnection(b.host, b.port, timeout=60)
        assert share_fetch(share_conn, 0, 0).error_code == 0

        def park(name, call):
            try:
                answers[name] = call()
            except Exception as e:          # noqa: BLE001 - what the connection did instead
                answers[name] = e
        threads = [threading.Thread(target=park, args=("fetch", lambda: fetch_conn.fetch(
                       topic, 0, 0, max_wait_ms=60_000))),
                   threading.Thread(target=park, args=("share", lambda: share_fetch(share_conn, 1, 60_000)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(1.0)
        assert all(t.is_alive() for t in threads) and not answers      # both parked
        assert b.stop() == 0
        for t in threads:
            t.join(30)
        fetch_conn.close()
        share_conn.close()
    finally:
        if b.proc is not None and b.proc.poll() is None:
            b.kill()
    assert not isinstance(answers["fetch"], Exception), answers
    assert answers["fetch"].error_code == 0 and not answers["fetch"].records
    assert not isinstance(answers["share"], Exception), answers
    assert answers["share"].error_code == 0
    assert all(not p.acquired_records for t in answers["share"].responses for p in t.partitions)

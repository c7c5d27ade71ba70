"""The embedded store's count of durable changes (``metadata_offset``, DescribeQuorum's high
watermark in KRaft mode): one per successful write, none for requests that change nothing or
fail, kept in the JSON document and loaded back, 0 for a document written before it existed."""
import asyncio
import json

import pytest

from broker.config import BrokerConfig
from controller import single_node
from controller.api import CreatableTopic
from controller.single_node import METADATA_FILE, SingleNodeController


def run(coro):
    return asyncio.run(coro)


def make(tmp_path):
    return SingleNodeController(BrokerConfig({"broker.id": "0", "log.dirs": str(tmp_path)}))


def stored(tmp_path) -> dict:
    return json.loads((tmp_path / METADATA_FILE).read_text())


def test_one_per_durable_change_and_kept_over_a_restart(tmp_path):
    async def go():
        c = make(tmp_path)
        assert c.metadata_offset() == 0
        await c.start()
        assert c.metadata_offset() == 1                 # the store's creation
        await c.create_topics([CreatableTopic("a", 2, 1), CreatableTopic("b", 1, 1)])
        assert c.metadata_offset() == 2                 # one write for the whole request
        await c.create_topics([CreatableTopic("c", 1, 1)], validate_only=True)
        [bad] = await c.create_topics([CreatableTopic("a", 1, 1)])     # exists already
        assert bad.error_code and c.metadata_offset() == 2
        await c.alter_topic_configs("a", {"retention.ms": "1000"})
        await c.allocate_producer_ids(0)
        await c.update_finalized_features({})
        assert c.metadata_offset() == 5
        assert stored(tmp_path)["metadata_offset"] == 5
        await c.stop()
        c2 = make(tmp_path)
        await c2.start()
        assert c2.metadata_offset() == 5                # loaded, not rewritten
        await c2.delete_topics(["b"])
        assert c2.metadata_offset() == 6 and stored(tmp_path)["metadata_offset"] == 6
        await c2.delete_topics(["b"])                   # unknown now: nothing written
        assert c2.metadata_offset() == 6
    run(go())


def test_a_store_written_before_the_count_starts_at_zero(tmp_path):
    async def go():
        c = make(tmp_path)
        await c.start()
        await c.create_topics([CreatableTopic("a", 1, 1)])
        await c.stop()
        doc = stored(tmp_path)
        del doc["metadata_offset"]
        (tmp_path / METADATA_FILE).write_text(json.dumps(doc))
        c2 = make(tmp_path)
        await c2.start()
        assert c2.metadata_offset() == 0 and set(c2.topics()) == {"a"}
        await c2.create_topics([CreatableTopic("b", 1, 1)])
        assert c2.metadata_offset() == 1 and stored(tmp_path)["metadata_offset"] == 1
    run(go())


def test_a_failed_write_does_not_count(tmp_path, monkeypatch):
    async def go():
        c = make(tmp_path)
        await c.start()
        real = single_node._write_atomically

        def failing(path, data):
            raise OSError("disk full")
        monkeypatch.setattr(single_node, "_write_atomically", failing)
        with pytest.raises(OSError):
            await c.create_topics([CreatableTopic("a", 1, 1)])
        assert c.metadata_offset() == 1
        monkeypatch.setattr(single_node, "_write_atomically", real)
        await c.create_topics([CreatableTopic("a", 1, 1)])
        assert c.metadata_offset() == 2 and stored(tmp_path)["metadata_offset"] == 2
    run(go())


def test_the_zookeeper_controller_has_no_count():
    # KRaft mode (the only user) never runs on ZooKeeper
    from controller.api import Controller
    from controller.zookeeper.controller import ZkController
    assert not hasattr(Controller, "metadata_offset") and not hasattr(ZkController, "metadata_offset")

"""meta.properties checks of a KRaft node (storage/meta_properties.py; the broker process side is
tests/integration/test_kraft_config.py, the formatting tool's tests/tools/test_storage_tool.py)."""
from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from storage.meta_properties import NotFormatted, check_formatted, read_meta, write_kraft_meta


def kraft(tmp_path, **more):
    return BrokerConfig({"process.roles": "broker,controller", "node.id": "1",
                         "controller.quorum.voters": "1@localhost:9093", "controller.listener.names": "CONTROLLER",
                         "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                         "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                         "log.dirs": f"{tmp_path}/a,{tmp_path}/b", **more})


def test_every_directory_must_be_formatted_alike(tmp_path):
    cfg = kraft(tmp_path)
    with pytest.raises(NotFormatted, match="No `meta.properties` found in .*/a"):
        check_formatted(cfg)
    write_kraft_meta(f"{tmp_path}/a", 1, "C1aaaaaaaaaaaaaaaaaaaa", "D1aaaaaaaaaaaaaaaaaaaa")
    with pytest.raises(NotFormatted, match="No `meta.properties` found in .*/b"):
        check_formatted(cfg)
    write_kraft_meta(f"{tmp_path}/b", 1, "C2aaaaaaaaaaaaaaaaaaaa", "D2aaaaaaaaaaaaaaaaaaaa")
    with pytest.raises(NotFormatted, match="Expected C1aaaaaaaaaaaaaaaaaaaa, but read C2aaaaaaaaaaaaaaaaaaaa"):
        check_formatted(cfg)
    write_kraft_meta(f"{tmp_path}/b", 1, "C1aaaaaaaaaaaaaaaaaaaa", "D2aaaaaaaaaaaaaaaaaaaa")
    assert check_formatted(cfg) == "C1aaaaaaaaaaaaaaaaaaaa"
    assert read_meta(f"{tmp_path}/a") == {"node.id": "1", "directory.id": "D1aaaaaaaaaaaaaaaaaaaa", "version": "1",
                                          "cluster.id": "C1aaaaaaaaaaaaaaaaaaaa"}
    # metadata.log.dir counts too
    cfg = kraft(tmp_path, **{"metadata.log.dir": f"{tmp_path}/meta"})
    with pytest.raises(NotFormatted, match="No `meta.properties` found in .*/meta"):
        check_formatted(cfg)


def test_v0_directories_are_taken_with_broker_id_as_node_id(tmp_path):
    cfg = kraft(tmp_path)
    for d, bid in (("a", 1), ("b", 2)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "meta.properties").write_text(f"version=0\nbroker.id={bid}\ncluster.id=C1aaaaaaaaaaaaaaaaaaaa\n")
    with pytest.raises(NotFormatted, match="Stored node id 2 doesn't match previous node id 1"):
        check_formatted(cfg)
    (tmp_path / "b" / "meta.properties").write_text("broker.id=1\ncluster.id=C1aaaaaaaaaaaaaaaaaaaa\n")
    assert check_formatted(cfg) == "C1aaaaaaaaaaaaaaaaaaaa"
    (tmp_path / "b" / "meta.properties").write_text("version=7\nnode.id=1\ncluster.id=C1aaaaaaaaaaaaaaaaaaaa\n")
    with pytest.raises(NotFormatted, match="Unknown meta.properties version 7"):
        check_formatted(cfg)

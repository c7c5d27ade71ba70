"""protocol/client.py against a tiny fake Kafka server (the codec answering), and against a
real broker when one is available."""
from __future__ import annotations

import asyncio
import struct

import pytest

from protocol.api import decode_request, encode_response
from protocol.client import (BrokerUnavailableError, ClusterClient, ConnectionClosedError,
                             KafkaClientConnection, KafkaConnectionError, RequestTimeoutError,
                             UnsupportedVersionError, parse_bootstrap, uuid_from_str,
                             uuid_to_str)
from protocol.messages import (ApiVersionsResponse, FindCoordinatorRequest,
                               FindCoordinatorResponse, MetadataRequest, MetadataResponse,
                               ProduceRequest, ProduceResponse)
from tests.support import free_port

SUPPORTED = {0: (0, 11), 3: (0, 12), 10: (0, 4), 18: (0, 3)}


class FakeBroker:
    """Answers ApiVersions/Metadata/FindCoordinator/Produce; knobs for misbehaviour."""

    def __init__(self, *, reject_api_versions_above=None, reverse_pairs=False,
                 silent_keys=(), close_on_key=None):
        self.reject_above = reject_api_versions_above
        self.reverse_pairs = reverse_pairs
        self.silent_keys = set(silent_keys)
        self.close_on_key = close_on_key
        self.seen = []            # (api_key, api_version, correlation_id)
        self.port = free_port()
        self.server = None

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    def _answer(self, header, body):
        key, ver = header.request_api_key, header.request_api_version
        if key == 18:
            if self.reject_above is not None and ver > self.reject_above:
                resp = ApiVersionsResponse(error_code=35, api_keys=[
                    ApiVersionsResponse.ApiVersion(api_key=18, min_version=0,
                                                   max_version=self.reject_above)])
                return encode_response(header.correlation_id, resp, 18, 0)
            resp = ApiVersionsResponse(api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in SUPPORTED.items()])
            return encode_response(header.correlation_id, resp, 18, ver)
        if key == 3:
            M = MetadataResponse
            resp = M(brokers=[M.MetadataResponseBroker(node_id=7, host="127.0.0.1", port=self.port)],
                     cluster_id="fake", controller_id=7,
                     topics=[M.MetadataResponseTopic(name="t", partitions=[
                         M.MetadataResponsePartition(partition_index=0, leader_id=7,
                                                     replica_nodes=[7], isr_nodes=[7])])])
            return encode_response(header.correlation_id, resp, 3, ver)
        if key == 10:
            F = FindCoordinatorResponse
            if ver >= 4:
                resp = F(coordinators=[F.Coordinator(key="g", node_id=7, host="127.0.0.1",
                                                     port=self.port)])
            else:
                resp = F(node_id=7, host="127.0.0.1", port=self.port)
            return encode_response(header.correlation_id, resp, 10, ver)
        if key == 0:
            P = ProduceResponse
            resp = P(responses=[P.TopicProduceResponse(name="t", partition_responses=[
                P.PartitionProduceResponse(index=0, base_offset=42)])])
            return encode_response(header.correlation_id, resp, 0, ver)
        raise AssertionError(f"unexpected api {key}")

    async def _serve(self, reader, writer):
        held = None
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, body = decode_request(frame)
                self.seen.append((header.request_api_key, header.request_api_version,
                                  header.correlation_id))
                if header.request_api_key == self.close_on_key:
                    writer.close()
                    return
                if header.request_api_key in self.silent_keys:
                    continue
                if header.request_api_key == 0 and body.acks == 0:
                    continue
                out = self._answer(header, body)
                out = struct.pack(">i", len(out)) + out
                if self.reverse_pairs and header.request_api_key == 3:
                    if held is None:
                        held = out
                        continue
                    writer.write(out + held)      # answer the second before the first
                    held = None
                else:
                    writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(coro):
    return asyncio.run(coro)


def test_connect_negotiates_versions():
    async def main():
        async with FakeBroker() as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, client_id="t",
                                                       timeout=5)
            assert conn.api_versions == SUPPORTED
            assert conn.pick_version(3) == 12
            assert conn.pick_version(3, max_version=4) == 4
            resp = await conn.send(MetadataRequest(topics=None))
            assert resp.cluster_id == "fake"
            assert fb.seen[-1][:2] == (3, 12)
            resp = await conn.send(MetadataRequest(topics=None), version=1)
            assert fb.seen[-1][:2] == (3, 1)
            await conn.close()
            assert conn.closed
    run(main())


def test_api_versions_unsupported_version_retries_lower():
    async def main():
        async with FakeBroker(reject_api_versions_above=2) as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            assert conn.api_versions_version == 2
            assert [v for k, v, _ in fb.seen if k == 18] == [4, 2]
            await conn.close()
        async with FakeBroker(reject_api_versions_above=0) as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            assert conn.api_versions_version == 0
            await conn.close()
    run(main())


def test_pipelined_responses_matched_by_correlation_id():
    async def main():
        async with FakeBroker(reverse_pairs=True) as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            reqs = [conn.send(MetadataRequest(topics=None), version=v) for v in (2, 4, 7, 9)]
            resps = await asyncio.gather(*reqs)
            assert all(r.cluster_id == "fake" for r in resps)
            ids = [c for k, _, c in fb.seen if k == 3]
            assert len(set(ids)) == 4
            assert conn.in_flight == 0
            await conn.close()
    run(main())


def test_request_timeout_is_a_connection_error():
    async def main():
        async with FakeBroker(silent_keys={3}) as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            with pytest.raises(RequestTimeoutError) as ei:
                await conn.send(MetadataRequest(topics=None), timeout=0.2)
            assert isinstance(ei.value, ConnectionError)
            assert isinstance(ei.value, asyncio.TimeoutError)
            assert "Metadata request" in str(ei.value) and "timed out" in str(ei.value)
            assert conn.in_flight == 0
            await conn.close()
    run(main())


def test_acks0_produce_expects_no_response():
    async def main():
        async with FakeBroker() as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            P = ProduceRequest
            req = P(acks=0, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
                P.PartitionProduceData(index=0, records=None)])])
            assert await conn.send(req, timeout=1) is None
            req.acks = 1
            resp = await conn.send(req, timeout=5)
            assert resp.responses[0].partition_responses[0].base_offset == 42
            await conn.close()
    run(main())


def test_broker_down_and_closed_connection():
    async def main():
        port = free_port()
        with pytest.raises(BrokerUnavailableError) as ei:
            await KafkaClientConnection.connect("127.0.0.1", port, timeout=2)
        assert f"127.0.0.1:{port}" in str(ei.value)
        async with FakeBroker(close_on_key=3) as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            with pytest.raises(ConnectionClosedError):
                await conn.send(MetadataRequest(topics=None), timeout=5)
            with pytest.raises(KafkaConnectionError):
                await conn.send(MetadataRequest(topics=None), timeout=5)
            await conn.close()
    run(main())


def test_unsupported_api():
    async def main():
        async with FakeBroker() as fb:
            conn = await KafkaClientConnection.connect("127.0.0.1", fb.port, timeout=5)
            from protocol.messages import DescribeConfigsRequest
            with pytest.raises(UnsupportedVersionError):
                await conn.send(DescribeConfigsRequest(resources=[]))
            await conn.close()
    run(main())


def test_cluster_client_routes_by_metadata():
    async def main():
        async with FakeBroker() as fb:
            dead = free_port()
            cc = ClusterClient(f"127.0.0.1:{dead},127.0.0.1:{fb.port}", timeout=5)
            await cc.start()
            assert set(cc.nodes) == {7} and cc.controller_id == 7 and cc.cluster_id == "fake"
            await cc.refresh_metadata(None)
            assert cc.leader_for("t", 0) == 7
            P = ProduceRequest
            req = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
                P.PartitionProduceData(index=0, records=None)])])
            resp = await cc.send_to_leader("t", 0, req)
            assert resp.responses[0].partition_responses[0].base_offset == 42
            resp = await cc.send_to_controller(MetadataRequest(topics=[]))
            assert resp.controller_id == 7
            assert await cc.find_coordinator("g") == 7
            await cc.close()
    run(main())


def test_cluster_client_bootstrap_timeout():
    async def main():
        cc = ClusterClient(f"127.0.0.1:{free_port()}", timeout=0.5)
        with pytest.raises(BrokerUnavailableError) as ei:
            await cc.start()
        assert "could not connect to any bootstrap server" in str(ei.value)
    run(main())


def test_helpers():
    assert parse_bootstrap("a:1, b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")
    import uuid
    u = uuid.uuid4()
    assert uuid_from_str(uuid_to_str(u)) == u
    assert len(uuid_to_str(u)) == 22


def test_against_real_broker(broker):
    async def main():
        conn = await KafkaClientConnection.connect(broker.host, broker.port, timeout=10)
        assert 3 in conn.api_versions and 18 in conn.api_versions
        resps = await asyncio.gather(*[conn.send(MetadataRequest(topics=None)) for _ in range(8)])
        assert all(r.brokers for r in resps)
        await conn.close()
        cc = ClusterClient(broker.bootstrap, timeout=10)
        await cc.start()
        assert cc.nodes and cc.controller_id in cc.nodes
        if (await cc.any_connection()).supports(FindCoordinatorRequest.API_KEY):
            try:
                await cc.find_coordinator("client-test-group")
            except Exception as e:      # coordinator may still be loading
                assert "coordinator" in str(e).lower()
        await cc.close()
    run(main())

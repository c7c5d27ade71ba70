"""A blocking, one-socket Kafka client for tests that need exact control over the bytes on
the wire (bad input, raw produce/fetch).  Requests are built with the project's message
classes; ``send_raw`` sends any bytes at all as one frame."""
from __future__ import annotations

import socket
import struct

from protocol import api
from protocol.messages import (FetchRequest, ListOffsetsRequest, MetadataRequest,
                               ProduceRequest)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 18, 22


class Closed(ConnectionError):
    """The broker closed the connection."""


class RawConnection:
    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "raw-test"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- bytes -----------------------------------------------------------------------------
    def send_raw(self, payload: bytes) -> None:
        """One frame: 4-byte size prefix + ``payload``."""
        self.sock.sendall(struct.pack(">i", len(payload)) + bytes(payload))

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise Closed("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def is_closed(self, wait: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within ``wait`` s."""
        old = self.sock.gettimeout()
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1)
            return data == b""
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        finally:
            self.sock.settimeout(old)

    # -- messages --------------------------------------------------------------------------
    def request_bytes(self, api_key: int, version: int, body) -> bytes:
        self.correlation_id += 1
        header = api.make_request_header(api_key, version, self.correlation_id, self.client_id)
        return api.encode_request(header, body)

    def request(self, api_key: int, version: int, body, expect_response: bool = True):
        self.send_raw(self.request_bytes(api_key, version, body))
        if not expect_response:
            return None
        frame = self.recv_frame()
        header, resp = api.decode_response(frame, api_key, version)
        assert header.correlation_id == self.correlation_id
        return resp

    # -- conveniences ----------------------------------------------------------------------
    def metadata(self, topics, version: int = 9, auto_create: bool = True):
        body = MetadataRequest(
            topics=None if topics is None else
            [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=auto_create,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False)
        return self.request(METADATA, version, body)

    def produce(self, topic: str, partition: int, records, *, version: int = 8, acks: int = -1,
                timeout_ms: int = 10000):
        """Produce ``records`` (bytes of a batch or message set); returns the partition's
        response (or None for acks=0)."""
        body = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms,
                              topic_data=[ProduceRequest.TopicProduceData(
                                  name=topic, partition_data=[ProduceRequest.PartitionProduceData(
                                      index=partition, records=records)])])
        resp = self.request(PRODUCE, version, body, expect_response=acks != 0)
        if resp is None:
            return None
        return resp.responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int, offset: int, *, version: int = 11,
              max_bytes: int = 50 << 20, max_wait_ms: int = 0):
        """The partition's FetchResponse data (records as bytes)."""
        return self.fetch_partitions(topic, [(partition, offset, max_bytes)], version=version,
                                     max_bytes=max_bytes, max_wait_ms=max_wait_ms)[0]

    def fetch_partitions(self, topic: str, partitions, *, version: int = 11,
                         max_bytes: int = 50 << 20, max_wait_ms: int = 0):
        """One Fetch of ``partitions`` = [(partition, offset, partition max bytes)], in that
        order; the partitions' FetchResponse data."""
        body = FetchRequest(
            cluster_id=None, replica_id=-1, replica_state=None, max_wait_ms=max_wait_ms,
            min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=pmax) for p, offset, pmax in partitions])],
            forgotten_topics_data=[], rack_id="")
        resp = self.request(FETCH, version, body)
        return resp.responses[0].partitions

    def list_offsets(self, topic: str, partition: int, timestamp: int, version: int = 5,
                     replica_id: int = -1):
        body = ListOffsetsRequest(
            replica_id=replica_id, isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp,
                    max_num_offsets=1)])])
        resp = self.request(LIST_OFFSETS, version, body)
        return resp.topics[0].partitions[0]


class SyncClient:
    """The project's own client (``protocol.client.KafkaClientConnection``) driven synchronously:
    ``client(request, version=None)`` sends one request and returns the decoded response."""

    def __init__(self, bootstrap: str, timeout: float = 10, **connect):
        """``connect``: more arguments of ``KafkaClientConnection.connect`` (``sasl=``, ``ssl=``)."""
        import asyncio

        from protocol.client import KafkaClientConnection
        self.loop = asyncio.new_event_loop()
        host, port = bootstrap.rsplit(":", 1)
        self.conn = self.loop.run_until_complete(KafkaClientConnection.connect(host, int(port), timeout=timeout,
                                                                              **connect))

    def __call__(self, req, version=None):
        return self.loop.run_until_complete(self.conn.send(req, version=version))

    def close(self):
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


def send_once(bootstrap: str, req, version=None, timeout: float = 10, **connect):
    """One request on a fresh connection (``SyncClient``), closed after the answer."""
    c = SyncClient(bootstrap, timeout, **connect)
    try:
        return c(req, version)
    finally:
        c.close()

"""ZooKeeper-coordinated cluster metadata and the controller role (Kafka 3.x ZK mode).

* ``znodes``      every path and JSON payload of Kafka's layout (encode/decode)
* ``zkbridge``    kazoo behind asyncio: blocking calls in threads, watches as loop events
* ``controller``  ``ZkController``: the ``controller.api.Controller`` a broker uses
* ``role``        ``ControllerRole``: election winner's event loop (elections, LeaderAndIsr, ...)
* ``channel``     controller -> broker request queues (LeaderAndIsr, UpdateMetadata, StopReplica)
"""

"""SASL helpers for tests driving confluent-kafka."""
from __future__ import annotations

import time


def login_error(client_conf: dict, timeout: float = 5.0) -> str | None:
    """None when a confluent-kafka client with ``client_conf`` authenticates (a Metadata request
    succeeds), else the error text -- returned as soon as the client reports an authentication
    failure, or after ``timeout``."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    errors = []
    a = AdminClient({**client_conf, "error_cb": lambda e: errors.append(e), "reconnect.backoff.max.ms": 200})
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            a.list_topics(timeout=0.5)
            return None
        except Exception as e:   # noqa: BLE001 - whatever the client raised is the answer
            last = e
        a.poll(0)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return f"authentication failed: {errors[0]}"
    return f"{last} {errors}"

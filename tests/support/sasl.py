"""SASL helpers for the tests: the test users, a listener's JAAS text, a confluent-kafka login check."""
from __future__ import annotations

import time

ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")


def jaas_config(module: str = "plain.PlainLoginModule", login=ADMIN, users=(ADMIN, ALICE, BOB)) -> str:
    """A listener's ``sasl.jaas.config``: ``module`` under org.apache.kafka.common.security, the
    broker's own ``login`` (for its inter-broker connections) and, for PLAIN, ``users`` as
    ``user_<name>="<password>"`` entries (SCRAM modules ignore them)."""
    entries = " ".join(f'user_{u}="{pw}"' for u, pw in users)
    return (f"org.apache.kafka.common.security.{module} required "
            f'username="{login[0]}" password="{login[1]}" {entries};')


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

"""Apache Kafka's Java share consumer (KafkaShareConsumer, KIP-932) and its admin calls against a
real broker (marker ``java``, not in the default tier).

``tests/java/ShareConsumerCheck.java`` (ours) is compiled against the class path in
``ODRADEK_KAFKA_CLIENTS_CP`` (as ``test_java_client.py``), which must hold kafka-clients 4.1 or
later for these checks: earlier clients have no share consumer, and the module is skipped with
that reason.  Each check of the driver becomes one test here.
"""
from __future__ import annotations

import os
import zipfile

import pytest

from tests.integration.test_java_client import _classpath, run_checks
from tests.support import BrokerProcess
from tests.support.broker import running

pytestmark = pytest.mark.java

SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "java", "ShareConsumerCheck.java")
CHECKS = ["share_two_members", "share_explicit_acks", "share_lock_timeout", "share_latest_at_first_fetch",
          "share_admin"]
SHARE_CONSUMER = "org/apache/kafka/clients/consumer/KafkaShareConsumer.class"


def _has_share_consumer(cp: str) -> bool:
    for entry in cp.split(os.pathsep):
        if entry.endswith(".jar") and os.path.isfile(entry):
            with zipfile.ZipFile(entry) as z:
                if SHARE_CONSUMER in z.namelist():
                    return True
        elif os.path.isfile(os.path.join(entry, SHARE_CONSUMER)):
            return True
    return False


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if not _has_share_consumer(_classpath()):
        pytest.skip("the kafka-clients in ODRADEK_KAFKA_CLIENTS_CP has no KafkaShareConsumer (needs 4.1 or later)")
    work = tmp_path_factory.mktemp("java-share")
    props = {"num.partitions": 1, "group.share.min.record.lock.duration.ms": 1000}
    with running(BrokerProcess(work, name="broker", props=props)) as b:
        return run_checks(work, b.bootstrap, source=SOURCE, main="ShareConsumerCheck")


@pytest.mark.parametrize("check", CHECKS)
def test_java_share_consumer(results, check):
    assert check in results, f"the driver printed no result for {check}"
    r = results[check]
    assert r["ok"], r["detail"]

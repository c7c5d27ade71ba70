"""KIP-714 client metrics subscriptions in a ZooKeeper cluster: written through one broker into
/config/client-metrics/<name> with a /config/changes notification, seen by the other broker's
DescribeConfigs and ListClientMetricsResources, deleted through that one and gone on the first;
a broker started later loads them (the single-broker tests are
tests/integration/test_client_metrics_resource.py)."""
from __future__ import annotations

import pytest

from protocol.messages import (DescribeConfigsRequest as D, IncrementalAlterConfigsRequest as I,
                               ListClientMetricsResourcesRequest as L)
from tests.support.rawkafka import RawConnection
from tests.tools.conftest import tool

pytestmark = pytest.mark.cluster

CM = 16


def names(b) -> list[str]:
    with RawConnection(b.host, b.port) as c:
        return [x.name for x in c.request(74, 0, L()).client_metrics_resources]


def configs(b, name) -> dict[str, str]:
    with RawConnection(b.host, b.port) as c:
        r = c.request(32, 4, D(resources=[D.DescribeConfigsResource(resource_type=CM, resource_name=name,
                                                                     configuration_keys=None)],
                               include_synonyms=False, include_documentation=False)).results[0]
        assert r.error_code == 0, r
        return {x.name: x.value for x in r.configs}


def test_a_subscription_set_through_one_broker_is_seen_by_the_other(cluster_factory):
    c = cluster_factory(2)
    b1, b2 = c.brokers[1], c.brokers[2]
    r = tool("kafka-client-metrics", "--bootstrap-server", b1.bootstrap, "--alter", "--name", "fleet/a b",
             "--metrics", "org.apache.kafka.producer.", "--interval", "1000", "--match", "client_id=app-.*")
    assert r.rc == 0, r
    want = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=app-.*"}
    c.wait_for(lambda: configs(b2, "fleet/a b") == want, 15, what="broker 2 to see the subscription")
    assert names(b2) == ["fleet/a b"]
    # stored where Kafka's ConfigType puts it, the name sanitized as for quota entities
    assert c.get_json("/config/client-metrics/fleet%2Fa%20b")["config"] == want

    # a change through broker 2 reaches broker 1; the tool describes through broker 2
    with RawConnection(b2.host, b2.port) as conn:
        r = conn.request(44, 1, I(resources=[I.AlterConfigsResource(resource_type=CM, resource_name="fleet/a b", configs=[
            I.AlterableConfig(name="interval.ms", config_operation=0, value="2000"),
            I.AlterableConfig(name="match", config_operation=1, value=None)])], validate_only=False))
        assert r.responses[0].error_code == 0, r
    c.wait_for(lambda: configs(b1, "fleet/a b") == {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"},
               15, what="broker 1 to see the change")
    r = tool("kafka-client-metrics", "--bootstrap-server", b2.bootstrap, "--describe", "--name", "fleet/a b")
    assert r.lines == ["Client metrics configs for fleet/a b are:", "  interval.ms=2000",
                       "  metrics=org.apache.kafka.producer."], r

    # a broker that starts later reads the subscriptions from ZooKeeper
    c.stop(1)
    c.start_broker(1)
    assert configs(b1, "fleet/a b")["interval.ms"] == "2000"

    r = tool("kafka-client-metrics", "--bootstrap-server", b2.bootstrap, "--delete", "--name", "fleet/a b")
    assert r.rc == 0, r
    c.wait_for(lambda: names(b1) == [], 15, what="broker 1 to drop the subscription")
    assert configs(b1, "fleet/a b") == {}

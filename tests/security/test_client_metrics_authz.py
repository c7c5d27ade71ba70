"""Authorization of client metrics subscriptions (KIP-714), as Kafka's broker does it: the
CLIENT_METRICS config resource (16) of DescribeConfigs needs DESCRIBE_CONFIGS and of
IncrementalAlterConfigs ALTER_CONFIGS on the cluster, ListClientMetricsResources (74)
DESCRIBE_CONFIGS on the cluster; otherwise CLUSTER_AUTHORIZATION_FAILED.  The telemetry APIs
themselves (GetTelemetrySubscriptions, PushTelemetry) need no ACL: any authenticated client
pushes its metrics."""
from __future__ import annotations

import asyncio
import time

import pytest

from protocol.messages import (DescribeConfigsRequest as D, IncrementalAlterConfigsRequest as I,
                               ListClientMetricsResourcesRequest as L)
from tests.security import test_acls
from tests.security.test_acls import acls

pytestmark = pytest.mark.integration
CM, C_AUTH = 16, 31
authz_broker = test_acls.authz_broker       # the fixture: a SASL_PLAINTEXT broker with ACLs on


def _ask(b, user):
    """(list error, names, describe error, alter error) for ``user``."""
    from protocol.client import KafkaClientConnection, SaslSettings
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)

    async def go():
        c = await KafkaClientConnection.connect(host, int(port), timeout=10,
                                                sasl=SaslSettings("PLAIN", user, f"{user}-secret"))
        try:
            alter = await c.send(I(resources=[I.AlterConfigsResource(
                resource_type=CM, resource_name=f"by-{user}",
                configs=[I.AlterableConfig(name="metrics", config_operation=0, value="*")])], validate_only=False))
            listed = await c.send(L(resource_types=[CM]))
            desc = await c.send(D(resources=[D.DescribeConfigsResource(
                resource_type=CM, resource_name="by-admin", configuration_keys=None)], include_synonyms=False))
            return (listed.error_code, sorted(x.name for x in listed.client_metrics_resources),
                    desc.results[0].error_code, alter.responses[0].error_code)
        finally:
            await c.close()
    return asyncio.run(go())


def _grant(b, operation, until) -> tuple:
    """Allow alice ``operation`` on the cluster; alice's answers once ``until(answers)`` holds."""
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", operation,
                "--cluster").returncode == 0
    deadline = time.monotonic() + 10
    while not until(got := _ask(b, "alice")):
        assert time.monotonic() < deadline, f"the {operation} grant never took effect"
        time.sleep(0.2)
    return got


def test_client_metrics_need_cluster_describe_and_alter_configs(authz_broker):
    b = authz_broker
    assert _ask(b, "admin") == (0, ["by-admin"], 0, 0)
    assert _ask(b, "alice") == (C_AUTH, [], C_AUTH, C_AUTH)
    assert _grant(b, "DescribeConfigs", lambda got: got[0] != C_AUTH) == (0, ["by-admin"], 0, C_AUTH)
    assert _grant(b, "AlterConfigs", lambda got: got[3] != C_AUTH) == (0, ["by-admin", "by-alice"], 0, 0)


def test_any_authenticated_client_may_push_its_metrics(secure_broker):
    from protocol.client import KafkaClientConnection, SaslSettings
    from protocol.messages import GetTelemetrySubscriptionsRequest as G, PushTelemetryRequest as P
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props={
        **test_acls.AUTHZ, "metric.reporters": "tests.integration.telemetry_receivers.PlainReporter,"
                                               "broker.telemetry_prometheus.PrometheusTelemetry"})
    pytest.importorskip("opentelemetry.proto.metrics.v1.metrics_pb2")
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)

    async def go():
        c = await KafkaClientConnection.connect(host, int(port), timeout=10,
                                                sasl=SaslSettings("PLAIN", "alice", "alice-secret"))
        try:
            got = await c.send(G())
            pushed = await c.send(P(client_instance_id=got.client_instance_id, subscription_id=got.subscription_id,
                                    terminating=True, compression_type=0, metrics=b""))
            return got.error_code, pushed.error_code
        finally:
            await c.close()
    assert asyncio.run(go()) == (0, 0)

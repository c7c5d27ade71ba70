"""ListClientMetricsResources (key 74) v0: the names of the client metrics subscriptions (KIP-714).

The names come from the controller's store (``controller.client_metrics_configs()``): every
subscription that has at least one config, set through the CLIENT_METRICS resource (16) of
AlterConfigs / IncrementalAlterConfigs (broker/handlers/configs.py), sorted by name (Kafka answers
in its subscription map's hash order, which no client relies on).  Authorization
(broker/security/enforce.py): DESCRIBE_CONFIGS on the cluster, else the whole answer is
CLUSTER_AUTHORIZATION_FAILED with no names, as Kafka does.
"""
from __future__ import annotations

from broker.dispatch import handler
from protocol.messages import ListClientMetricsResourcesResponse


@handler(74, 0, 0)
async def list_client_metrics_resources(ctx, req):
    R = ListClientMetricsResourcesResponse
    names = sorted(ctx.broker.controller.client_metrics_configs())
    return R(throttle_time_ms=0, error_code=0,
             client_metrics_resources=[R.ClientMetricsResource(name=n) for n in names])

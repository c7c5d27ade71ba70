"""ListClientMetricsResources (key 74; Kafka 4.1 renames it ListConfigResources).

v0 lists the names of the client metrics subscriptions (KIP-714).  v1 (KIP-1142) lists config
resources of the types asked for, each with its type: groups that have configs of their own
(32), client metrics subscriptions (16), the brokers as BROKER_LOGGER (8) and BROKER (4)
resources, and the topics (2), in that order, as Kafka 4.2 does.  No type asked for means all
five; a type outside them is UNSUPPORTED_VERSION with nothing listed.

The names come from the controller (client metrics subscriptions: every one that has at least
one config, set through the CLIENT_METRICS resource of AlterConfigs / IncrementalAlterConfigs,
broker/handlers/configs.py), each type's sorted by name (Kafka answers in its maps' order, which
no client relies on).  Authorization (broker/security/enforce.py): DESCRIBE_CONFIGS on the
cluster, else the whole answer is CLUSTER_AUTHORIZATION_FAILED with no names, as Kafka does.
"""
from __future__ import annotations

from broker.dispatch import handler
from protocol.errors import ErrorCode as E
from protocol.messages import ListClientMetricsResourcesResponse


GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC = 32, 16, 8, 4, 2
V1_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


@handler(74, 0, 1)
async def list_client_metrics_resources(ctx, req):
    R = ListClientMetricsResourcesResponse
    controller = ctx.broker.controller
    types = (list(req.resource_types) or list(V1_TYPES)) if ctx.api_version >= 1 else [CLIENT_METRICS]
    if any(t not in V1_TYPES for t in types):
        return R(throttle_time_ms=0, error_code=E.UNSUPPORTED_VERSION, client_metrics_resources=[])
    out = []
    for t in V1_TYPES:
        if t not in types:
            continue
        if t == GROUP:
            names = controller.groups_with_configs()
        elif t == CLIENT_METRICS:
            names = controller.client_metrics_configs()
        elif t in (BROKER_LOGGER, BROKER):
            names = [str(i) for i in sorted(b.id for b in controller.brokers())]
        else:
            names = controller.topics()
        if t not in (BROKER_LOGGER, BROKER):
            names = sorted(names)
        out += [R.ClientMetricsResource(name=n, resource_type=t) for n in names]
    return R(throttle_time_ms=0, error_code=0, client_metrics_resources=out)

"""GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), v0: KIP-714 client metrics.

The work is the broker's ``ClientMetricsManager`` (broker/client_metrics.py, which tells the
rules).  Both are answered with or without a telemetry receiver, as a Kafka KRaft broker answers
them; ApiVersions advertises them only when ``metric.reporters`` has one.  No ACL guards them
(Kafka checks none); the request quota applies as to any request.
"""
from broker.dispatch import handler
from protocol.messages import GetTelemetrySubscriptionsResponse, PushTelemetryResponse

TELEMETRY_APIS = (71, 72)


@handler(71, 0, 0)
async def get_telemetry_subscriptions(ctx, req):
    mgr = ctx.broker.client_metrics
    code, inst, _msg = mgr.get_subscriptions(ctx, req.client_instance_id)
    if code:
        return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=code)
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=0, client_instance_id=inst.instance_id,
        subscription_id=inst.subscription_id,
        accepted_compression_types=list(mgr.accepted_compression()),
        push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=ctx.broker.config.get("telemetry.max.bytes"),
        delta_temporality=True, requested_metrics=list(inst.metrics))


@handler(72, 0, 0)
async def push_telemetry(ctx, req):
    code, _msg = ctx.broker.client_metrics.push(ctx, req)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=code)

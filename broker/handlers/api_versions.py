"""ApiVersions (key 18), v0-4.

v0-2: error code, api keys, throttle (v1+).  v3+: flexible; the request carries the client's
software name/version (validated: INVALID_REQUEST).  The broker always answers in response
header v0.  v3+ also carries the feature flags (KIP-584) as tagged fields, as a Kafka 3.9 broker in
ZooKeeper mode fills them: supported features (``controller.api.SUPPORTED_FEATURES``;
``transaction.version`` 0-2, as Kafka 4.x; a feature whose minimum is 0 is left out of v3 answers,
as Kafka does since older clients fail to read it, KAFKA-17492), the finalized features' epoch
(the /feature node's zkVersion, or the embedded store's; left out while none is known) and the
finalized features at a level other than 0, each with its level as both min and max.  Debian's
kcat 1.7.1 (librdkafka 1.7) reads them.
GetTelemetrySubscriptions and PushTelemetry (71, 72) are advertised only while a telemetry
receiver is configured (broker/client_metrics.py), as Kafka does; a v3+ request's software name
and version are kept on the connection for client-metrics subscriptions' ``match``.
DescribeQuorum (55) is advertised only in KRaft mode (``process.roles``): a Kafka 3.9 broker in
ZooKeeper mode does not have it (``dispatch.KRAFT_ONLY_APIS``).  The share group APIs (76-79) are
left out in a ZooKeeper cluster (``dispatch.NOT_IN_ZOOKEEPER_APIS``).
An unsupported ApiVersions version is answered by the connection at v0 with UNSUPPORTED_VERSION.
"""
import re

from broker.dispatch import KRAFT_ONLY_APIS, NOT_IN_ZOOKEEPER_APIS, handler, supported_versions
from broker.handlers.telemetry import TELEMETRY_APIS
from controller.api import SUPPORTED_FEATURES
from protocol.messages import ApiVersionsResponse

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
INVALID_REQUEST = 42


@handler(18, 0, 4)
async def api_versions(ctx, req):
    if ctx.api_version >= 3 and not (_SOFTWARE.match(req.client_software_name or "")
                                     and _SOFTWARE.match(req.client_software_version or "")):
        return ApiVersionsResponse(error_code=INVALID_REQUEST, api_keys=[])
    if ctx.api_version >= 3:
        ctx.connection.client_software = (req.client_software_name, req.client_software_version)
    cm = getattr(ctx.broker, "client_metrics", None)
    hidden = () if cm is not None and cm.receiver_configured else TELEMETRY_APIS
    if not ctx.broker.config.kraft_mode:
        hidden = (*hidden, *KRAFT_ONLY_APIS)
    if ctx.broker.config.zookeeper_connect:
        hidden = (*hidden, *NOT_IN_ZOOKEEPER_APIS)
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions() if k not in hidden]
    resp = ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)
    if ctx.api_version >= 3:
        R = ApiVersionsResponse
        epoch, finalized = ctx.broker.controller.finalized_features()
        resp.supported_features = [R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
                                   if lo > 0 or ctx.api_version >= 4]
        resp.finalized_features_epoch = epoch
        resp.finalized_features = [R.FinalizedFeatureKey(name=n, min_version_level=v, max_version_level=v)
                                   for n, v in sorted(finalized.items()) if v != 0]
    return resp

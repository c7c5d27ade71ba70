"""ApiVersions (key 18), v0-4.

v0-2: error code, api keys, throttle (v1+).  v3+: flexible; the request carries the client's
software name/version (validated: INVALID_REQUEST).  The broker always answers in response
header v0.  Supported features / finalized features are tagged fields left at their defaults,
so nothing is written for them (Debian's kcat 1.7.1 fails on present ones).
An unsupported ApiVersions version is answered by the connection at v0 with UNSUPPORTED_VERSION.
"""
import re

from broker.dispatch import handler, supported_versions
from protocol.messages import ApiVersionsResponse

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
INVALID_REQUEST = 42


@handler(18, 0, 4)
async def api_versions(ctx, req):
    if ctx.api_version >= 3 and not (_SOFTWARE.match(req.client_software_name or "")
                                     and _SOFTWARE.match(req.client_software_version or "")):
        return ApiVersionsResponse(error_code=INVALID_REQUEST, api_keys=[])
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions()]
    return ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)

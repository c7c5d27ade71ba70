"""UpdateFeatures (key 57), v0-2: finalized feature flags (KIP-584), as a Kafka 3.9 broker in
ZooKeeper mode answers it (v0-1), and Kafka 4.x (v2).

* ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED; only the active controller answers
  (NOT_CONTROLLER elsewhere; the embedded store's broker always is).  Top-level errors carry
  no per-feature results.
* Each update is checked against the finalized features the controller holds, with Kafka's
  rules and messages (INVALID_REQUEST): no empty name, a known upgrade type, deletion (level < 1
  with a downgrade type) only of a finalized feature, no level < 1 without a downgrade type,
  not the current level, no downgrade without SAFE_DOWNGRADE (an unsafe downgrade is refused
  too, as in ZooKeeper mode), no SAFE_DOWNGRADE to a higher level, and a level within what the
  broker supports (``controller.api.SUPPORTED_FEATURES``: ``transaction.version`` 1-2).
* v0's AllowDowngrade means SAFE_DOWNGRADE; v1 carries the upgrade type (1 upgrade, 2 safe
  downgrade, 3 unsafe downgrade) and ValidateOnly.  The valid updates are written together
  (unless ValidateOnly: Kafka 3.9's ZooKeeper controller ignores the flag and writes; here it
  is honoured, as the KRaft controller does); if the write fails they become
  FEATURE_UPDATE_FAILED.  A feature named twice is answered once, for its first update.
* v2 (Kafka 4.0) answers with no per-feature results: the request is all or nothing, as Kafka
  4.x's controller treats it.  The first refused update (in request order) is the top-level
  error and message, and nothing is written; otherwise every update is written together.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.security import acl as A
from controller.api import SUPPORTED_FEATURES
from protocol.errors import ErrorCode as E
from protocol.errors import error_message
from protocol.messages import UpdateFeaturesResponse

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def check_update(name: str, level: int, kind: int, existing: int | None) -> tuple[str | None, int | None]:
    """(error message or None, new level or None for a deletion) for one update."""
    if not name:
        return "Feature name can not be empty.", None
    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "Received unknown upgrade type.", None
    if level < 1 and kind != UPGRADE:
        if existing is None:
            return "Can not delete non-existing finalized feature.", None
        return None, None
    if level < 1:
        return (f"Can not provide versionLevel: {level} less than 1 without setting the SAFE downgradeType "
                "in the request."), None
    if existing is not None:
        if level == existing:
            verb = "downgrade" if kind == SAFE_DOWNGRADE else "upgrade"
            return f"Can not {verb} a finalized feature from existing versionLevel:{existing} to the same value.", None
        if level < existing and kind != SAFE_DOWNGRADE:
            return (f"Can not downgrade finalized feature from existing versionLevel:{existing} to provided "
                    f"versionLevel:{level} without setting the downgradeType to SAFE in the request."), None
        if kind != UPGRADE and level > existing:
            return (f"When the downgradeType is set to SAFE in the request, the provided versionLevel:{level} "
                    f"can not be greater than existing versionLevel:{existing}."), None
    rng = SUPPORTED_FEATURES.get(name)
    if rng is None:
        return "Could not apply finalized feature update because the provided feature is not supported.", None
    if not rng[0] <= level <= rng[1]:
        return (f"Could not apply finalized feature update because the provided versionLevel:{level} is lower "
                f"than the supported minVersion:{rng[0]}."
                if level < rng[0] else
                f"Could not apply finalized feature update because the provided versionLevel:{level} is higher "
                f"than the supported maxVersion:{rng[1]}."), None
    return None, level


@handler(57, 0, 2)
async def update_features(ctx, req):
    R = UpdateFeaturesResponse
    ctrl = ctx.broker.controller

    def top(code):
        return R(throttle_time_ms=0, error_code=code, error_message=error_message(code), results=[])

    if not ctx.authorize(A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
        return top(E.CLUSTER_AUTHORIZATION_FAILED)
    if not ctrl.is_active_controller:
        return top(E.NOT_CONTROLLER)
    _epoch, existing = ctrl.finalized_features()
    target = dict(existing)
    results: dict[str, tuple[int, str | None]] = {}
    for u in req.feature_updates:
        if u.feature in results:
            continue
        if ctx.api_version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = u.upgrade_type
        msg, new = check_update(u.feature, u.max_version_level, kind, existing.get(u.feature))
        if msg is not None:
            results[u.feature] = (E.INVALID_REQUEST, msg)
            continue
        results[u.feature] = (0, None)
        if new is None:
            target.pop(u.feature, None)
        else:
            target[u.feature] = new
    validate_only = ctx.api_version >= 1 and req.validate_only
    if ctx.api_version >= 2:
        refused = next(((code, msg) for code, msg in results.values() if code), None)
        if refused is not None:
            return R(throttle_time_ms=0, error_code=refused[0], error_message=refused[1], results=[])
    if target != dict(existing) and not validate_only:
        res = await ctrl.update_finalized_features(target)
        if res.error_code:
            results = {n: (res.error_code, res.error_message) if code == 0 else (code, msg)
                       for n, (code, msg) in results.items()}
            if ctx.api_version >= 2:
                return R(throttle_time_ms=0, error_code=res.error_code, error_message=res.error_message, results=[])
    return R(throttle_time_ms=0, error_code=0, error_message=None,
             results=[R.UpdatableFeatureResult(feature=n, error_code=code, error_message=msg)
                      for n, (code, msg) in results.items()])

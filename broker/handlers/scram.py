"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0.

Credentials are kept as Kafka keeps them in ``/config/users/<user>``: per mechanism the salt,
StoredKey, ServerKey and iteration count (``protocol.scram.Credential.to_config``), never the
password.  An upsertion carries the salt and the salted password (the client ran PBKDF2); the
broker derives the two keys.

Describe needs DESCRIBE on the cluster, Alter needs ALTER (else CLUSTER_AUTHORIZATION_FAILED per
user).  Per-user errors follow Kafka: an empty name or 4096 > iterations > 16384 is
UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a (user, mechanism)
named twice DUPLICATE_RESOURCE, deleting or describing a missing credential RESOURCE_NOT_FOUND.
"""
from __future__ import annotations

from broker.dispatch import handler
from broker.security import acl as A
from protocol import scram as S
from protocol.errors import ErrorCode as E
from protocol.messages import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse


@handler(50, 0, 0)
async def describe_user_scram_credentials(ctx, req):
    R = DescribeUserScramCredentialsResponse
    refresh = getattr(ctx.broker.controller, "refresh_scram_credentials", None)
    if refresh is not None and ctx.authorize(A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
        await refresh([u.name for u in req.users] if req.users else None)   # from ZooKeeper, as Kafka
    store = ctx.broker.controller.scram_credentials()
    names = [u.name for u in req.users] if req.users else sorted(store)
    if not ctx.authorize(A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=[])
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    results, done = [], set()
    for n in names:
        if n in done:
            continue
        done.add(n)
        if n == "":             # before the duplicate check, as Kafka
            results.append(R.DescribeUserScramCredentialsResult(
                user=n, error_code=E.RESOURCE_NOT_FOUND, error_message="Username must not be empty",
                credential_infos=[]))
            continue
        if counts[n] > 1:
            results.append(R.DescribeUserScramCredentialsResult(
                user=n, error_code=E.DUPLICATE_RESOURCE, error_message=f"Cannot describe SCRAM credentials for the "
                f"same user twice in a single request: {n}", credential_infos=[]))
            continue
        creds = store.get(n)
        if not creds:
            results.append(R.DescribeUserScramCredentialsResult(
                user=n, error_code=E.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {n}", credential_infos=[]))
            continue
        infos = []
        for mech, text in sorted(creds.items(), key=lambda kv: S.MECHANISM_IDS.get(kv[0], 0)):
            try:
                it = S.Credential.from_config(text).iterations
            except S.ScramError:
                continue
            infos.append(R.CredentialInfo(mechanism=S.MECHANISM_IDS.get(mech, 0), iterations=it))
        results.append(R.DescribeUserScramCredentialsResult(user=n, error_code=0, error_message=None,
                                                            credential_infos=infos))
    return R(throttle_time_ms=0, error_code=0, error_message=None, results=results)


@handler(51, 0, 0)
async def alter_user_scram_credentials(ctx, req):
    R = AlterUserScramCredentialsResponse
    users = []
    for x in list(req.deletions) + list(req.upsertions):
        if x.name not in users:
            users.append(x.name)
    if not ctx.authorize(A.ALTER, A.CLUSTER, A.CLUSTER_NAME):
        return R(throttle_time_ms=0, results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
            for u in users])
    errors: dict[str, tuple[int, str]] = {}
    pairs: dict[tuple[str, int], int] = {}
    for x in list(req.deletions) + list(req.upsertions):
        pairs[(x.name, x.mechanism)] = pairs.get((x.name, x.mechanism), 0) + 1
    store = ctx.broker.controller.scram_credentials()

    def fail(user, code, msg):
        errors.setdefault(user, (code, msg))

    for (user, mech), count in pairs.items():
        if count > 1:
            fail(user, E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in req.deletions:
        mech = S.MECHANISM_NAMES.get(d.mechanism)
        if not d.name:
            fail(d.name, E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(d.name, E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif mech not in store.get(d.name, {}):
            fail(d.name, E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    upserts = []
    for u in req.upsertions:
        mech = S.MECHANISM_NAMES.get(u.mechanism)
        if not u.name:
            fail(u.name, E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(u.name, E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif u.iterations < S.MIN_ITERATIONS:
            fail(u.name, E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > S.MAX_ITERATIONS:
            fail(u.name, E.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not u.salt or not u.salted_password:
            fail(u.name, E.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        else:
            cred = S.Credential.from_salted_password(mech, bytes(u.salt), bytes(u.salted_password), u.iterations)
            upserts.append((u.name, mech, cred.to_config()))
    deletions = [(d.name, S.MECHANISM_NAMES[d.mechanism]) for d in req.deletions if d.name not in errors]
    upserts = [x for x in upserts if x[0] not in errors]
    if deletions or upserts:
        res = await ctx.broker.controller.alter_scram_credentials(upserts, deletions)
        if res.error_code:
            for u in users:
                fail(u, res.error_code, res.error_message)
    return R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=u, error_code=errors.get(u, (0, None))[0],
                                          error_message=errors.get(u, (0, None))[1]) for u in users])

"""Unit tests: SCRAM (RFC 7677 vector, client/server round trip), JAAS parsing, the authorizer's
decisions, ACL filters."""
from __future__ import annotations

import pytest

from broker.config import ConfigError
from broker.security import acl as A
from broker.security.authorizer import AclAuthorizer
from broker.security.jaas import parse_jaas, plain_users
from broker.security.sasl import PlainServer, SaslFailure, ScramServer
from protocol import scram as S
from protocol.errors import ErrorCode as E


def test_rfc7677_vector():
    c = S.ScramClient("SCRAM-SHA-256", "user", "pencil")
    c.client_nonce = "rOprNGfwEbeRWgbNEkqO"
    c._bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = c.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    c.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_and_bad_password(mech):
    cred = S.Credential.from_password(mech, "secret", 4096)
    assert S.Credential.from_config(cred.to_config()) == cred
    lookup = {"a,b=c": cred}.get
    srv = ScramServer(mech, lookup)
    cl = S.ScramClient(mech, "a,b=c", "secret")
    final = cl.final(srv.evaluate(cl.first()))
    cl.verify(srv.evaluate(final))
    assert srv.complete and srv.authorization_id == "a,b=c"
    srv = ScramServer(mech, lookup)
    cl = S.ScramClient(mech, "a,b=c", "wrong")
    with pytest.raises(SaslFailure):
        srv.evaluate(cl.final(srv.evaluate(cl.first())))
    with pytest.raises(SaslFailure):
        ScramServer(mech, lookup).evaluate(S.ScramClient(mech, "nobody", "x").first())


def test_plain():
    srv = PlainServer({"alice": "pw"})
    assert srv.evaluate(b"\0alice\0pw") == b"" and srv.authorization_id == "alice"
    for tok in (b"\0alice\0bad", b"\0bob\0pw", b"alice\0pw", b"other\0alice\0pw"):
        with pytest.raises(SaslFailure):
            PlainServer({"alice": "pw"}).evaluate(tok)


def test_jaas():
    mod, opts = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                           '  username="admin" password="a s;" user_admin="x" user_bob=y;')
    assert mod.endswith("PlainLoginModule") and plain_users(opts) == {"admin": "x", "bob": "y"}
    assert opts["password"] == "a s;"
    with pytest.raises(ConfigError):
        parse_jaas('Mod required user_a="x"')       # no ';'
    with pytest.raises(ConfigError):
        parse_jaas('Mod sometimes user_a="x";')


def B(rt, name, pt, principal, op, perm, host="*"):
    return A.AclBinding(rt, name, pt, principal, host, op, perm)


def test_authorizer_rules():
    acls = (
        B(A.TOPIC, "pay-", A.PREFIXED, "User:bob", A.WRITE, A.ALLOW),
        B(A.TOPIC, "t3", A.LITERAL, "User:alice", A.ALL, A.ALLOW),
        B(A.TOPIC, "t3", A.LITERAL, "User:alice", A.WRITE, A.DENY),
        B(A.TOPIC, "*", A.LITERAL, "User:*", A.READ, A.ALLOW, host="10.0.0.1"),
        B(A.GROUP, "g", A.LITERAL, "User:carol", A.ALTER_CONFIGS, A.ALLOW),
    )
    az = AclAuthorizer(lambda: acls, {"User:admin"})
    ok = lambda p, op, rt, n, h="127.0.0.1": az.authorize(p, h, op, rt, n)  # noqa: E731
    assert ok("User:bob", A.WRITE, A.TOPIC, "pay-1")
    assert ok("User:bob", A.DESCRIBE, A.TOPIC, "pay-1")           # implied by WRITE
    assert not ok("User:bob", A.READ, A.TOPIC, "pay-1")
    assert not ok("User:bob", A.WRITE, A.TOPIC, "other")
    assert ok("User:alice", A.READ, A.TOPIC, "t3")
    assert not ok("User:alice", A.WRITE, A.TOPIC, "t3")            # DENY wins
    assert ok("User:zed", A.READ, A.TOPIC, "x", "10.0.0.1") and not ok("User:zed", A.READ, A.TOPIC, "x")
    assert ok("User:carol", A.DESCRIBE_CONFIGS, A.GROUP, "g")       # implied by ALTER_CONFIGS
    assert ok("User:admin", A.DELETE, A.CLUSTER, "kafka-cluster")   # super user
    assert not ok("User:bob", A.DESCRIBE, A.CLUSTER, "kafka-cluster")
    assert AclAuthorizer(lambda: acls, (), True).authorize("User:x", "h", A.DESCRIBE, A.CLUSTER, "kafka-cluster")
    bits = az.authorized_operations("User:bob", "h", A.TOPIC, "pay-x")
    assert bits == (1 << A.WRITE) | (1 << A.DESCRIBE)
    assert az.authorize_any("User:bob", "h", A.WRITE, A.TOPIC)
    assert not az.authorize_any("User:nobody", "h", A.WRITE, A.TOPIC)


def test_filters_and_validation():
    lit = B(A.TOPIC, "orders", A.LITERAL, "User:a", A.READ, A.ALLOW)
    wild = B(A.TOPIC, "*", A.LITERAL, "User:a", A.READ, A.ALLOW)
    pre = B(A.TOPIC, "ord", A.PREFIXED, "User:a", A.READ, A.ALLOW)
    match = A.AclFilter(A.TOPIC, "orders", A.MATCH)
    assert [match.matches(b) for b in (lit, wild, pre)] == [True, True, True]
    assert [A.AclFilter(A.TOPIC, "orders", A.LITERAL).matches(b) for b in (lit, wild, pre)] == [True, False, False]
    assert [A.AclFilter(name="ord").matches(b) for b in (lit, wild, pre)] == [False, False, True]
    assert A.AclFilter(principal="User:b").matches(lit) is False
    assert A.validate_binding(lit) is None
    # Kafka 3.9's answers: filter values fail the whole request (the handler's is_filter_only)
    assert A.is_filter_only(lit._replace(pattern_type=A.MATCH)) and A.is_filter_only(lit._replace(operation=A.ANY))
    assert not A.is_filter_only(lit)
    assert A.validate_binding(lit._replace(principal="alice")) == (E.UNKNOWN_SERVER_ERROR, None)
    assert A.validate_binding(B(A.CLUSTER, "other", A.LITERAL, "User:a", A.ALTER, A.ALLOW)) == (
        E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")
    assert A.validate_binding(lit._replace(name="")) == (E.INVALID_REQUEST, "Invalid empty resource name")
    for bad in (lit._replace(name="a/b"), lit._replace(operation=0), lit._replace(resource_type=0)):
        assert A.validate_binding(bad) == (E.INVALID_REQUEST, "Failed to create ACL"), bad
    assert A.validate_binding(lit._replace(host="")) is None            # Kafka accepts any host

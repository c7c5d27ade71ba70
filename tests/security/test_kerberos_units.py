"""sasl.kerberos.principal.to.local.rules (Kafka's KerberosShortNamer), with the examples of
Kafka's documentation and Hadoop's auth_to_local syntax."""
import pytest

from broker.config import ConfigError
from broker.security.kerberos import KerberosName, ShortNamer, default_realm, parse_rules
from broker.security.sasl import SaslFailure

REALM = "EXAMPLE.COM"


def short(rules, name, realm=REALM):
    return ShortNamer(rules, realm).short_name(name)


def test_default_takes_the_first_component_in_the_default_realm():
    assert short(["DEFAULT"], "alice@EXAMPLE.COM") == "alice"
    assert short(["DEFAULT"], "kafka/broker1.example.com@EXAMPLE.COM") == "kafka"
    assert short(["DEFAULT"], "alice") == "alice"
    with pytest.raises(SaslFailure, match="No rules apply to alice@OTHER.ORG"):
        short(["DEFAULT"], "alice@OTHER.ORG")


def test_rules_in_order_with_substitution_and_case():
    rules = ["RULE:[1:$1@$0](.*@OTHER\\.ORG)s/@.*//",
             "RULE:[2:$1@$0](kafka@EXAMPLE\\.COM)s/.*/broker/",
             "RULE:[1:$1](BOB)s/.*/Bob/L",
             "DEFAULT"]
    assert short(rules, "alice@OTHER.ORG") == "alice"
    assert short(rules, "kafka/host1@EXAMPLE.COM") == "broker"
    assert short(rules, "BOB@EXAMPLE.COM") == "bob"
    assert short(rules, "carol@EXAMPLE.COM") == "carol"          # falls through to DEFAULT
    assert short(rules, "svc/h@EXAMPLE.COM") == "svc"


def test_a_comma_separated_string_and_the_g_and_u_flags():
    rules = "RULE:[1:$1](a.a)s/a/x/g/U, DEFAULT"
    assert short(rules, "aba@EXAMPLE.COM") == "XBX"
    assert short(rules, "abc@EXAMPLE.COM") == "abc"


def test_a_rule_without_substitution_and_a_match_that_fails():
    assert short(["RULE:[2:$1](kafka)"], "kafka/h@EXAMPLE.COM") == "kafka"
    with pytest.raises(SaslFailure):
        short(["RULE:[2:$1](kafka)"], "zookeeper/h@EXAMPLE.COM")
    with pytest.raises(SaslFailure):
        short(["RULE:[2:$1](kafka)"], "kafka@EXAMPLE.COM")       # one component, rule wants two


def test_a_result_that_is_not_a_simple_name_fails():
    with pytest.raises(SaslFailure, match="non-simple"):
        short(["RULE:[1:$1@$0]"], "alice@EXAMPLE.COM")


def test_malformed_rules_are_config_errors():
    for bad in ("RULE:1:$1", "NOPE", "RULE:[1:$1](x)s/a"):
        with pytest.raises(ConfigError):
            parse_rules([bad])


def test_kerberos_names():
    n = KerberosName("kafka/host.example.com@EXAMPLE.COM")
    assert (n.service, n.host, n.realm) == ("kafka", "host.example.com", "EXAMPLE.COM")
    assert str(n) == "kafka/host.example.com@EXAMPLE.COM"
    with pytest.raises(ValueError):
        KerberosName("a/b/c@R")


def test_default_realm_from_krb5_conf(tmp_path, monkeypatch):
    conf = tmp_path / "krb5.conf"
    conf.write_text("[realms]\n default_realm = NOT.THIS\n[libdefaults]\n  default_realm = ODRADEK.TEST\n")
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    assert default_realm() == "ODRADEK.TEST"
    monkeypatch.setenv("KRB5_CONFIG", str(tmp_path / "missing"))
    assert default_realm() is None

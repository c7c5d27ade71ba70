"""Dynamic password configs in ZooKeeper mode (broker/password_encoder.py): AlterConfigs stores
them encoded with ``password.encoder.secret`` in Kafka's format (checked by decoding the znode
here; tests/integration/test_java_password_encoder.py checks the format against Java's JCE), a restart reads them
back, a changed secret with ``password.encoder.old.secret`` re-encodes them at start-up, a value
an older Odradek left unencoded is encoded at the first start with a secret, and without a
secret, or at the cluster-default level, they are refused with Kafka's messages."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from broker.password_encoder import PasswordEncoder, PasswordEncoderError, looks_encoded

pytestmark = pytest.mark.cluster
pytest.importorskip("cryptography")
BIN = Path(__file__).resolve().parents[2] / "bin"
KEY = "listener.name.plaintext.ssl.key.password"


def configs(c, *args):
    return subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", c.bootstrap_of([1]),
                           "--entity-type", "brokers", *map(str, args)], capture_output=True, text=True, timeout=60)


def put(c, config: dict) -> None:
    import json
    zk = c.zk()
    zk.ensure_path("/config/brokers/1")
    zk.set("/config/brokers/1", json.dumps({"version": 1, "config": config}).encode())


def stored(c) -> dict:
    from kazoo.exceptions import NoNodeError
    try:
        return (c.get_json("/config/brokers/1") or {}).get("config", {})
    except NoNodeError:
        return {}


def test_stored_encoded_read_back_and_re_encoded(cluster_factory):
    c = cluster_factory(1, props={"password.encoder.secret": "first-secret"})
    r = configs(c, "--entity-name", 1, "--alter", "--add-config", f"{KEY}=kp-1")
    assert r.returncode == 0, r.stdout + r.stderr
    value = stored(c)[KEY]
    assert looks_encoded(value) and "kp-1" not in value
    assert "cipherAlgorithm:AES/CBC/PKCS5Padding" in value and "keyFactoryAlgorithm:PBKDF2WithHmacSHA512" in value
    assert PasswordEncoder("first-secret").decode(value) == "kp-1"
    with pytest.raises(PasswordEncoderError):
        PasswordEncoder("other").decode(value)
    r = configs(c, "--entity-name", 1, "--describe")
    assert f"{KEY}=null sensitive=true" in r.stdout, r.stdout
    # a restart reads it back (no decoding error), and a new secret with the old one re-encodes it
    b = c.brokers[1]
    c.stop(1)
    b.props.update({"password.encoder.secret": "second-secret", "password.encoder.old.secret": "first-secret"})
    c.start_broker(1)
    value2 = stored(c)[KEY]
    assert PasswordEncoder("second-secret").decode(value2) == "kp-1"
    log = b.log_text()
    assert "could not be decoded" not in log
    assert f"re-encoded dynamic password configs ['{KEY}']" in log
    # an unencoded value (an older Odradek's) is encoded at the next start with a secret
    c.stop(1)
    put(c, {KEY: "legacy-kp"})
    c.start_broker(1)
    assert PasswordEncoder("second-secret").decode(stored(c)[KEY]) == "legacy-kp"


def test_refused_without_a_secret_or_at_the_default_level(cluster_factory):
    c = cluster_factory(1)
    r = configs(c, "--entity-name", 1, "--alter", "--add-config", f"{KEY}=kp")
    assert r.returncode != 0 and "Password encoder secret not configured" in r.stdout + r.stderr, r.stdout + r.stderr
    assert KEY not in stored(c)
    r = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", c.bootstrap_of([1]), "--entity-type",
                        "brokers", "--entity-default", "--alter", "--add-config", f"{KEY}=kp"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "broker id must be specified" in r.stdout + r.stderr, r.stdout + r.stderr
    # a value that cannot be decoded is dropped with an error when read
    c.stop(1)
    put(c, {KEY: PasswordEncoder("somebody-else").encode("kp")})
    c.start_broker(1)
    assert f"Dynamic password config {KEY} could not be decoded, ignoring" in c.brokers[1].log_text()


def test_zookeeper_tool_encodes_with_the_given_secret(cluster_factory):
    """kafka-configs.sh --zookeeper: a password config needs password.encoder.secret in the same
    --add-config (Kafka's requirement message otherwise); it is stored encoded, the encoder
    settings are not stored, and the broker started with that secret reads it."""
    c = cluster_factory(1, props={"password.encoder.secret": "zk-secret"}, start=False)

    def zk_configs(*args):
        return subprocess.run([str(BIN / "kafka-configs.sh"), "--zookeeper", c.connect, "--entity-type", "brokers",
                               "--entity-name", "1", *args], capture_output=True, text=True, timeout=60)
    r = zk_configs("--alter", "--add-config", f"{KEY}=zk-kp")
    assert r.returncode == 1 and "password.encoder.secret must be specified to update" in r.stderr, r.stderr
    r = zk_configs("--alter", "--add-config", f"{KEY}=zk-kp,password.encoder.secret=zk-secret,"
                                              "password.encoder.iterations=8192")
    assert r.returncode == 0, r.stdout + r.stderr
    value = stored(c)[KEY]
    assert set(stored(c)) == {KEY} and "iterations:8192" in value
    assert PasswordEncoder("zk-secret").decode(value) == "zk-kp"
    c.start()
    r = configs(c, "--entity-name", 1, "--describe")
    assert f"{KEY}=null sensitive=true" in r.stdout, r.stdout
    assert "could not be decoded" not in c.brokers[1].log_text()


def test_another_brokers_passwords_are_left_alone(cluster_factory):
    """Brokers with different secrets: broker 1 sees broker 2's change notification but neither
    decodes nor complains about broker 2's values; broker 2 reads its own."""
    c = cluster_factory(2, start=False)
    c.brokers[1].props["password.encoder.secret"] = "secret-one"
    c.brokers[2].props["password.encoder.secret"] = "secret-two"
    c.start()
    r = subprocess.run([str(BIN / "kafka-configs.sh"), "--bootstrap-server", c.bootstrap_of([2]), "--entity-type",
                        "brokers", "--entity-name", "2", "--alter", "--add-config", f"{KEY}=kp-2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert PasswordEncoder("secret-two").decode(c.get_json("/config/brokers/2")["config"][KEY]) == "kp-2"
    time.sleep(1.0)                         # broker 1 has had the change notification by now
    assert "could not be decoded" not in c.brokers[1].log_text()
    assert "could not be decoded" not in c.brokers[2].log_text()

"""A throwaway MIT Kerberos KDC for the GSSAPI tests (Debian's krb5-kdc, krb5-admin-server and
krb5-user): its own realm, database, krb5.conf and port in a temporary directory.

    kdc = Kdc(tmp_path).start()
    keytab = kdc.add_service("kafka/localhost")      # a principal with a random key, in a keytab
    kdc.add_user("alice", "alice-secret")
    env = kdc.env(ccache=tmp_path / "cc")            # KRB5_CONFIG (and KRB5CCNAME) for a process
    kdc.kinit("alice", "alice-secret", env)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from .net import free_port, port_open

REALM = "ODRADEK.TEST"


def kdc_available() -> tuple[bool, str]:
    missing = [c for c in ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
               if shutil.which(c) is None and not os.path.exists(f"/usr/sbin/{c}")]
    if missing:
        return False, "MIT Kerberos not installed (" + ", ".join(missing) + ")"
    try:
        import gssapi  # noqa: F401
    except ImportError:
        return False, "the gssapi package is not installed"
    return True, ""


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class Kdc:
    def __init__(self, workdir, realm: str = REALM):
        self.dir = Path(workdir) / "kdc"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.realm = realm
        self.port = free_port("127.0.0.1")
        self.conf = self.dir / "krb5.conf"
        self.kdc_conf = self.dir / "kdc.conf"
        self.proc: subprocess.Popen | None = None

    def env(self, ccache=None, **extra) -> dict[str, str]:
        e = {"KRB5_CONFIG": str(self.conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}
        if ccache is not None:
            e["KRB5CCNAME"] = f"FILE:{ccache}"
        e.update(extra)
        return e

    def _run(self, *argv, env=None):
        r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **self.env(), **(env or {})},
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv))}: {r.stderr.strip() or r.stdout.strip()}")
        return r.stdout

    def start(self) -> "Kdc":
        self.conf.write_text(f"""[libdefaults]
    default_realm = {self.realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = false

[realms]
    {self.realm} = {{
        kdc = 127.0.0.1:{self.port}
    }}

[domain_realm]
    localhost = {self.realm}
""")
        self.kdc_conf.write_text(f"""[kdcdefaults]
    kdc_ports = {self.port}
    kdc_tcp_ports = {self.port}

[realms]
    {self.realm} = {{
        database_name = {self.dir}/principal
        key_stash_file = {self.dir}/stash
        acl_file = {self.dir}/kadm5.acl
        max_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.dir}/kdc.log
""")
        (self.dir / "kadm5.acl").write_text("")
        self._run(_tool("kdb5_util"), "create", "-s", "-r", self.realm, "-P", "odradek-master-key")
        log = open(self.dir / "krb5kdc.out", "ab")
        self.proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm], stdout=log, stderr=log,
                                     env={**os.environ, **self.env()}, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 15
        while not port_open("127.0.0.1", self.port, timeout=0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the KDC did not start: " + (self.dir / "krb5kdc.out").read_text(errors="replace"))
            time.sleep(0.05)
        return self

    def add_service(self, name: str) -> Path:
        """A principal with a random key; returns a keytab holding it."""
        keytab = self.dir / (name.replace("/", "_") + ".keytab")
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"addprinc -randkey {name}@{self.realm}")
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"ktadd -k {keytab} {name}@{self.realm}")
        return keytab

    def add_user(self, name: str, password: str) -> None:
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"addprinc -pw {password} {name}@{self.realm}")

    def kinit(self, name: str, password: str, env: dict[str, str]) -> None:
        r = subprocess.run([_tool("kinit"), f"{name}@{self.realm}"], input=password + "\n", capture_output=True,
                           text=True, env={**os.environ, **env}, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"kinit {name}: {r.stderr.strip()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def kerberos_env(env: dict[str, str]):
    """Set ``env`` (KRB5_CONFIG, KRB5CCNAME) in this process for the block: MIT Kerberos reads
    them at each use, so a client made inside logs in with that ticket cache."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

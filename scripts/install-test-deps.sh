#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (run as root, or
# with sudo available). Idempotent: safe to run again; skips work already done.
#
#   apt:  zookeeper (Debian's 3.8, run by tests/support/zookeeper.py with java), kcat,
#         a headless JRE when no java is on PATH, nodejs and npm when no node is on PATH
#   npm:  KafkaJS for tests/integration/test_kafkajs.py (npm ci in tests/kafkajs, pinned by
#         its package-lock.json)
#   apt:  krb5-kdc, krb5-admin-server, krb5-user, libkrb5-dev and libsasl2-modules-gssapi-mit
#         for the GSSAPI tests (a KDC of their own, the gssapi package's build, kcat's plugin)
#   pip:  this project in editable mode with its [test], [kerberos], [telemetry] and [spark] extras
#   venv: Quix Streams in tests/quix/.venv for tests/integration/test_quixstreams.py (pinned by
#         tests/quix/requirements.txt; it needs an older confluent-kafka than the suite uses)
#
# Environment: PYTHON (default python3), SKIP_APT=1 to skip the apt part,
#              SKIP_PIP=1 to skip the pip part; SKIP_SPARK=1 to leave PySpark out.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"

log() { echo "[install-test-deps] $*" >&2; }

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
        log "not root and no sudo: apt packages cannot be installed"; SKIP_APT=1; fi
fi

have_apt_pkgs() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
    done
}

if [[ "${SKIP_APT:-0}" != 1 ]] && command -v apt-get >/dev/null; then
    pkgs=(zookeeper kcat iproute2)     # iproute2: ss and ip (socket-option and netns tests)
    # Kerberos for the GSSAPI tests: a KDC and its tools (tests/support/kdc.py), the headers the
    # gssapi package builds against, and Cyrus SASL's GSSAPI plugin for kcat
    pkgs+=(krb5-kdc krb5-admin-server krb5-user libkrb5-dev libsasl2-modules-gssapi-mit)
    command -v java >/dev/null || pkgs+=(default-jre-headless)
    command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm)
    # slf4j-simple gives ZooKeeper a log in test failure reports (optional).
    apt-cache show libslf4j-java >/dev/null 2>&1 && pkgs+=(libslf4j-java)
    if have_apt_pkgs "${pkgs[@]}" && command -v java >/dev/null && command -v node >/dev/null; then
        log "apt packages already installed: ${pkgs[*]}"
    else
        log "apt-get install ${pkgs[*]}"
        export DEBIAN_FRONTEND=noninteractive
        "${sudo_cmd[@]}" apt-get update -q
        "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}"
    fi
    # Debian's zookeeper package may start a system service on port 2181; the tests
    # never use it (they start their own on a free port), so leave it alone.
fi

missing=()
command -v java >/dev/null || missing+=(java)
[[ -f /usr/share/java/zookeeper.jar ]] || missing+=(/usr/share/java/zookeeper.jar)
command -v kcat >/dev/null || command -v kafkacat >/dev/null || missing+=(kcat)
command -v node >/dev/null || missing+=(node)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
    log "still missing after install: ${missing[*]}"
    exit 1
fi

if [[ "${SKIP_PIP:-0}" != 1 ]]; then
    # The Spark connector's tests need PySpark (a ~450 MB wheel, about a minute to install);
    # SKIP_SPARK=1 leaves it out and those tests then skip with the reason.
    extras="test,kerberos,telemetry,spark"
    [[ "${SKIP_SPARK:-0}" == 1 ]] && extras="test,kerberos,telemetry"
    log "$python -m pip install -e '.[$extras]'"
    pip_args=(--disable-pip-version-check -q)
    # Debian's system Python refuses pip installs (PEP 668) outside a venv.
    if "$python" -c 'import sys; sys.exit(0 if sys.prefix == sys.base_prefix else 1)' &&
        compgen -G "$("$python" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" >/dev/null; then
        pip_args+=(--break-system-packages)
    fi
    (cd "$repo" && "$python" -m pip install "${pip_args[@]}" -e ".[$extras]")
fi

if [[ -f "$repo/tests/kafkajs/node_modules/kafkajs/package.json" ]] &&
    grep -q "\"version\": \"$(sed -n 's/.*"kafkajs": "\(.*\)".*/\1/p' "$repo/tests/kafkajs/package.json")\"" \
        "$repo/tests/kafkajs/node_modules/kafkajs/package.json"; then
    log "kafkajs already installed in tests/kafkajs"
else
    log "npm ci in tests/kafkajs"
    (cd "$repo/tests/kafkajs" && npm ci --no-audit --no-fund --loglevel=error)
fi

if [[ "${SKIP_PIP:-0}" != 1 ]]; then
    quix_venv="$repo/tests/quix/.venv"
    want="$(sed -n 's/^quixstreams==//p' "$repo/tests/quix/requirements.txt")"
    if [[ -x "$quix_venv/bin/python" ]] &&
        [[ "$("$quix_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("quixstreams"))' 2>/dev/null)" == "$want" ]]; then
        log "quixstreams $want already installed in tests/quix/.venv"
    else
        log "quixstreams $want into tests/quix/.venv"
        "$python" -m venv "$quix_venv"
        "$quix_venv/bin/python" -m pip install --disable-pip-version-check -q -r "$repo/tests/quix/requirements.txt"
    fi
fi

log "java: $(java -version 2>&1 | head -n1)"
log "node: $(node --version), kafkajs $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$repo/tests/kafkajs/node_modules/kafkajs/package.json")"
log "kcat: $( (command -v kcat || command -v kafkacat) )"
log "done"

#!/usr/bin/env bash
# Build the images that docker/docker-compose.yml runs, with podman (daemonless), so the image
# and the compose cluster can be tried on a machine with no Docker engine:
#
#   odradek:latest   docker/Dockerfile, unchanged
#   python:3.11-slim the Dockerfile's base; used as is if it is present or can be pulled,
#                    otherwise a stand-in: Debian bookworm (debootstrap) with its Python 3.11,
#                    pip, `python`/`pip` on PATH and this machine's CA certificates
#   zookeeper:3.8    likewise; the stand-in runs Debian's ZooKeeper 3.8 standalone, honours
#                    ZOO_MY_ID and has zkServer.sh on PATH for the healthcheck
#   prom/prometheus:v2.53.0  likewise; the stand-in runs Debian's Prometheus on the mounted config
#
# Run as root (apt-get, debootstrap).  Installs podman, podman-compose, runc and debootstrap.
# Environment: ODRADEK_CONTAINERS_CONF (default: docker/standin/containers.conf) is exported as
# CONTAINERS_CONF for every podman call made here and by tests/docker/test_compose_cluster.py.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="${ODRADEK_CONTAINERS_CONF:-$repo/docker/standin/containers.conf}"
work="${ODRADEK_STANDIN_DIR:-/tmp/odradek-standin}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { echo "[container-images] $*" >&2; }

need=()
for p in podman podman-compose runc debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
    log "apt-get install ${need[*]}"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

have_image() { podman image exists "$1"; }

standin_base() {
    log "building the stand-in base (Debian bookworm + Python 3.11) in $work/rootfs"
    rm -rf "$work/rootfs"
    mkdir -p "$work"
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    local r="$work/rootfs"
    rm -f "$r"/usr/lib/python3.*/EXTERNALLY-MANAGED          # pip installs system-wide, as in python:*-slim
    ln -sf /usr/bin/python3 "$r/usr/local/bin/python"
    ln -sf /usr/bin/pip3 "$r/usr/local/bin/pip"
    # this machine's extra CAs (a TLS-inspecting egress proxy), so pip reaches PyPI from the build
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$r/usr/local/share/ca-certificates/"
        chroot "$r" update-ca-certificates >/dev/null
    fi
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$r/etc/pip.conf"
    rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
    tar -C "$r" -c . | podman import -q - localhost/odradek-standin-base:bookworm >/dev/null
    rm -rf "$r"
}

if ! have_image docker.io/library/python:3.11-slim && ! podman pull -q docker.io/library/python:3.11-slim >/dev/null 2>&1; then
    have_image localhost/odradek-standin-base:bookworm || standin_base
    podman tag localhost/odradek-standin-base:bookworm docker.io/library/python:3.11-slim
    log "python:3.11-slim is the stand-in base"
fi

if ! have_image docker.io/library/zookeeper:3.8 && ! podman pull -q docker.io/library/zookeeper:3.8 >/dev/null 2>&1; then
    have_image localhost/odradek-standin-base:bookworm || standin_base
    log "building the stand-in zookeeper:3.8 (Debian's zookeeper package)"
    podman build -q --format docker --pull=never -t docker.io/library/zookeeper:3.8 \
        -f "$repo/docker/standin/zookeeper.Containerfile" "$repo/docker/standin" >/dev/null
fi

prom=docker.io/prom/prometheus:v2.53.0
if ! have_image "$prom" && ! podman pull -q "$prom" >/dev/null 2>&1; then
    have_image localhost/odradek-standin-base:bookworm || standin_base
    log "building the stand-in $prom (Debian's prometheus package)"
    podman build -q --format docker --pull=never -t "$prom" \
        -f "$repo/docker/standin/prometheus.Containerfile" "$repo/docker/standin" >/dev/null
fi

log "building odradek:latest from docker/Dockerfile"
podman build -q --format docker --pull=never -f "$repo/docker/Dockerfile" -t localhost/odradek:latest "$repo" >/dev/null
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'odradek|python|zookeeper|prometheus' >&2

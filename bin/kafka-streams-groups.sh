#!/usr/bin/env bash
# Odradek launcher for kafka-streams-groups.sh (see docs/tools.md).
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
if [[ -d "$base_dir/tools" ]]; then
    export PYTHONPATH="$base_dir${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "${ODRADEK_PYTHON:-python3}" -m tools.streams_groups "$@"

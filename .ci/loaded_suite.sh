#!/usr/bin/env bash
# The suite on fresh clones beside two CPU-burning processes: a test bound by the machine's speed
# fails here first. Each run clones COMMIT afresh (with ../shared beside it, as CI has), makes its
# venv and docs tooling quietly, then runs `make test` with two busy loops beside it; one line a run
# goes to WORK/summary. A run's clone (2.5 GB with its venv) is removed once it ends, its logs kept
# (KEEP=1 keeps it): five runs' clones filled this VM's disk. Exits 1 if any run failed.
#
#   .ci/loaded_suite.sh [COMMIT] [RUNS] [WORK]     (defaults: HEAD, 5, /tmp/gnnmon-loaded)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$repo" rev-parse --short "${1:-HEAD}")
runs=${2:-5}
work=${3:-/tmp/gnnmon-loaded}
mkdir -p "$work"
failed=0
burners=()
stop_burners() {
    [ ${#burners[@]} -gt 0 ] && kill "${burners[@]}" 2>/dev/null && wait "${burners[@]}" 2>/dev/null
    burners=()
}
trap stop_burners EXIT
for i in $(seq 1 "$runs"); do
    d="$work/run$i"
    rm -rf "$d" && mkdir -p "$d"
    [ -d "$repo/../shared" ] && cp -r "$repo/../shared" "$d/shared"
    git clone -q "$repo" "$d/main" && git -C "$d/main" checkout -q "$commit"
    t0=$(date +%s)
    if ! make -C "$d/main" venv docs >"$d/setup.log" 2>&1; then
        echo "run $i $commit: set-up failed (see $d/setup.log)" | tee -a "$work/summary"
        failed=1
        [ "${KEEP:-0}" = 1 ] || rm -rf "$d/main" "$d/shared"
        continue
    fi
    t1=$(date +%s)
    for _ in 1 2; do
        (while :; do :; done) &
        burners+=($!)
    done
    make -C "$d/main" test >"$d/test.log" 2>&1
    rc=$?
    stop_burners
    t2=$(date +%s)
    [ "$rc" -ne 0 ] && failed=1
    [ "${KEEP:-0}" = 1 ] || rm -rf "$d/main" "$d/shared"
    echo "run $i $commit: rc $rc, set-up $((t1 - t0)) s, suite $((t2 - t1)) s: $(grep -E '[0-9]+ (passed|failed)' "$d/test.log" | tail -1)" \
        | tee -a "$work/summary"
done
exit "$failed"

#!/usr/bin/env bash
# One call on a lent GPU machine (../shared/GPU.md), about 14 minutes with its start: the wheels it
# lacks, `make gpu-check` (8 minutes), then the GPU figures of the step's cost (issue 49): the
# benchmark at full size (40 steps x 7 rounds), 300 steps of a NeighborLoader with 4 forked
# workers, and TraceML against gnnmon on the same step. Each part under its own limit, writing
# into $OUT as it goes. Here first: bash ../shared/gpu/fetch-wheels.sh traceml-ai rich msgspec \
#   pyyaml markdown-it-py mdurl pygments   (then carry .whl).
set -u
OUT=${OUT:-runs/gpu-session}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null \
  && export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 || exit 1
export PATH=/tmp/site/bin:$PATH  # traceml's launcher
nvidia-smi -L | tee "$OUT/nvidia-smi.txt"
python3 -c "import cuda.bindings.driver as d; print('cuda.bindings', d.__name__)" 2>&1 | tee "$OUT/bindings.txt"
timeout 480 make gpu-check GPU_CHECK_ARGS="--out $OUT" > "$OUT/gpu-check.log" 2>&1; echo "gpu-check rc=$?" | tee -a "$OUT/summary.txt"
timeout 200 python3 benchmarks/run.py --device cuda --out "$OUT/bench-cuda.md" > "$OUT/bench-cuda.log" 2>&1; echo "bench rc=$?" | tee -a "$OUT/summary.txt"
timeout 60 python3 benchmarks/loader_workers.py --device cuda --out "$OUT/workers" > "$OUT/workers.log" 2>&1; echo "workers rc=$?" | tee -a "$OUT/summary.txt"
timeout 90 python3 benchmarks/traceml_peer.py --device cuda --out "$OUT/traceml.md" > "$OUT/traceml.log" 2>&1; echo "traceml rc=$?" | tee -a "$OUT/summary.txt"
tail -n 3 "$OUT"/*.log

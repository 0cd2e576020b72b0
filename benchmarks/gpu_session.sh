#!/usr/bin/env bash
# One call on a lent GPU machine (../shared/GPU.md): at most 590 s, so that it fits the 600 s a
# call may run and, with the machine's start, the 15 minutes a session has. The wheels it lacks;
# 300 steps of a NeighborLoader with 4 forked workers under the full stack (the fork that killed a
# worker on an H200); TraceML against gnnmon on the same step; issue 53's full-batch forecast
# (play/memory_forecast.py --study dense) and the batch-size search against an exhaustive
# bisection and Lightning's (play/batch_size_search.py --device cuda); then `make gpu-check` (cuda
# tests, the step's cost, the suite, the studies) with what is left, about 5 minutes. Each part under its
# own limit, writing into $OUT as it goes. Here first: bash ../shared/gpu/fetch-wheels.sh \
#   traceml-ai rich msgspec pyyaml markdown-it-py mdurl pygments   (then carry .whl).
set -u
OUT=${OUT:-runs/gpu-session}
mkdir -p "$OUT"
t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null \
  && export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 || exit 1
export PATH=/tmp/site/bin:$PATH  # traceml's launcher
nvidia-smi -L | tee "$OUT/nvidia-smi.txt"
python3 -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'pyg', g.__version__)" | tee -a "$OUT/nvidia-smi.txt"
timeout 50 python3 benchmarks/loader_workers.py --device cuda --out "$OUT/workers" > "$OUT/workers.log" 2>&1
echo "workers rc=$? at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
timeout 60 python3 benchmarks/traceml_peer.py --device cuda --out "$OUT/traceml.md" > "$OUT/traceml.log" 2>&1
echo "traceml rc=$? at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
timeout 60 python3 play/memory_forecast.py --device cuda --study dense --out "$OUT/dense" > "$OUT/dense.log" 2>&1
echo "dense forecast rc=$? at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
timeout 90 python3 play/batch_size_search.py --device cuda --fork --out "$OUT/search" \
  --methods exhaustive,gnnmon-0.9,gnnmon-1.0,lightning-binsearch > "$OUT/search.log" 2>&1
echo "batch size search rc=$? at $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
budget=$((575 - (SECONDS - t0)))
timeout $((budget + 10)) make gpu-check GPU_CHECK_ARGS="--out $OUT --budget $budget" > "$OUT/gpu-check.log" 2>&1
echo "gpu-check rc=$? at $((SECONDS - t0)) s (budget $budget s)" | tee -a "$OUT/summary.txt"
tail -n 4 "$OUT"/*.log

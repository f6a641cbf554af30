#!/bin/bash
# The GPU's speed, in one command on a lent GPU machine (about 7 minutes on an H100): build dyn,
# then, each step writing under $OUT:
#   launch   bench/gpu_launch.py: microseconds per node of a small-op graph, dyn on CPU and GPU
#            against PyTorch eager on CPU and the same GPU
#   profile  where the host time of a GPU graph goes (cProfile of bench/gpu_steady.py's graphs)
#   tasks    bench/run.py --device GPU:0: the paper's tasks, dyn on the GPU against PyTorch eager on
#            the same GPU, with dyn's CPU path beside them (markdown in $OUT/benchmarks_gpu.md)
# STEPS picks some of them; TASK_TIME sets the training seconds per run (default 8).
#
#   OUT=/tmp/speed bash bench/gpu_speed.sh [DATA]
set -u
OUT=${OUT:-/tmp/gpu_speed}
DATA=${1:-}
STEPS=${STEPS:-launch profile tasks}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
PY=${PYTHON:-python3}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'cupy', cupy.__version__)"
t0=$(date +%s)
$PY setup.py build_ext --inplace -j 16 > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
export DYN_GPU_STANDIN=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$PWD
if has launch; then
    echo "== per-node cost of small operations ($(date +%T))"
    timeout 120 $PY bench/gpu_launch.py 2>&1 | tee "$OUT/launch.txt"
fi
if has profile; then
    echo "== where a GPU graph's host time goes ($(date +%T))"
    timeout 90 $PY -m cProfile -s tottime bench/gpu_steady.py > "$OUT/profile.txt" 2>&1
    grep -A 30 "Ordered by" "$OUT/profile.txt" | head -32
fi
if has tasks; then
    echo "== the paper's tasks on the GPU ($(date +%T))"
    cp docs/benchmarks.md "$OUT/benchmarks_gpu.md"
    timeout ${TASKS_TIMEOUT:-420} $PY bench/run.py $DATA --device GPU:0 --time ${TASK_TIME:-8} \
        --out "$OUT/benchmarks_gpu.md"
    echo "tasks rc=$?"
fi
echo "== done ($(date +%T))"

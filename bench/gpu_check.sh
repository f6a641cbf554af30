#!/bin/bash
# The GPU device's check on a lent GPU machine, in one command (about 8 minutes): build dyn, run
# tests/test_gpu.py, the steady-state memory check, the CPU-vs-GPU training check of the paper's
# tasks and of sparse updates (bench/gpu_sparse_diag.py), then every test of the device axis on
# GPU:0 (last: the longest; on an H100 with 14 workers about 98% of it ran in 125 s). Everything
# is written under $OUT.
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh [DATA]      (DATA: the data folder; default ../shared/data)
set -u
OUT=${OUT:-/tmp/gpu_check}
DATA=${1:-}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
PY=${PYTHON:-python3}
echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import sys, numpy, cupy, Cython; print(sys.version.split()[0], 'numpy', numpy.__version__, 'cupy', cupy.__version__, 'cython', Cython.__version__)"
t0=$(date +%s)
echo "== build"
$PY setup.py build_ext --inplace -j 16 > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
if [ -n "${PIP_INSTALL:-}" ]; then $PY -m pip install -q --no-build-isolation --no-deps -e . >> "$OUT/build.txt" 2>&1; fi
echo "build: $(( $(date +%s) - t0 )) s"
export DYN_GPU_STANDIN=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$PWD
echo "== GPU tests"
timeout 120 $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_device.py -rfs > "$OUT/tests_gpu.txt" 2>&1
echo "test_gpu rc=$?"; tail -15 "$OUT/tests_gpu.txt"
echo "== steady state: device memory and copies per graph"
timeout 60 $PY bench/gpu_steady.py 2>&1 | tee "$OUT/steady.txt"
echo "== training, CPU vs GPU on the same examples"
timeout ${TRAIN_TIMEOUT:-150} $PY bench/gpu_train_check.py $DATA --items ${ITEMS:-60} --timeout 60 --out "$OUT/train.md"
echo "train check rc=$?"
echo "== sparse updates, CPU vs GPU sentence by sentence and at the end (no clipping, then clipping)"
timeout 150 $PY bench/gpu_sparse_diag.py $DATA --sentences 30 2>&1 | tee "$OUT/sparse_diag.txt"
timeout 100 $PY bench/gpu_sparse_diag.py $DATA --sentences 30 --check end --clip 5 2>&1 | tee -a "$OUT/sparse_diag.txt"
echo "== the device axis: every op, builder, trainer and autobatching test on GPU:0"
t0=$(date +%s)
timeout ${TEST_TIMEOUT:-300} $PY -m pytest -q -p no:cacheprovider -p no:benchmark -n 14 tests/ops tests/builders tests/trainers tests/autobatch \
    -k "GPU" -rf --junitxml="$OUT/junit_axis.xml" > "$OUT/tests_axis.txt" 2>&1
echo "device-axis tests rc=$? ($(( $(date +%s) - t0 )) s):"; tail -3 "$OUT/tests_axis.txt"
grep -E "^FAILED|^ERROR" "$OUT/tests_axis.txt" | head -60

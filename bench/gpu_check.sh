#!/bin/bash
# The GPU device's check on a lent GPU machine, in one command (about 8 minutes on an H100): build
# dyn, then, each step writing under $OUT:
#   diag   bench/gpu_sparse_diag.py: sparse updates of the tagger, CPU vs GPU, phase by phase
#   train  bench/gpu_train_check.py: the paper's tasks trained on the same examples on CPU and GPU
#   tests  tests/test_gpu.py and tests/test_device.py
#   steady bench/gpu_steady.py: device allocations, copies and the memory pool across graphs
#   programs  bench/dynet_programs.py: DyNet's own examples and unit tests, CPU vs GPU
#             (DYNET_SRC: a DyNet checkout; the step is skipped without one)
#   oom    bench/gpu_oom.py: a graph larger than the card, then the next graph
#   mpi    two MPI ranks training with their parameters on GPU:0 (tests/parallel/test_mpi.py)
#   axis   every test of tests/ops, builders, trainers and autobatch on GPU:0 (pytest-xdist)
# STEPS picks some of them (default: all, in that order); AXIS narrows the device-axis run.
#
#   OUT=/tmp/gpu bash bench/gpu_check.sh [DATA]      (DATA: the data folder; default ../shared/data)
#   STEPS="diag train" AXIS="tests/trainers" bash bench/gpu_check.sh DATA
set -u
OUT=${OUT:-/tmp/gpu_check}
DATA=${1:-}
STEPS=${STEPS:-diag train tests steady programs oom mpi axis}
AXIS=${AXIS:-tests/ops tests/builders tests/trainers tests/autobatch}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
PY=${PYTHON:-python3}
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
$PY -c "import sys, numpy, cupy, Cython; print(sys.version.split()[0], 'numpy', numpy.__version__, 'cupy', cupy.__version__, 'cython', Cython.__version__)"
$PY -c "import mpi4py; print('mpi4py', mpi4py.__version__)" 2>&1 | tail -1
$PY -c "from cupy.cuda import nccl; print('nccl', nccl.get_version())" 2>&1 | tail -1
command -v mpirun mpiexec || echo "no mpirun"
t0=$(date +%s)
echo "== build"
$PY setup.py build_ext --inplace -j 16 > "$OUT/build.txt" 2>&1 || { tail -40 "$OUT/build.txt"; exit 1; }
if [ -n "${PIP_INSTALL:-}" ]; then $PY -m pip install -q --no-build-isolation --no-deps -e . >> "$OUT/build.txt" 2>&1; fi
echo "build: $(( $(date +%s) - t0 )) s"
export DYN_GPU_STANDIN=0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$PWD
step() { echo "== $1 ($(date +%T))"; }
if has diag; then
    step "sparse updates, CPU vs GPU phase by phase (watch), and with the GPU running ahead (end)"
    timeout ${DIAG_TIMEOUT:-150} $PY bench/gpu_sparse_diag.py $DATA --sentences 30 --dump "$OUT/sparse_diag.npz" \
        2>&1 | tee "$OUT/sparse_diag.txt"
fi
if has train; then
    step "training, CPU vs GPU on the same examples"
    timeout ${TRAIN_TIMEOUT:-150} $PY bench/gpu_train_check.py $DATA --items ${ITEMS:-60} --timeout 60 \
        --only "${ONLY:-}" --out "$OUT/train.md"
    echo "train check rc=$?"
fi
if has tests; then
    step "GPU tests"
    timeout ${TESTS_TIMEOUT:-150} $PY -m pytest -q -p no:cacheprovider -p no:benchmark -n 4 tests/test_gpu.py \
        tests/test_device.py -rfs > "$OUT/tests_gpu.txt" 2>&1
    echo "test_gpu rc=$?"; tail -15 "$OUT/tests_gpu.txt"
fi
if has steady; then
    step "steady state: device memory and copies per graph"
    timeout 60 $PY bench/gpu_steady.py 2>&1 | tee "$OUT/steady.txt"
fi
if has programs && [ -n "${DYNET_SRC:-}" ]; then
    step "DyNet's own programs, CPU vs GPU"
    timeout $(( ${PROGRAMS_TIMEOUT:-100} + 30 )) $PY bench/dynet_programs.py "$DYNET_SRC" ${DATA:+--data "$DATA"} \
        --timeout ${PROGRAMS_TIMEOUT:-100} --work "$OUT/programs" --out "$OUT/programs.md"
    echo "programs rc=$?"
fi
if has oom; then
    step "out of device memory for real"
    timeout 90 $PY bench/gpu_oom.py 2>&1 | tee "$OUT/oom.txt"
fi
if has mpi; then
    step "MPI ranks with parameters on the GPU"
    timeout 120 $PY -m pytest -q -p no:cacheprovider -p no:benchmark tests/parallel/test_mpi.py -k "GPU or gpu" -rfs \
        2>&1 | tail -5 | tee "$OUT/mpi.txt"
fi
if has axis; then
    step "the device axis on GPU:0: $AXIS"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    # -v: each finished test is named as it ends, so a run cut by the timeout still says which ran
    timeout ${TEST_TIMEOUT:-420} $PY -m pytest -v -p no:cacheprovider -p no:benchmark -n 14 $AXIS \
        -k "GPU" -rf --durations=25 --junitxml="$OUT/junit_axis.xml" > "$OUT/tests_axis.txt" 2>&1
    echo "device-axis tests rc=$? ($(( $(date +%s) - t0 )) s):"; tail -3 "$OUT/tests_axis.txt"
    echo "passed $(grep -c " PASSED " "$OUT/tests_axis.txt"), skipped $(grep -c " SKIPPED " "$OUT/tests_axis.txt"), failed $(grep -c " FAILED " "$OUT/tests_axis.txt")"
    grep -E "^FAILED|^ERROR" "$OUT/tests_axis.txt" | head -60
fi
echo "== done ($(date +%T))"

#!/usr/bin/env bash
# A GPU session on the lent device machine (no network there), in three steps:
#
#   bench/gpu_session.sh prepare       here, with a network: the wheels the machine lacks
#                                      into .whl/ (pytest, hypothesis, ml_dtypes, ...), and
#                                      MLX CUDA 0.32.4 packed in two parts, .mlxcuda/a and
#                                      .mlxcuda/b (a call carries 64 MiB at most)
#   bench/gpu_session.sh suite [S] [M] there, carrying .whl and .mlxcuda/a: the whole suite
#                                      with the GPU as default (S seconds at most, 240 if
#                                      not given), then the small Llama's generation and
#                                      training step with auto graphs on and off, then
#                                      MLX's tests through the shim if mlxtests_carry is
#                                      carried too (M seconds at most, 200 if not given)
#   bench/gpu_session.sh mlx           there, the next call on the same warm machine,
#                                      carrying .whl and .mlxcuda/b: MLX CUDA beside
#                                      streamlet (stream_bench, the MLP step, the Llama), then
#                                      bench/profile_gpu.py's profile into $OUT
#
# Output goes to stdout and to $OUT (the device tool's folder of files that come back).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
MLX=0.32.4

wheels() {  # the packages the suite needs that the machine's image lacks, for CPython 3.12
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl pytest pluggy iniconfig packaging pygments \
    hypothesis sortedcontainers pytest-xdist execnet pytest-timeout "ml_dtypes<0.7" \
    safetensors
}

mlx_parts() {  # MLX CUDA's two wheels, unpacked, as one xz stream cut in two
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_35_x86_64 -d "$tmp" "mlx==$MLX" \
    "mlx-cuda-13==$MLX" || return 1
  mkdir -p "$tmp/site" .mlxcuda/a .mlxcuda/b
  for w in "$tmp"/*.whl; do unzip -q -o "$w" -d "$tmp/site"; done
  tar -C "$tmp/site" -cf - . | xz -T0 -6 > "$tmp/mlx.tar.xz"
  local half=$(( ($(stat -c %s "$tmp/mlx.tar.xz") + 1) / 2 ))
  head -c "$half" "$tmp/mlx.tar.xz" > .mlxcuda/a/part
  tail -c +"$((half + 1))" "$tmp/mlx.tar.xz" > .mlxcuda/b/part
  rm -rf "$tmp"
}

installed() {  # the carried wheels, importable
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
}

llama() {  # the small Llama's bench, auto graphs on and off
  for ag in 1 0; do
    echo "== bench_llama_gpu.py, STREAMLET_AUTO_GRAPHS=$ag"
    STREAMLET_AUTO_GRAPHS=$ag timeout 150 python3 bench/bench_llama_gpu.py --device gpu --reps 3
  done
}

case "${1:-}" in
  prepare)  # (.gitignore ignores both folders)
    wheels && mlx_parts && du -sh .whl .mlxcuda/a .mlxcuda/b ;;
  suite)
    installed
    [ -f .mlxcuda/a/part ] && cp .mlxcuda/a/part /tmp/mlx.part.a
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import sys, numpy, cupy; print(sys.version.split()[0], numpy.__version__, cupy.__version__)"
    start=$(date +%s)
    STREAMLET_TEST_DEVICE=gpu STREAMLET_SKIP_ORACLE=1 timeout "${2:-240}" \
      python3 -m pytest -n 12 tests -p no:cacheprovider -o addopts="" -q --timeout 200 \
      > "$OUT/suite.log" 2>&1
    grep -E "passed|failed|^FAILED|^ERROR" "$OUT/suite.log" | tail -40
    echo "suite: $(( $(date +%s) - start )) s"
    llama
    left=$(( 580 - SECONDS ))  # a device call runs 600 s at most
    [ "$left" -gt "${3:-200}" ] && left=${3:-200}
    if [ -d mlxtests_carry/tests ] && [ "$left" -gt 30 ]; then  # MLX's tests, GPU default
      timeout "$left" python3 bench/mlx_suite.py --tests mlxtests_carry/tests \
        --impl streamlet --device gpu -j 8 --out "$OUT/mlx_gpu.json" 2>&1 | tee "$OUT/mlx_gpu.log" | tail -5
    fi ;;
  mlx)
    installed
    mkdir -p /tmp/mlx
    cat /tmp/mlx.part.a .mlxcuda/b/part | xz -d | tar -x -C /tmp/mlx || exit 1
    export PYTHONPATH=$PYTHONPATH:/tmp/mlx
    python3 -c "import mlx.core as m; print('mlx', m.__version__, m.default_device())" || exit 1
    timeout 240 python3 bench/run.py --device gpu --rounds 2 \
      --only eager_us_per_op,chain_us_per_op,threads4_us_per_eval,normal_Msamples_per_s
    timeout 90 python3 bench/bench_transforms.py --device gpu --width 4096 --batch 1024 --step-only
    timeout 150 python3 bench/bench_llama_gpu.py --device gpu --reps 3
    timeout 60 python3 bench/profile_gpu.py > "$OUT/profile_gpu.txt" 2>&1
    head -2 "$OUT/profile_gpu.txt" ;;
  *)
    sed -n 2,17p "$0"; exit 2 ;;
esac

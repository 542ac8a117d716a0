#!/usr/bin/env bash
# Runs the test suites: C unit tests (plain and under ASan/UBSan), then the
# Python tests against PyTorch's CPU results (op and model tests in strict
# and in fused eager). Extra arguments go to pytest
# (e.g. ./test.sh -m slow for the long runs).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
./tests/run_c_tests.sh
./tests/run_c_tests.sh --asan
$PY -m pytest -q "$@"
# The op, semantics and model tests again in fused eager: same results.
TORCH_TPU_DEFER_AND_FUSE=1 $PY -m pytest -q tests/python/test_ops.py \
  tests/python/test_semantics.py tests/python/test_tensor.py tests/python/test_nn_ops.py \
  tests/python/test_sort_scan_ops.py tests/python/test_mlp.py tests/python/test_fused.py \
  tests/python/test_optim_fused.py "$@"

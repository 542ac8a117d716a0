#!/usr/bin/env bash
# Runs the test suites: C unit tests (plain and under ASan/UBSan), then the
# Python tests against PyTorch's CPU results. Extra arguments go to pytest
# (e.g. ./test.sh -m slow for the long runs).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
./tests/run_c_tests.sh
./tests/run_c_tests.sh --asan
$PY -m pytest -q "$@"

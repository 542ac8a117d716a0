#!/usr/bin/env bash
# Runs the test suites: C unit tests (plain and under ASan/UBSan), then the
# Python tests against PyTorch's CPU results (op and model tests in strict
# and in fused eager). Extra arguments go to pytest
# (e.g. ./test.sh -m slow for the long runs).
# pytest spreads over the cores (pytest-xdist). Every stage runs even when an
# earlier one fails; the summary at the end gives each stage's result, counts
# and time, and the exit status is non-zero if any stage failed.
set -uo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
failed_stages=0
total_passed=0 total_failed=0 total_skipped=0

# Counts in a stage's output: every "N passed, N failed" line of the C runner,
# plus pytest's closing line ("3 failed, 1200 passed, 4 skipped in 60.0s").
count() {  # count LOG -> "passed failed skipped"
  awk '
    /^[0-9]+ passed, [0-9]+ failed$/ { cp += $1; cf += $3; next }
    / in [0-9.]+s( \(.*\))?$/ && /(passed|failed|error|no tests ran)/ { last = $0 }
    END {
      n = split(last, w, /[ ,]+/)
      for (i = 2; i <= n; i++) {
        if (w[i] == "passed") pp = w[i - 1]
        if (w[i] == "failed" || w[i] ~ /^errors?$/) pf += w[i - 1]
        if (w[i] == "skipped") ps = w[i - 1]
      }
      print cp + pp, cf + pf, ps + 0
    }' "$1"
}

stage() {  # stage NAME COMMAND...
  local name=$1 t0=$SECONDS log="$logs/${#summary[@]}.log" rc passed failed skipped
  shift
  echo "== $name"
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  # pytest's 5 is "no test collected": a failure for the default run, but
  # extra arguments (-k, -m) may rightly select nothing in one stage.
  if [[ $rc -eq 5 && ${#pytest_args[@]} -gt 0 ]]; then rc=0; fi
  read -r passed failed skipped < <(count "$log")
  # A stage that failed before counting anything (a build error, a crash)
  # still counts as one failure.
  if [[ $rc -ne 0 ]]; then
    failed_stages=$((failed_stages + 1))
    [[ $failed -gt 0 ]] || failed=1
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  summary+=("$(printf '  %-22s %-6s %5d passed %4d failed %4d skipped %6d s' "$name" \
               "$([[ $rc -eq 0 ]] && echo ok || echo FAILED)" "$passed" "$failed" "$skipped" \
               $((SECONDS - t0)))")
}

# pytest runs on every core, up to 4 (TORCH_TPU_TEST_WORKERS sets the count,
# 1 runs in one process): each worker compiles its own executables, and on a
# cold cache compiling is most of the suite's time. Extra arguments come after
# this, so a -n of their own wins.
workers=${TORCH_TPU_TEST_WORKERS:-$(cores=$(nproc); echo $((cores < 4 ? cores : 4)))}
spread=()
if [[ $workers -gt 1 ]]; then
  if "$PY" -c "import xdist" 2>/dev/null; then
    spread=(-n "$workers")
  else
    echo "test.sh: pytest-xdist is not installed (./setup.sh installs it): one process"
  fi
fi

pytest_args=("$@")
stage "C tests" ./tests/run_c_tests.sh
stage "C tests, ASan/UBSan" ./tests/run_c_tests.sh --asan
stage "pytest" "$PY" -m pytest -q "${spread[@]}" "$@"
# The op, semantics and model tests again in fused eager: same results.
stage "pytest, fused eager" env TORCH_TPU_DEFER_AND_FUSE=1 "$PY" -m pytest -q "${spread[@]}" \
  tests/python/test_ops.py tests/python/test_semantics.py tests/python/test_tensor.py \
  tests/python/test_nn_ops.py tests/python/test_sort_scan_ops.py tests/python/test_mlp.py \
  tests/python/test_fused.py tests/python/test_optim_fused.py "$@"

echo "== test.sh: $((SECONDS - start)) s, $failed_stages of ${#summary[@]} stages failed"
printf '%s\n' "${summary[@]}"
echo "tests: $total_passed passed, $total_failed failed, $total_skipped skipped"
[[ $failed_stages -eq 0 ]]

#!/usr/bin/env bash
# Builds the C core and runs its unit tests against a real PJRT plugin.
#
#   tests/run_c_tests.sh [--asan] [--one] [FILTER]
#
#   --asan  build in build-asan with -DTPR_SANITIZE=ON (ASan + UBSan)
#   --one   run against the first CPU plugin found only
#   FILTER  run only tests whose name contains it
#
# TORCH_TPU_PJRT_PLUGIN names the plugin. When it is unset, the suite runs
# once per installed CPU plugin, found through Python: xla-cpu-pjrt
# (xla_plugins.xla_cpu_pjrt), then lammps-jax-pjrt-cpu; both must work.
# Tests that need a plugin fail without one.
# Exits non-zero on any build or test failure.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
asan=0
both=1
filter=()
for arg in "$@"; do
  case "$arg" in
    --asan) asan=1 ;;
    --one) both=0 ;;
    --both) both=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) filter+=("$arg") ;;
  esac
done

python="${PYTHON:-python3}"
find_plugin() {  # $1: xla | lammps
  "$python" - "$1" <<'EOF' 2>/dev/null || true
import os, sys
try:
    if sys.argv[1] == "xla":
        import xla_plugins.xla_cpu_pjrt as m
        p = os.path.join(os.path.dirname(m.__file__), "xla_cpu_pjrt.so")
    else:
        import lammps_jax_pjrt_cpu as m
        p = str(m.PLUGIN_PATH)
    if os.path.exists(p):
        print(p)
except Exception:
    pass
EOF
}

plugins=()
if [[ -n "${TORCH_TPU_PJRT_PLUGIN:-}" ]]; then
  plugins+=("$TORCH_TPU_PJRT_PLUGIN")
fi
if [[ ${#plugins[@]} -eq 0 ]]; then
  for kind in xla lammps; do
    p="$(find_plugin "$kind")"
    if [[ -n "$p" && ! " ${plugins[*]-} " =~ " $p " ]]; then
      plugins+=("$p")
      [[ $both -eq 1 ]] || break
    fi
  done
fi
if [[ ${#plugins[@]} -eq 0 ]]; then
  echo "run_c_tests: no PJRT CPU plugin found; pip install xla-cpu-pjrt" \
       "(tests that need it will fail)" >&2
  plugins+=("")
fi

if [[ $asan -eq 1 ]]; then
  build="$root/build-asan"
  cmake_args=(-DTPR_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
else
  build="$root/build"
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
cmake -S "$root" -B "$build" "${cmake_args[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target tpr_tests >/dev/null

if [[ $asan -eq 1 ]]; then
  # ASan with a dlopen'ed XLA plugin (measured with both CPU wheels):
  #  * The plugin is not instrumented, but ASan's malloc interposition covers
  #    it, so LeakSanitizer sees every PJRT object (event, buffer, error) we
  #    forget to destroy: a leaked done_with_host_buffer event is reported as
  #    a "Direct leak of 32 bytes". Keep detect_leaks on for that reason.
  #  * The plugins' own process-lifetime state (LLVM, thread pools, protobuf
  #    registries) stays reachable from their globals, so LSan reports
  #    nothing for it and no suppressions are needed. Do NOT add a
  #    "leak:xla_cpu_pjrt.so" suppression: the allocation stacks of leaked
  #    PJRT objects are inside the plugin, so it would hide our bugs too.
  #  * XLA's MLIR code generator keeps uniqued attribute storage (for example
  #    xla::detail::IndexingMapAttrStorage) in its context's arena, whose
  #    destructors never run, so the std::vectors inside are reported as
  #    direct leaks once a module needs loop emitters. The first suppression
  #    names only MLIR's uniquer; PJRT objects never allocate through it.
  #    lammps-jax-pjrt-cpu is stripped, so its frames have no function names
  #    and only its module name can be suppressed: that run cannot catch a
  #    PJRT object we leak, the xla-cpu-pjrt run (with symbols) does.
  #  * Default shadow and signal settings work (protect_shadow_gap and
  #    use_sigaltstack need no change with these plugins).
  #  * Our tpr_malloc leaks are caught per test by the harness.
  supp="$build/lsan.supp"
  printf '%s\n' 'leak:mlir::detail::StorageUniquerImpl::getOrCreate' \
    'leak:pjrt_c_api_cpu_plugin.so' > "$supp"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp:print_suppressions=0}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi
# The plugin logs every client creation at INFO level; keep the output short.
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-1}"

status=0
for plugin in "${plugins[@]}"; do
  echo "== tpr_tests with TORCH_TPU_PJRT_PLUGIN=${plugin:-<unset>}"
  if ! TORCH_TPU_PJRT_PLUGIN="$plugin" "$build/tpr_tests" "${filter[@]}"; then
    status=1
  fi
done
exit $status

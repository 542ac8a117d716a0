#!/usr/bin/env bash
# Sets up torch_tpu on a fresh machine: PyTorch (CPU build, pinned), the XLA
# CPU PJRT plugin, test tools, and an editable build of this package.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
$PY -m pip install --quiet "torch==${TORCH_VERSION}"
$PY -m pip install --quiet numpy pytest pytest-timeout xla-cpu-pjrt
$PY -m pip install --quiet --no-build-isolation -e .
$PY -m torch_tpu.info

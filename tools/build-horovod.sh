#!/usr/bin/env bash
# Builds Horovod 0.28.1 (PyTorch + Gloo, no MPI/TensorFlow/MXNet) into a wheel
# in the wheelhouse, once. Horovod's last release predates torch 2.1: its
# CMakeLists ask for C++14, and torch >= 2.15's headers need C++20 (2.1-2.14
# need C++17), so the two CMAKE_CXX_STANDARD lines are raised; CMake 4 needs
# CMAKE_POLICY_VERSION_MINIMUM for its old cmake_minimum_required.
set -euo pipefail

WHEELHOUSE=${WHEELHOUSE:?set WHEELHOUSE}
PYTHON=${PYTHON:-python3}
HOROVOD_VERSION=${HOROVOD_VERSION:-0.28.1}
here=$(cd "$(dirname "$0")" && pwd)
REQS=${REQS:-$here/../images/stack/requirements.txt}

if ls "$WHEELHOUSE"/horovod-"$HOROVOD_VERSION"-*.whl >/dev/null 2>&1; then
  echo "horovod $HOROVOD_VERSION wheel: present"
  exit 0
fi
work=$(mktemp -d /var/tmp/hpcbench-horovod.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "horovod $HOROVOD_VERSION wheel: building against $(grep '^torch==' "$REQS") (10-20 minutes on 2 cores)"

# A throwaway build venv with the very torch the wheel will run against.
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index --find-links "$WHEELHOUSE" \
  "$(grep '^torch==' "$REQS")" numpy cmake wheel setuptools cloudpickle psutil pyyaml packaging
"$work/venv/bin/pip" download -q --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
tar -C "$work" -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz"
src="$work/horovod-$HOROVOD_VERSION"

torch_minor=$("$work/venv/bin/python" -c 'import torch; print(torch.__version__.split(".")[1])')
torch_std=17
(( torch_minor >= 15 )) && torch_std=20
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
sed -i "s/set(CMAKE_CXX_STANDARD 1[47])/set(CMAKE_CXX_STANDARD $torch_std)/" "$src/horovod/torch/CMakeLists.txt"
grep -q "CMAKE_CXX_STANDARD $torch_std" "$src/horovod/torch/CMakeLists.txt" \
  || { echo "build-horovod.sh: the C++ standard patch did not apply" >&2; exit 1; }

(cd "$src" && PATH="$work/venv/bin:$PATH" \
  CMAKE_POLICY_VERSION_MINIMUM=3.5 MAKEFLAGS="-j$(nproc)" \
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo \
  "$work/venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$work/dist" . >"$work/build.log" 2>&1) \
  || { grep -m 20 -E 'error' "$work/build.log" >&2; echo "build-horovod.sh: build failed" >&2; exit 1; }
cp "$work"/dist/horovod-*.whl "$WHEELHOUSE/"
echo "horovod $HOROVOD_VERSION wheel: built"

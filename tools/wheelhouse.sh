#!/usr/bin/env bash
# Fills the wheelhouse: every wheel of the training stack, downloaded once and
# kept outside the repository, then installed from there everywhere (host venv,
# image builds, nodes) so that no step depends on PyPI twice and all match.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
WHEELHOUSE=${WHEELHOUSE:?set WHEELHOUSE}
REQS=${REQS:-$here/../images/stack/requirements.txt}
PYTHON=${PYTHON:-python3}
mkdir -p "$WHEELHOUSE"

# Re-download only when the pins change; a warm cache needs no network.
stamp="$WHEELHOUSE/.requirements.sha256"
want=$(sha256sum "$REQS" | cut -d' ' -f1)
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "wheelhouse $WHEELHOUSE: up to date"
  # Horovod's wheel judges itself (its version and how it was built): present, or
  # built again when an older cache holds it built otherwise.
  exec "$here/build-horovod.sh"
fi

echo "wheelhouse $WHEELHOUSE: downloading the stack's wheels (torch brings several GB of CUDA libraries)"
binary_reqs=$(mktemp)
trap 'rm -f "$binary_reqs"' EXIT
grep -v -e '^horovod' "$REQS" > "$binary_reqs"
# Horovod's own runtime needs, as wheels (its sdist is built separately).
printf '%s\n' cloudpickle psutil pyyaml packaging cmake wheel setuptools >> "$binary_reqs"
# Resolved for the oldest interpreter they serve, Debian 12's python3 (3.11.2)
# in the images and on the nodes; the host's newer 3.11 takes the same wheels.
"$PYTHON" -m pip download -q --only-binary=:all: --python-version "${TARGET_PYTHON_VERSION:-3.11.2}" \
  -d "$WHEELHOUSE" -r "$binary_reqs"

"$here/build-horovod.sh"
echo "$want" > "$stamp"
echo "wheelhouse $WHEELHOUSE: ready ($(du -sh "$WHEELHOUSE" | cut -f1))"

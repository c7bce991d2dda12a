#!/usr/bin/env bash
# Exports the stack image to an enroot/pyxis squashfs file, for Slurm clusters
# with enroot and pyxis (LRZ AI Systems, GWDG Grete):
#
#   images/enroot-export.sh [OUT.sqsh]       (default: hpcbench+stack.sqsh)
#
# From the local Docker daemon (`enroot import dockerd://`), where enroot and
# the image (`images/build.sh stack`) are on this machine. Copy the file to the
# cluster and pass it to `hpcbench scale --container-image /path/OUT.sqsh`, or
# to `srun --container-image=/path/OUT.sqsh` yourself.
#
# Sites that pull from a registry instead: push the image
# (`docker tag hpcbench/stack:latest REGISTRY/hpcbench/stack:TAG && docker push ...`)
# and on the cluster run `enroot import docker://REGISTRY#hpcbench/stack:TAG`
# (credentials in $ENROOT_CONFIG_PATH/.credentials, netrc format), or let
# pyxis import it on first use with `--container-image=REGISTRY#hpcbench/stack:TAG`.
#
# Environment: STACK_TAG (default hpcbench/stack:latest).
set -euo pipefail

STACK_TAG=${STACK_TAG:-hpcbench/stack:latest}
out=${1:-hpcbench+stack.sqsh}

if ! command -v enroot >/dev/null; then
  echo "enroot-export: enroot is not installed here (https://github.com/NVIDIA/enroot;" \
       "the ansible enroot role installs it on VMs). On the cluster instead:" \
       "enroot import docker://REGISTRY#${STACK_TAG}" >&2
  exit 2
fi
if ! docker image inspect "$STACK_TAG" >/dev/null 2>&1; then
  echo "enroot-export: no image $STACK_TAG in the local Docker daemon: run images/build.sh stack" >&2
  exit 2
fi
if [[ -e "$out" ]]; then
  echo "enroot-export: $out exists; remove it first (enroot does not overwrite)" >&2
  exit 2
fi
echo "enroot-export: $STACK_TAG -> $out"
enroot import --output "$out" "dockerd://$STACK_TAG"
# A quick proof that the file is a usable image: the stack's python imports torch.
if [[ "${ENROOT_EXPORT_CHECK:-1}" == 1 ]]; then
  name="hpcbench-export-check-$$"
  enroot create --name "$name" "$out" >/dev/null
  trap 'enroot remove --force "$name" >/dev/null 2>&1 || true' EXIT
  enroot start "$name" /opt/hpcbench/venv/bin/python -c 'import torch, horovod; print("torch", torch.__version__)'
fi
ls -lh "$out"

#!/usr/bin/env bash
# Exports the stack image to an enroot/pyxis squashfs file, for Slurm clusters
# with enroot and pyxis (LRZ AI Systems, GWDG Grete):
#
#   images/enroot-export.sh [OUT.sqsh]       (default: hpcbench+stack.sqsh)
#   images/enroot-export.sh --cached OUT.sqsh
#
# --cached keeps OUT when it was exported from the very image (its ID is kept in
# OUT.image-id) and replaces it otherwise: what make enroot-image and the e2e
# tests use, so that a rebuilt stack image is exported again, once.
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
# Where enroot is not installed, the one tools/enroot-pyxis.sh built from its
# release source (make images) runs from a folder of its own (ENROOT_ARCHIVE).
#
# Environment: STACK_TAG (default hpcbench/stack:latest), ENROOT_ARCHIVE,
# ENROOT_EXPORT_CHECK=0 (skip the check, which starts a container: root may not).
set -euo pipefail

STACK_TAG=${STACK_TAG:-hpcbench/stack:latest}
ENROOT_ARCHIVE=${ENROOT_ARCHIVE:-$HOME/.cache/hpcbench/enroot-pyxis/enroot_4.1.2_x86_64.tar.xz}
cached=
if [[ ${1:-} == --cached ]]; then cached=1; shift; fi
out=${1:-hpcbench+stack.sqsh}

if ! command -v enroot >/dev/null; then
  if [[ ! -f $ENROOT_ARCHIVE ]]; then
    echo "enroot-export: enroot is not installed here, nor built ($ENROOT_ARCHIVE: run" \
         "tools/enroot-pyxis.sh, or install enroot). On the cluster instead:" \
         "enroot import docker://REGISTRY#${STACK_TAG}" >&2
    exit 2
  fi
  # enroot's paths are baked in at build time; these three variables move them.
  home=$(mktemp -d /var/tmp/hpcbench-enroot.XXXXXX)
  trap 'rm -rf "$home"' EXIT
  tar -C "$home" -xJf "$ENROOT_ARCHIVE" --strip-components=1
  export PATH="$home/usr/local/bin:$PATH" ENROOT_LIBRARY_PATH="$home/usr/local/lib/enroot" \
         ENROOT_SYSCONF_PATH="$home/etc/enroot"
fi
for cmd in jq mksquashfs; do
  command -v "$cmd" >/dev/null || { echo "enroot-export: enroot needs $cmd (Debian: apt-get install jq squashfs-tools)" >&2; exit 2; }
done
if ! docker image inspect "$STACK_TAG" >/dev/null 2>&1; then
  echo "enroot-export: no image $STACK_TAG in the local Docker daemon: run images/build.sh stack" >&2
  exit 2
fi
image_id=$(docker image inspect -f '{{.Id}}' "$STACK_TAG")
final=$out
if [[ -n $cached ]]; then
  if [[ -f $out && "$(cat "$out.image-id" 2>/dev/null)" == "$image_id" ]]; then
    echo "enroot-export: $out is up to date ($STACK_TAG)"
    exit 0
  fi
  mkdir -p "$(dirname "$out")"
  out=$out.tmp
  rm -f "$out"
elif [[ -e "$out" ]]; then
  echo "enroot-export: $out exists; remove it first (enroot does not overwrite)" >&2
  exit 2
fi
echo "enroot-export: $STACK_TAG -> $final"
start=$(date +%s)
enroot import --output "$out" "dockerd://$STACK_TAG"
# A quick proof that the file is a usable image: the stack's python imports torch.
if [[ "${ENROOT_EXPORT_CHECK:-1}" == 1 ]]; then
  name="hpcbench-export-check-$$"
  enroot create --name "$name" "$out" >/dev/null
  trap 'enroot remove --force "$name" >/dev/null 2>&1 || true; rm -rf "${home:-}"' EXIT
  enroot start "$name" /opt/hpcbench/venv/bin/python -c 'import torch, horovod; print("torch", torch.__version__)'
fi
if [[ -n $cached ]]; then
  mv "$out" "$final"
  echo "$image_id" > "$final.image-id"
fi
echo "enroot-export: $(du -h "$final" | cut -f1) in $(( $(date +%s) - start )) s"

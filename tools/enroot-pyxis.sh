#!/usr/bin/env bash
# Builds enroot and pyxis from their release sources, once, for the local Slurm
# testbed's nodes (the enroot and pyxis roles install what it leaves in OUT):
#
#   OUT/enroot_4.1.2_x86_64.tar.xz                 enroot's `make dist`, /usr/local + /etc
#   OUT/spank_pyxis-0.24.0-slurm<version>.so       against the node image's Slurm
#
#   [VENDOR_DIR=dir] [OUT=dir] [NODE_TAG=image] tools/enroot-pyxis.sh
#
# Sources: enroot-4.1.2.tar.gz and pyxis-0.24.0.tar.gz from VENDOR_DIR where it is
# set, else the release tags from GitHub; either way checked against
# tools/enroot-pyxis.sha256 first: the file's own sum, or (an archive compressed
# elsewhere) the sum of the tar inside it, which `git archive` of the tag gives
# alike wherever it runs. A mismatch stops the build in one line, exit 2.
#
# The build runs in a container of the node image, so pyxis is built against
# the Slurm release the nodes run (libslurm-dev of slurmd's very version: a SPANK
# plugin must match its Slurm). enroot's git submodules are not in its release
# archive: Debian's makeself (2.4.5, the version enroot pins) stands in, the
# kernel headers come from linux-libc-dev, and its helpers link glibc
# (FORCE_GLIBC=1) with libbsd's static library; glibc 2.36 lacks strlcpy and
# strlcat, which a forced include declares from libbsd.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-${CACHE:-$HOME/.cache/hpcbench}/enroot-pyxis}
NODE_TAG=${NODE_TAG:-hpcbench/node:latest}
ENROOT_VERSION=4.1.2
PYXIS_VERSION=0.24.0
SUMS=$here/enroot-pyxis.sha256
declare -A upstream=(
  [enroot-$ENROOT_VERSION.tar.gz]=https://github.com/NVIDIA/enroot/archive/refs/tags/v$ENROOT_VERSION.tar.gz
  [pyxis-$PYXIS_VERSION.tar.gz]=https://github.com/NVIDIA/pyxis/archive/refs/tags/v$PYXIS_VERSION.tar.gz
)

die() { echo "enroot-pyxis: $*" >&2; exit 2; }

# The Slurm release pyxis is built against: the node image's slurmd.
if [[ -z ${SLURM_VERSION:-} ]]; then
  docker image inspect "$NODE_TAG" >/dev/null 2>&1 || die "no image $NODE_TAG: run images/build.sh node"
  SLURM_VERSION=$(docker run --rm --network none --entrypoint dpkg-query "$NODE_TAG" -W -f '${Version}' slurmd)
fi
slurm=$SLURM_VERSION
enroot_out=$OUT/enroot_${ENROOT_VERSION}_x86_64.tar.xz
pyxis_out=$OUT/spank_pyxis-$PYXIS_VERSION-slurm$slurm.so
if [[ -s $enroot_out && -s $pyxis_out ]]; then
  echo "enroot $ENROOT_VERSION and pyxis $PYXIS_VERSION (Slurm $slurm): present"
  exit 0
fi

pinned() { # file kind -> its pinned sum ("" if none)
  awk -v f="$1" '$2 == f { print $1 }' "$SUMS"
}

work=$(mktemp -d /var/tmp/hpcbench-enroot-pyxis.XXXXXX)
trap 'rm -rf "$work"' EXIT
for file in "${!upstream[@]}"; do
  if [[ -n ${VENDOR_DIR:-} ]]; then
    [[ -f $VENDOR_DIR/$file ]] || die "VENDOR_DIR=$VENDOR_DIR has no $file"
    cp "$VENDOR_DIR/$file" "$work/$file"
  else
    curl -fsSL --retry 3 -o "$work/$file" "${upstream[$file]}" \
      || die "$file: download from ${upstream[$file]} failed (set VENDOR_DIR to a folder holding it)"
  fi
  got=$(sha256sum < "$work/$file" | cut -d' ' -f1)
  if [[ $got != "$(pinned "$file")" ]]; then
    tar_sum=$(gzip -dc "$work/$file" 2>/dev/null | sha256sum | cut -d' ' -f1)
    [[ $tar_sum == "$(pinned "${file%.gz}")" ]] \
      || die "$file: sha256 $got matches neither its pinned sum nor (its tar: $tar_sum) the tar's in $SUMS"
  fi
  tar -C "$work" -xzf "$work/$file"
done
# glibc 2.36 has no strlcpy/strlcat; libbsd declares them, but its <bsd/string.h>
# forced on every file breaks _GNU_SOURCE, so only the two declarations.
cat > "$work/enroot-$ENROOT_VERSION/strl-compat.h" <<'EOF'
#include <stddef.h>
size_t strlcpy(char *dst, const char *src, size_t size);
size_t strlcat(char *dst, const char *src, size_t size);
EOF

echo "enroot $ENROOT_VERSION and pyxis $PYXIS_VERSION: building against Slurm $slurm (a few minutes)"
start=$(date +%s)
mkdir -p "$OUT"
docker run --rm --network host --user 0 --entrypoint bash \
  -v "$work:/build" -e SLURM_VERSION="$slurm" -e ENROOT_VERSION="$ENROOT_VERSION" -e PYXIS_VERSION="$PYXIS_VERSION" \
  "$NODE_TAG" -euo pipefail -c '
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends build-essential libbsd-dev makeself \
      linux-libc-dev "libslurm-dev=$SLURM_VERSION" >/dev/null
    cd "/build/enroot-$ENROOT_VERSION"
    install -m 755 /usr/bin/makeself deps/makeself/makeself.sh  # only `enroot bundle` uses it
    touch deps/linux-headers/.stamp
    CPPFLAGS="-include strl-compat.h" make -s dist prefix=/usr/local sysconfdir=/etc \
      FORCE_GLIBC=1 LDLIBS="-l:libbsd.a /usr/lib/x86_64-linux-gnu/libbsd.a" >/dev/null
    cd "/build/pyxis-$PYXIS_VERSION"
    make -s >/dev/null
  ' || die "the build failed (its output is above)"
cp "$work/enroot-$ENROOT_VERSION/dist/enroot_${ENROOT_VERSION}_x86_64.tar.xz" "$enroot_out.tmp"
cp "$work/pyxis-$PYXIS_VERSION/spank_pyxis.so" "$pyxis_out.tmp"
mv "$enroot_out.tmp" "$enroot_out"
mv "$pyxis_out.tmp" "$pyxis_out"
echo "enroot $ENROOT_VERSION and pyxis $PYXIS_VERSION: built in $(( $(date +%s) - start )) s -> $OUT"

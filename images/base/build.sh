#!/usr/bin/env bash
# Provides the base image debian:bookworm-slim. Pulls it where a registry is
# reachable; otherwise (air-gapped sites, Virtual Wall nodes without NAT, this
# project's CI) builds the same root file system with debootstrap from a Debian
# mirror and imports it under the same tag, so every Dockerfile stays unchanged.
#
# The mirror is the one this host's apt already uses for the suite (see
# apt-mirror.sh: /etc/apt/sources.list and sources.list.d/*.list|*.sources), so a
# site's own mirror or proxy is used without naming it here. Overrides:
#   DEBIAN_MIRROR=<url>   the Debian archive to debootstrap from (wins over apt's)
#   DEBIAN_SUITE=<suite>  the release (default bookworm, as the tag)
#   APT_DIR=<dir>         where to read apt sources (default /etc/apt)
set -euo pipefail

TAG=${BASE_IMAGE:-debian:bookworm-slim}
SUITE=${DEBIAN_SUITE:-bookworm}

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG: present"
  exit 0
fi
if timeout 60 docker pull -q "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG: pulled"
  exit 0
fi

if [[ -n "${DEBIAN_MIRROR:-}" ]]; then
  MIRROR=$DEBIAN_MIRROR
else
  MIRROR=$("$(dirname "$0")/apt-mirror.sh" "$SUITE" "${APT_DIR:-/etc/apt}") || exit 2
fi
echo "base image $TAG: no registry reachable, building it with debootstrap from $MIRROR (offline mode)"
command -v debootstrap >/dev/null || { echo "images/base/build.sh: debootstrap is missing: apt-get install debootstrap" >&2; exit 2; }
root=$(mktemp -d /var/tmp/hpcbench-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1 \
  || { tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# Same trimming the official slim image does: no caches, no docs.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/var/cache/apt/*.bin
printf 'deb %s %s main\ndeb %s %s-updates main\n' "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" \
  > "$root/etc/apt/sources.list"
tar -C "$root" --numeric-owner -c . | docker import -c 'CMD ["bash"]' - "$TAG" >/dev/null
echo "base image $TAG: imported"

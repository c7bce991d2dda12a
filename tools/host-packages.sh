#!/usr/bin/env bash
# Installs the host packages the tool chain needs when they are missing:
# debootstrap (offline base image), unzip (provider sources), cmake, g++ and
# mpicxx (the Horovod wheel, built with MPI beside Gloo), ssh-keygen, sshd (the tests start a private one on loopback
# as the jump host that deploy's reachability check goes through), jq and
# mksquashfs (enroot's export of the stack image to a .sqsh for pyxis). On Debian as root it installs them; anywhere
# else it names what is missing and stops.
set -euo pipefail

declare -A provides=([debootstrap]=debootstrap [unzip]=unzip [cmake]=cmake [g++]=g++
                     [ssh-keygen]=openssh-client [curl]=curl [sshd]=openssh-server
                     [jq]=jq [mksquashfs]=squashfs-tools [mpicxx]=libopenmpi-dev)
need=()
for cmd in "${!provides[@]}"; do
  # sshd lives in /usr/sbin, which a non-root PATH lacks.
  command -v "$cmd" >/dev/null || [[ -x /usr/sbin/$cmd ]] || need+=("${provides[$cmd]}")
done
((${#need[@]})) || { echo "host packages: present"; exit 0; }
if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
  echo "host packages: missing ${need[*]}: install them (as root on Debian: apt-get install ${need[*]})" >&2
  exit 2
fi
echo "host packages: installing ${need[*]}"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null

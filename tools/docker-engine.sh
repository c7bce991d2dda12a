#!/usr/bin/env bash
# Makes sure a Docker engine answers. On Debian as root it installs docker.io
# and starts dockerd when none runs (this machine has no systemd to do it);
# anywhere else it stops with one line saying what to do.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  echo "docker engine: running ($(docker info --format '{{.ServerVersion}}'))"
  exit 0
fi
if [[ $(id -u) -ne 0 ]] || ! grep -qi debian /etc/os-release; then
  echo "docker engine: none answers; start Docker (or run this as root on Debian to install docker.io)" >&2
  exit 2
fi
if ! command -v dockerd >/dev/null; then
  echo "docker engine: installing docker.io"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null; }
fi
if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
  systemctl start docker
else
  # No init system here: start dockerd ourselves, detached, logging to a file.
  setsid nohup dockerd >/var/log/hpcbench-dockerd.log 2>&1 < /dev/null &
fi
for _ in $(seq 60); do
  docker info >/dev/null 2>&1 && { echo "docker engine: started"; exit 0; }
  sleep 1
done
echo "docker engine: dockerd did not come up within 60 s; see /var/log/hpcbench-dockerd.log" >&2
exit 1

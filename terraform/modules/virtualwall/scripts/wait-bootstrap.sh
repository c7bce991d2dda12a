#!/usr/bin/env bash
# Waits, bounded, until the boot script has finished on every node: Virtual
# Wall runs RSpec <execute> services after it reports the nodes ready, so
# jFed's return says nothing about them. Done = the marker file exists, read
# over ssh as WAIT_USER with the controller key (which also proves that the
# account and the key the boot script installs work).
# Environment: WAIT_NODES ("name=host:port ..."), WAIT_USER, WAIT_KEY,
# WAIT_MARKER, WAIT_TIMEOUT_S, WAIT_KNOWN_HOSTS, WAIT_PROXY_JUMP
# (user@host[:port] or empty), WAIT_PROXY_KEY (the proxy's login key).
set -euo pipefail
: "${WAIT_NODES:?}" "${WAIT_USER:?}" "${WAIT_KEY:?}" "${WAIT_MARKER:?}" "${WAIT_TIMEOUT_S:?}"

opts=(-o BatchMode=yes -o ConnectTimeout=5 -o IdentitiesOnly=yes -i "$WAIT_KEY"
      -o UserKnownHostsFile="${WAIT_KNOWN_HOSTS:-/dev/null}" -o StrictHostKeyChecking=accept-new)
if [[ -n "${WAIT_PROXY_JUMP:-}" ]]; then
  proxy_host=${WAIT_PROXY_JUMP%:*}
  proxy_port=22
  [[ "$WAIT_PROXY_JUMP" == *:* ]] && proxy_port=${WAIT_PROXY_JUMP##*:}
  # The jFed proxy wants the Fed4FIRE login key, not ssh's default keys.
  opts+=(-o "ProxyCommand=ssh -o BatchMode=yes -i ${WAIT_PROXY_KEY} -p ${proxy_port} -W %h:%p ${proxy_host}")
fi

deadline=$((SECONDS + WAIT_TIMEOUT_S))
for entry in $WAIT_NODES; do
  name=${entry%%=*}
  target=${entry#*=}
  host=${target%:*}
  port=${target##*:}
  until ssh "${opts[@]}" -p "$port" "$WAIT_USER@$host" test -f "$WAIT_MARKER" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      echo "the boot script did not finish on $name ($host:$port) within ${WAIT_TIMEOUT_S} s: no $WAIT_MARKER for $WAIT_USER; see /var/log/syslog on the node, or raise TF_VAR_bootstrap_wait_min" >&2
      exit 1
    fi
    sleep 3
  done
  echo "boot script finished on $name"
done

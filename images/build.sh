#!/usr/bin/env bash
# Builds the images in order: base (pulled, or debootstrapped offline) ->
# node (systemd + sshd, the local testbed's "VM") -> stack (torch + horovod +
# jupyterlab from the wheelhouse). An image whose inputs did not change since
# it was built is kept as it is (label org.hpcbench.inputs), so a re-run is fast.
#
#   images/build.sh [base|node|stack|all]
# Environment: WHEELHOUSE (stack), EXTRA_CA_BUNDLE (a PEM bundle for sites
# behind a TLS-intercepting proxy), NODE_TAG, STACK_TAG, BASE_IMAGE.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm-slim}
NODE_TAG=${NODE_TAG:-hpcbench/node:latest}
STACK_TAG=${STACK_TAG:-hpcbench/stack:latest}
what=${1:-all}

inputs_hash() { # hash of files and build args that make an image
  (cd "$here" && sha256sum "$@"; echo "$BASE_IMAGE ${EXTRA_CA_BUNDLE:+$(sha256sum < "$EXTRA_CA_BUNDLE")}") \
    | sha256sum | cut -c1-16
}

drop_replaced() { # old-image-id tag: a rebuilt image leaves its predecessor untagged
  if [[ -n "$1" && "$1" != "$(docker image inspect -f '{{.Id}}' "$2")" ]]; then
    docker rmi "$1" >/dev/null 2>&1 || echo "image $2: the previous build is still used by containers"
  fi
}

up_to_date() { # tag hash
  [[ "$(docker image inspect -f '{{ index .Config.Labels "org.hpcbench.inputs" }}' "$1" 2>/dev/null)" == "$2" ]]
}

stage_context() { # dir -> a temp build context with the CA bundle in it
  local ctx
  ctx=$(mktemp -d /var/tmp/hpcbench-ctx.XXXXXX)
  cp -r "$here/$1/." "$ctx/"
  if [[ -n "${EXTRA_CA_BUNDLE:-}" ]]; then cp "$EXTRA_CA_BUNDLE" "$ctx/extra-ca.crt"; else : > "$ctx/extra-ca.crt"; fi
  echo "$ctx"
}

build_node() {
  local hash ctx start old
  hash=$(inputs_hash node/Dockerfile node/ssh-host-keys.service)
  if up_to_date "$NODE_TAG" "$hash"; then echo "image $NODE_TAG: up to date"; return; fi
  echo "image $NODE_TAG: building"
  start=$(date +%s)
  old=$(docker image inspect -f '{{.Id}}' "$NODE_TAG" 2>/dev/null || true)
  ctx=$(stage_context node)
  DOCKER_BUILDKIT=0 docker build -q --network host --build-arg BASE_IMAGE="$BASE_IMAGE" \
    --label org.hpcbench.inputs="$hash" -t "$NODE_TAG" "$ctx" >/dev/null
  rm -rf "$ctx"
  drop_replaced "$old" "$NODE_TAG"
  echo "image $NODE_TAG: built in $(( $(date +%s) - start )) s"
}

server=
serve_wheelhouse() { # port-file: WHEELHOUSE served read-only on 127.0.0.1 until stop_serving
  python3 - "$WHEELHOUSE" "$1" <<'PY' &
import functools, http.server, os, sys

class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # pip's requests are not news
        pass

handler = functools.partial(Quiet, directory=sys.argv[1])
with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(httpd.server_address[1]))
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
    httpd.serve_forever()
PY
  server=$!
  trap stop_serving EXIT
  for _ in $(seq 100); do [[ -s $1 ]] && return; sleep 0.1; done
  echo "image $STACK_TAG: the wheelhouse server did not start" >&2
  exit 1
}

stop_serving() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  server=
}

build_stack() {
  local hash ctx start old
  : "${WHEELHOUSE:?set WHEELHOUSE (see tools/wheelhouse.sh)}"
  # The Horovod wheel's build (Gloo, MPI, GPU) is an input too: a wheel built anew
  # with other options makes the image anew.
  hash=$({ inputs_hash stack/Dockerfile stack/requirements.txt node/Dockerfile node/ssh-host-keys.service
           cat "$WHEELHOUSE"/.horovod-*.flavour 2>/dev/null || true; } | sha256sum | cut -c1-16)
  if up_to_date "$STACK_TAG" "$hash"; then echo "image $STACK_TAG: up to date"; return; fi
  echo "image $STACK_TAG: building (installs several GB of wheels)"
  start=$(date +%s)
  old=$(docker image inspect -f '{{.Id}}' "$STACK_TAG" 2>/dev/null || true)
  ctx=$(stage_context stack)
  # The wheels reach the build over loopback (the build has the host's network), not
  # in its context: a 3 GB context is written twice before pip reads it, and a stage
  # that held the wheels would copy the installed venv once more.
  serve_wheelhouse "$ctx/port"
  DOCKER_BUILDKIT=0 docker build -q --network host --build-arg NODE_IMAGE="$NODE_TAG" \
    --build-arg WHEELHOUSE_URL="http://127.0.0.1:$(cat "$ctx/port")/" \
    --label org.hpcbench.inputs="$hash" -t "$STACK_TAG" "$ctx" >/dev/null
  stop_serving
  rm -rf "$ctx"
  drop_replaced "$old" "$STACK_TAG"
  echo "image $STACK_TAG: built in $(( $(date +%s) - start )) s"
}

case "$what" in
  base) BASE_IMAGE=$BASE_IMAGE "$here/base/build.sh" ;;
  node) build_node ;;
  stack) build_stack ;;
  all) "$here/base/build.sh"; build_node; build_stack ;;
  *) echo "images/build.sh: unknown image '$what': choose base, node, stack or all" >&2; exit 2 ;;
esac

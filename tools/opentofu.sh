#!/usr/bin/env bash
# Builds OpenTofu from the Go module proxy into $TOOLS_DIR/bin/tofu.
#
# `go install github.com/opentofu/opentofu/cmd/tofu@vX` refuses because
# OpenTofu's go.mod carries a `replace` directive (for its HCL fork). A
# throwaway module that requires OpenTofu and repeats the replace builds it.
set -euo pipefail

TOOLS_DIR=${TOOLS_DIR:?set TOOLS_DIR}
OPENTOFU_VERSION=${OPENTOFU_VERSION:-v1.12.6}
GOPROXY_URL=${GOPROXY_URL:-$(go env GOPROXY | tr ',' '\n' | grep -v -e '^direct$' -e '^off$' | head -n1)}
out="$TOOLS_DIR/bin/tofu"

if [[ -x "$out" ]] && "$out" version | grep -q "${OPENTOFU_VERSION#v}"; then
  echo "tofu $OPENTOFU_VERSION: present"
  exit 0
fi
command -v go >/dev/null || { echo "tools/opentofu.sh: Go is needed to build OpenTofu; install golang or put tofu/terraform on PATH" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "tofu $OPENTOFU_VERSION: building from the Go module proxy (several minutes)"
# Repeat every replace directive of OpenTofu's own go.mod.
replaces=$(curl -fsSL "$GOPROXY_URL/github.com/opentofu/opentofu/@v/$OPENTOFU_VERSION.mod" | grep '^replace ')
gover=$(go env GOVERSION | sed 's/^go//')
cat > "$work/go.mod" <<MOD
module hpcbench.local/tofubuild

go $gover

require github.com/opentofu/opentofu $OPENTOFU_VERSION

$replaces
MOD
cat > "$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
GO
cd "$work"
go mod tidy -e >/dev/null 2>&1 || true
go mod download github.com/opentofu/opentofu
mkdir -p "$TOOLS_DIR/bin"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/opentofu/opentofu/version.dev=no" \
  -o "$out.tmp" github.com/opentofu/opentofu/cmd/tofu
mv "$out.tmp" "$out"
"$out" version | head -n1

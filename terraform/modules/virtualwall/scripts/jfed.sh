#!/usr/bin/env bash
# Runs one jFed CLI 2 action file (java -jar experimenter-cli2.jar -a FILE).
#   jfed.sh ACTION_FILE
# Environment:
#   JFED_JAVA, JFED_JAR       the Java runtime and jFed's experimenter-cli2.jar
#   HPCBENCH_PEM_PASSWORD     password of the login PEM's key, if it has one: never
#                             a Terraform variable (it would land in saved plans)
#   JFED_LEASE                lease file of the slice (contract shared with
#                             `hpcbench destroy`): RUN writes it before jFed
#                             creates anything, DELETE removes it once jFed
#                             confirmed the delete
#   JFED_SLICE, JFED_DELETE   RUN: slice name and delete action the lease names
#   JFED_ANSIBLE_DIR, JFED_INVENTORY   RUN: where jFed writes its Ansible
#                             inventory, and the fixed name Terraform reads it from
set -euo pipefail
action=$1
java=${JFED_JAVA:-java}
jar=${JFED_JAR:?JFED_JAR is not set}
password=${HPCBENCH_PEM_PASSWORD:-}
kind=$(sed -n 's/^action: *\([A-Z]*\).*/\1/p' "$action" | head -n1)

if [[ ! -f "$jar" ]]; then
  echo "jFed CLI 2 not found at $jar: download jFed's CLI from https://jfed.ilabt.imec.be/downloads/, keep experimenter-cli2.jar inside its jfed_cli folder and set TF_VAR_jfed_cli_jar to its path" >&2
  exit 2
fi
pem=$(sed -n 's/^ *- "\(.*\)"$/\1/p' "$action" | head -n1)
if [[ -n "$pem" && ! -f "$pem" ]]; then
  echo "login PEM not found at $pem: download it from the imec portal and set TF_VAR_pem_path" >&2
  exit 2
fi
command -v "$java" >/dev/null || { echo "java not found ($java): install a Java 11+ runtime (apt-get install default-jre-headless)" >&2; exit 2; }

json_str() { # a JSON string literal (paths and names: no control characters)
  local s=${1//\\/\\\\}
  printf '"%s"' "${s//\"/\\\"}"
}

write_lease() { # atomically, 0600, before jFed may create anything
  local dir tmp delete
  dir=$(dirname "$JFED_LEASE")
  mkdir -p "$dir"
  chmod 700 "$dir"
  # The lease owns a copy of the delete action: `terraform destroy` removes the
  # one Terraform manages before `hpcbench destroy` runs the leftover leases.
  delete="${JFED_LEASE%.json}.delete.yaml"
  tmp=$(mktemp "$dir/.lease.XXXXXX") # mktemp creates it 0600
  cp "$JFED_DELETE" "$tmp"
  mv -f "$tmp" "$delete"
  tmp=$(mktemp "$dir/.lease.XXXXXX")
  printf '{"what": %s, "created": %s, "cancel": [%s, %s, %s, %s, %s]}\n' \
    "$(json_str "Virtual Wall slice $JFED_SLICE")" "$(json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)")" \
    "$(json_str env)" "$(json_str "JFED_JAVA=$java")" "$(json_str "JFED_JAR=$jar")" \
    "$(json_str "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")")" "$(json_str "$delete")" > "$tmp"
  mv -f "$tmp" "$JFED_LEASE"
}

if [[ "$kind" == RUN && -n "${JFED_LEASE:-}" ]]; then
  write_lease
fi

# The password reaches jFed in a copy of the action file that has no name on
# disk: the copy is created 0600 in a private 0700 folder, opened, and unlinked
# before anything is written to it; jFed opens it through /dev/fd/4 (a link of
# that name points there, so jFed still sees a .yaml path it can read as often
# as it likes). Once this script and jFed are gone, whatever killed them
# (Terraform stops local-exec with SIGKILL, and then no trap runs), the kernel
# frees the file: no password outlives them. What can stay behind after a
# SIGKILL is the folder with a dangling link, which holds no secret. Never in
# jFed's arguments or the action file Terraform keeps. jFed CLI 2 reads the
# key's password from the action file's user mapping; the key name `password`
# is assumed (no public jFed document shows it).
work=$(mktemp -d "${TMPDIR:-/tmp}/jfed.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
run="$work/action.yaml"
(umask 077 && : >"$run")
# shellcheck disable=SC2094 # one file, opened twice on purpose: 3 writes, 4 is what jFed reads
exec 3>"$run" 4<"$run"
rm -f "$run"
cat "$action" >&3
if [[ -n "$password" ]]; then
  # YAML single-quoted scalar: double any single quote. Appended to the user
  # mapping, which the action file puts last on purpose.
  printf "  password: '%s'\n" "${password//\'/\'\'}" >&3
fi
exec 3>&-
ln -s /dev/fd/4 "$run"

if ! "$java" -jar "$jar" -a "$run"; then
  if [[ "$kind" == RUN && -n "${JFED_LEASE:-}" ]]; then
    echo "jFed failed to create slice ${JFED_SLICE:-}; its lease $JFED_LEASE stays so that \`hpcbench destroy\` deletes whatever was made" >&2
  elif [[ "$kind" == DELETE && -n "${JFED_LEASE:-}" ]]; then
    echo "jFed could not confirm the delete; the lease $JFED_LEASE stays: run \`hpcbench destroy\` again" >&2
  fi
  exit 1
fi

if [[ "$kind" == DELETE && -n "${JFED_LEASE:-}" ]]; then
  rm -f "$JFED_LEASE" "${JFED_LEASE%.json}.delete.yaml" # confirmed: the slice is gone
fi

if [[ -n "${JFED_INVENTORY:-}" ]]; then
  # jFed names the inventory ansible-hosts (older releases: hosts); keep one copy
  # under a fixed name for Terraform to read back.
  for f in "$JFED_ANSIBLE_DIR/ansible-hosts" "$JFED_ANSIBLE_DIR/hosts" "$JFED_ANSIBLE_DIR"/*.ini; do
    if [[ -f "$f" ]]; then
      cp "$f" "$JFED_INVENTORY"
      exit 0
    fi
  done
  echo "jFed finished but wrote no Ansible inventory under $JFED_ANSIBLE_DIR" >&2
  exit 1
fi

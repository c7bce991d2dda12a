#!/usr/bin/env bash
# Runs one jFed CLI 2 action file. The PEM password never lands in the action
# file on disk: it is spliced into a private temporary copy for this run only.
#   jfed.sh ACTION_FILE            (create: also collects jFed's Ansible inventory)
# Environment: JFED_JAVA, JFED_JAR, JFED_PEM_PASSWORD (falls back to
# TF_VAR_pem_password, so destroy works without Terraform passing it),
# JFED_ANSIBLE_DIR and JFED_INVENTORY (create only).
set -euo pipefail
action=$1
java=${JFED_JAVA:-java}
jar=${JFED_JAR:?JFED_JAR is not set}
password=${JFED_PEM_PASSWORD:-${TF_VAR_pem_password:-}}

if [[ ! -f "$jar" ]]; then
  echo "jFed CLI 2 not found at $jar: download experimenter-cli2.jar from https://jfed.ilabt.imec.be/downloads/ and set TF_VAR_jfed_cli_jar to its path" >&2
  exit 2
fi
pem=$(sed -n 's/^ *- "\(.*\)"$/\1/p' "$action" | head -n1)
if [[ -n "$pem" && ! -f "$pem" ]]; then
  echo "login PEM not found at $pem: download it from the imec portal and set TF_VAR_pem_path" >&2
  exit 2
fi
command -v "$java" >/dev/null || { echo "java not found ($java): install a Java 11+ runtime (apt-get install default-jre-headless)" >&2; exit 2; }

run=$(mktemp "${TMPDIR:-/tmp}/jfed-action.XXXXXX.yaml")
trap 'rm -f "$run"' EXIT
chmod 600 "$run"
cp "$action" "$run"
if [[ -n "$password" ]]; then
  # YAML single-quoted scalar: double any single quote.
  printf "  password: '%s'\n" "${password//\'/\'\'}" >> "$run"
fi
"$java" -jar "$jar" -a "$run"

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

#!/usr/bin/env bash
# gpulab-cli steps for terraform_data:
#   gpulab.sh submit JOB_JSON ID_FILE STATE_FILE   submit, wait until running, save its state
#   gpulab.sh cancel ID_FILE                       cancel the job (destroy)
# Credentials come from the environment the CLI itself reads: GPULAB_CERT,
# GPULAB_PASSWORD (falls back to TF_VAR_pem_password so destroy needs nothing
# from Terraform), GPULAB_PROJECT.
set -euo pipefail
cli=${GPULAB_CLI:-gpulab-cli}
export GPULAB_PASSWORD=${GPULAB_PASSWORD:-${TF_VAR_pem_password:-}}
[[ -n "$GPULAB_PASSWORD" ]] || unset GPULAB_PASSWORD
# gpulab-cli refuses to start with https_proxy set (client-certificate TLS
# cannot pass an intercepting proxy), so it talks to GPULab directly.
unset https_proxy HTTPS_PROXY

command -v "$cli" >/dev/null || { echo "$cli not found: pip install imecilabt-gpulab-cli (or set TF_VAR_gpulab_cli)" >&2; exit 2; }
[[ -f "${GPULAB_CERT:-}" ]] || { echo "login PEM not found at ${GPULAB_CERT:-}: download it from the imec portal and set TF_VAR_pem_path" >&2; exit 2; }

case $1 in
  submit)
    job=$2 id_file=$3 state_file=$4
    # submit prints the job id on stdout; --wait-run reports progress on stderr.
    id=$("$cli" submit --project "$GPULAB_PROJECT" --wait-run "$job" | head -n1 | tr -d '[:space:]')
    [[ -n "$id" ]] || { echo "gpulab-cli submit returned no job id for $job" >&2; exit 1; }
    echo "$id" > "$id_file"
    "$cli" jobs "$id" --raw > "$state_file.tmp"
    mv "$state_file.tmp" "$state_file"
    ;;
  cancel)
    id_file=$2
    if [[ -s "$id_file" ]]; then
      "$cli" cancel "$(cat "$id_file")" || echo "gpulab-cli cancel failed; the job ends at its maxDuration anyway" >&2
      rm -f "$id_file"
    fi
    ;;
  *)
    echo "usage: $0 submit JOB_JSON ID_FILE STATE_FILE | cancel ID_FILE" >&2
    exit 2
    ;;
esac

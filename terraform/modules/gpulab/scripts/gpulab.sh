#!/usr/bin/env bash
# gpulab-cli steps for terraform_data:
#   gpulab.sh submit JOB_JSON LEASE STATE_FILE  submit; keep the job id in LEASE at once; wait
#                                               (bounded) until the job is RUNNING; save its state
#   gpulab.sh cancel LEASE                      destroy: run the cancel command LEASE holds
#   gpulab.sh cancel-job CLI PEM ID LEASE       what a lease's cancel runs: cancel the job, confirm
#                                               that it holds nothing, then remove LEASE
# Environment: GPULAB_CLI (default gpulab-cli), GPULAB_CERT (login PEM), GPULAB_PROJECT,
# HPCBENCH_PEM_PASSWORD (the PEM's password, if it has one), GPULAB_RUN_DEADLINE (seconds,
# default 3600), GPULAB_POLL_S (default 2, gpulab-cli's own interval: __main__.py:1555),
# GPULAB_CANCEL_CONFIRM_S (how long a cancel may take to show, default 60).
#
# Lease (shared with `hpcbench destroy`, which runs leftover leases' cancel):
#   <state_dir>/leases/<name>.json, mode 0600, written by rename:
#   {"what": "GPULab job <id>", "created": "<UTC>", "cancel": [argv]}
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
poll=${GPULAB_POLL_S:-2}
say() { echo "gpulab: $*" >&2; }

# gpulab-cli refuses to start with https_proxy set (__main__.py:2007-2012:
# client-certificate TLS cannot pass an intercepting proxy).
unset https_proxy HTTPS_PROXY
# The password reaches gpulab-cli the way it reads one: its `--password`
# option (__main__.py:343) from GPULAB_PASSWORD, since the CLI runs with
# auto_envvar_prefix="GPULAB" (__main__.py:2026). Never as an argument (ps).
if [[ -n "${HPCBENCH_PEM_PASSWORD:-}" ]]; then
  export GPULAB_PASSWORD=$HPCBENCH_PEM_PASSWORD
fi

need_cli() {
  local found
  found=$(command -v "$1") || { echo "$1 not found: pip install imecilabt-gpulab-cli (or set TF_VAR_gpulab_cli)" >&2; exit 2; }
  # A relative path would break once the lease is run from elsewhere.
  [[ $found == /* ]] || found="$PWD/$found"
  echo "$found"
}

need_pem() {
  [[ -f "$1" ]] || { echo "login PEM not found at $1: download it from the imec portal and set TF_VAR_pem_path" >&2; exit 2; }
  # Without a password an encrypted key makes OpenSSL prompt on the terminal
  # (apiclient.py:66, ssl load_cert_chain with password=None).
  if grep -q ENCRYPTED "$1" && [[ -z "${GPULAB_PASSWORD:-}" ]]; then
    echo "login PEM $1 is encrypted: export HPCBENCH_PEM_PASSWORD='<its password>'" >&2
    exit 2
  fi
}

# `jobs ID --raw` prints the job as GPULab returns it (__main__.py:1396);
# state.status is always upper case (schemas/job2.py:1212-1215).
job_status() {
  "$cli" jobs "$1" --raw | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"]["status"])'
}

write_lease() {  # LEASE ID
  local tmp
  mkdir -p "$(dirname "$1")"
  chmod 700 "$(dirname "$1")"
  tmp=$(mktemp "$1.XXXXXX")  # mode 0600
  python3 - "$tmp" "$2" "$self" "$cli" "$GPULAB_CERT" "$1" <<'EOF'
import json, sys, datetime
tmp, job_id, script, cli, pem, lease = sys.argv[1:]
created = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
with open(tmp, "w") as f:
    json.dump({"what": f"GPULab job {job_id}", "created": created,
               "cancel": [script, "cancel-job", cli, pem, job_id, lease]}, f)
    f.write("\n")
EOF
  mv -f "$tmp" "$1"
}

# Cancel ID; the lease goes only once GPULab says the job holds nothing.
cancel_job() {  # ID LEASE
  local id=$1 lease=$2 status="" deadline=$((SECONDS + ${GPULAB_CANCEL_CONFIRM_S:-60}))
  "$cli" cancel "$id" >/dev/null || say "gpulab-cli cancel $id failed; checking the job's state"
  while ((SECONDS < deadline)); do
    status=$(job_status "$id" 2>/dev/null) || status="unknown"
    case $status in
      CANCELLED | FINISHED | FAILED | DELETED | HALTED)
        rm -f "$lease"
        return 0 ;;
    esac
    sleep "$poll"
  done
  echo "GPULab job $id is still $status after cancel: cancel it with \`gpulab-cli cancel $id\` (lease kept: $lease)" >&2
  return 1
}

case ${1:-} in
  submit)
    job=$2 lease=$3 state_file=$4
    cli=$(need_cli "${GPULAB_CLI:-gpulab-cli}")
    need_pem "${GPULAB_CERT:-}"
    # No --wait-run: it returns 0 whatever state the job leaves the queue in
    # (__main__.py:1577-1592, also after "Error fetching job info", 1585), and the id
    # must be kept before anything waits.
    out=$("$cli" submit --project "$GPULAB_PROJECT" "$job")
    id=$(grep -oiE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}' <<<"$out" | head -n1) || true
    [[ -n "$id" ]] || { echo "gpulab-cli submit returned no job id for $job: $out" >&2; exit 1; }
    write_lease "$lease" "$id"
    # Interrupted while waiting: cancel now; the lease stays if that fails.
    trap 'trap - INT TERM; say "interrupted: cancelling job $id"; cancel_job "$id" "$lease"; exit 130' INT TERM
    deadline=$((SECONDS + ${GPULAB_RUN_DEADLINE:-3600}))
    last="" last_seen=""
    while :; do
      last_seen=$last
      if status=$(job_status "$id"); then
        [[ $status == "$last" ]] || say "job $id ($(basename "$job")): $status"
        last=$status
      else
        say "job $id: no state from gpulab-cli jobs (retrying)"
      fi
      case $status in
        # RUNNING twice in a row: a job whose command dies at once (a missing
        # program, a bad image) shows RUNNING for a moment first.
        RUNNING) if [[ $last_seen == RUNNING ]]; then break; fi ;;
        ONHOLD | QUEUED | ASSIGNED | STARTING | "") ;;
        *)
          # FAILED / FINISHED / CANCELLED / ...: the job will never serve.
          log=$("$cli" log "$id" 2>/dev/null | tail -n 5 | tr '\n' ' ') || log=""
          # The exit code, where GPULab's events name one (their wording is
          # not in the client code: matched loosely).
          code=$("$cli" debug "$id" 2>/dev/null | grep -oiE 'exit(ed)? (with )?code -?[0-9]+' | tail -n1 | grep -oE -- '-?[0-9]+$') || code=""
          # The cause is said last, after the clean-up's own lines: hpcbench names a
          # failed module script by its last line (hpcbench/testbeds/terraform.py).
          cancel_job "$id" "$lease" || true
          echo "GPULab job $id is $status${code:+ (exit code $code)}, not RUNNING (gpulab-cli log $id: ${log:-empty}; gpulab-cli debug $id)" >&2
          exit 1 ;;
      esac
      if ((SECONDS >= deadline)); then
        say "job $id still ${status:-unknown} after ${GPULAB_RUN_DEADLINE:-3600} s: cancelling it"
        cancel_job "$id" "$lease" || true
        echo "GPULab job $id still ${status:-unknown} after ${GPULAB_RUN_DEADLINE:-3600} s (TF_VAR_start_timeout); it was cancelled" >&2
        exit 1
      fi
      sleep "$poll"
    done
    trap - INT TERM
    "$cli" jobs "$id" --raw > "$state_file.tmp"
    mv "$state_file.tmp" "$state_file"
    ;;
  cancel)
    lease=$2
    [[ -f "$lease" ]] || exit 0
    mapfile -t argv < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["cancel"]))' "$lease")
    exec "${argv[@]}"
    ;;
  cancel-job)
    cli=$(need_cli "$2")
    export GPULAB_CERT=$3
    need_pem "$GPULAB_CERT"
    cancel_job "$4" "$5"
    ;;
  *)
    echo "usage: $0 submit JOB_JSON LEASE STATE_FILE | cancel LEASE | cancel-job CLI PEM ID LEASE" >&2
    exit 2
    ;;
esac

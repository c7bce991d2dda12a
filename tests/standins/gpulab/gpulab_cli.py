"""A stand-in for imec GPULab's `gpulab-cli` (PyPI imecilabt-gpulab-cli 3.11.12) that runs
the jobs on the local Docker engine. For tests only: never offered as a testbed.

Every behaviour cites the real client (`__main__.py`, `apiclient.py` of
imecilabt/gpulab/cli) or GPULab's job model (`schemas/job2.py` of
imecilabt-gpulab-common 6.0.16); what the client code cannot show (the master
and worker side) is marked "assumed" with the reason.

State lives in $GPULAB_STANDIN_DIR (jobs/<uuid>.json, one lock). There is no
daemon: every command first lets the "master" move jobs on (start queued jobs,
notice exited containers), so a job advances between two calls as it would
between two polls of the real CLI. $GPULAB_STANDIN_SLOTS (default: unlimited)
is how many jobs may run at once; 0 keeps every job QUEUED (a full cluster).
Jobs ask for GPUs; the stand-in's worker has none and passes no device (CPU only).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import ssl
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import docker
from imecilabt.gpulab.schemas.job2 import Job, JobStatus, NewJobV4CLI

LABEL = "org.hpcbench.gpulab-standin"
USER_URN = (
    "urn:publicid:IDN+ilabt.imec.be+user+standin"  # assumed: read from the PEM by the real CLI
)
RUNNING_LIKE = {JobStatus.ASSIGNED, JobStatus.STARTING, JobStatus.RUNNING}
# Statuses that stop --wait-run waiting (__main__.py:1577-1579 waits while one of these).
QUEUED_LIKE = {JobStatus.QUEUED, JobStatus.ASSIGNED, JobStatus.STARTING}
ENDED = {
    JobStatus.FINISHED,
    JobStatus.FAILED,
    JobStatus.CANCELLED,
    JobStatus.DELETED,
    JobStatus.HALTED,
}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_dir() -> Path:
    d = Path(os.environ.get("GPULAB_STANDIN_DIR", Path.home() / ".cache/hpcbench/gpulab-standin"))
    (d / "jobs").mkdir(parents=True, exist_ok=True)
    return d


def standin_id(d: Path) -> str:
    """Names of this stand-in's containers and network (one per state dir)."""
    return hashlib.sha256(str(d.resolve()).encode()).hexdigest()[:10]


@contextlib.contextmanager
def locked(d: Path) -> Iterator[None]:
    with open(d / "lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def load(d: Path, job_id: str) -> dict[str, Any] | None:
    path = d / "jobs" / f"{job_id}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def save(d: Path, rec: dict[str, Any]) -> None:
    # Every job the stand-in reports passes GPULab's own model: the real CLI
    # validates what the master sends (__main__.py:1559, Job2.model_validate).
    Job.model_validate(rec["job"])
    path = d / "jobs" / f"{rec['job']['uuid']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(rec, indent=2))
    path.with_suffix(".tmp").replace(path)


def event(
    rec: dict[str, Any], kind: str, msg: str | None = None, status: str | None = None
) -> None:
    # Shape of schemas/job_event.py JobEvent (what `gpulab-cli debug` shows).
    rec.setdefault("events", []).append(
        {"jobId": rec["job"]["uuid"], "type": kind, "time": now(), "newState": status, "msg": msg}
    )


def set_status(rec: dict[str, Any], status: JobStatus) -> None:
    t = now()
    state = rec["job"]["state"]
    # Always upper case on the wire (schemas/job2.py:1212-1215).
    state["status"] = status.name
    state["eventTimes"]["statusUpdated"] = t
    if status.name in {
        "QUEUED",
        "ASSIGNED",
        "STARTING",
        "RUNNING",
        "FINISHED",
        "FAILED",
        "CANCELLED",
        "DELETED",
        "MUSTHALT",
        "HALTING",
        "HALTED",
    }:
        state["eventTimes"][status.name] = t
    event(rec, "STATUS_CHANGE", status=status.name)


def engine() -> docker.DockerClient:
    return docker.from_env(timeout=60)


def network(client: docker.DockerClient, d: Path) -> tuple[str, str]:
    """The stand-in's network and this machine's address on it (its gateway).

    Each job is its own worker: `slaveHost` is the container's address there,
    so that jobs reach each other directly. Assumed (docs/testbeds.md, the
    10x1 caveat): whether real GPULab jobs on different workers reach each
    other beyond their published ports is not known from the client. The
    published ports are bound to the gateway address only (reported as
    `hostIp`), not to every interface of this machine.
    """
    name = f"gpulab-standin-{standin_id(d)}"
    try:
        net = client.networks.get(name)
    except docker.errors.NotFound:
        net = client.networks.create(name, driver="bridge", labels={LABEL: standin_id(d)})
    net.reload()
    gateway = net.attrs["IPAM"]["Config"][0]["Gateway"]
    return name, gateway


def storage_mounts(
    d: Path, rec: dict[str, Any]
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Volumes and tmpfs mounts for request.docker.storage.

    PROJECT_SHARE_AUTO is the project's share wherever the job runs
    (schemas/job2.py:873-875; what gpulab-cli mounts itself, __main__.py:768);
    tmpfs entries carry sizeGb (schemas/job2.py:800-805). Other host paths
    are the worker's own directories: here a directory under the state dir,
    never this machine's path of that name.
    """
    project = rec["project"]
    volumes: dict[str, dict[str, str]] = {}
    tmpfs: dict[str, str] = {}
    for entry in rec["job"]["request"]["docker"].get("storage") or []:
        if isinstance(entry, str):  # a bare string is {"hostPath": s} (job2.py:907-910)
            entry = {"hostPath": entry}
        # The CLI sends paths as the model normalises them, with a trailing
        # "/" (schemas/job2.py:796-797, 822; __main__.py:948).
        host = (entry.get("hostPath") or entry.get("containerPath")).rstrip("/") or "/"
        container = entry.get("containerPath") or host
        if host == "tmpfs":
            tmpfs[container] = f"size={entry['sizeGb']}g"
            continue
        if host == "PROJECT_SHARE_AUTO":
            src = d / "projects" / project
        else:
            src = d / "worker" / host.strip("/")
        src.mkdir(parents=True, exist_ok=True)
        volumes[str(src)] = {"bind": container.rstrip("/") or "/", "mode": "rw"}
    return volumes, tmpfs


def start(client: docker.DockerClient, d: Path, rec: dict[str, Any], worker_id: int) -> None:
    """Start a queued job as GPULab's worker does, on this Docker engine."""
    job = rec["job"]
    req = job["request"]
    res, dk = req["resources"], req["docker"]
    net, gateway = network(client, d)
    set_status(rec, JobStatus.ASSIGNED)
    set_status(rec, JobStatus.STARTING)
    # GPULAB_* variables the job sees: the names the real CLI strips from its
    # own environment because workers set them (__main__.py:1984-2003);
    # the values are assumed (what each name says).
    env = {
        str(k): str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in (dk.get("environment") or {}).items()
    }
    env.update(
        {
            "GPULAB_JOB_ID": job["uuid"],
            "GPULAB_PROJECT": rec["project"],
            "GPULAB_USER_URN": USER_URN,
            "GPULAB_USERNAME": "standin",
            "GPULAB_CLUSTER_ID": "1",
            "GPULAB_WORKER_ID": str(worker_id),
            "GPULAB_SLAVE_HOSTNAME": "standin-worker",
            "GPULAB_SLAVE_DNSNAME": "standin-worker",
            "GPULAB_GPUS_RESERVED": str(res["gpus"]),
            "GPULAB_CPUS_RESERVED": str(res["cpus"]),
            "GPULAB_MEM_RESERVED": str(res["cpuMemoryGb"]),
            "GPULAB_DEPLOYMENT_ENVIRONMENT": "production",
        }
    )
    ports = {
        f"{int(p['containerPort'] if isinstance(p, dict) else p)}/tcp": (gateway, None)
        for p in dk.get("portMappings") or []
    }
    volumes, tmpfs = storage_mounts(d, rec)
    name = f"gpulab-standin-{standin_id(d)}-{job['uuid'][:8]}"
    rec["container"] = name
    try:
        # `command` exactly as written: docker-py runs a list as argv and splits
        # a string into words with shlex, no shell (schemas/job2.py:917-923:
        # "dockerpy container.run directly accepts the same 2 types").
        client.containers.run(
            dk["image"],
            command=dk.get("command") or None,
            name=name,
            detach=True,
            environment=env,
            ports=ports,
            volumes=volumes,
            tmpfs=tmpfs,
            network=net,
            hostname=f"gpulab-{job['uuid'][:8]}",
            working_dir=dk.get("workingDir"),
            user=dk.get("user"),
            labels={LABEL: standin_id(d)},
            nano_cpus=int(min(res["cpus"], os.cpu_count() or 1) * 1e9),
            mem_limit=f"{res['cpuMemoryGb']}g",
        )
    except docker.errors.DockerException as err:
        # Assumed: a job whose container cannot start is FAILED, with the reason
        # among its debug events (schemas/job2.py:117-118 "Failure due to job
        # definition problem, system problems, or other").
        event(rec, "ERROR", f"container did not start: {err}")
        set_status(rec, JobStatus.FAILED)
        return
    container = client.containers.get(name)
    address = container.attrs["NetworkSettings"]["Networks"][net]["IPAddress"]
    mappings = []
    for key, bound in (container.attrs["NetworkSettings"]["Ports"] or {}).items():
        for b in bound or []:
            mappings.append(
                {
                    "containerPort": int(key.split("/")[0]),
                    "hostPort": int(b["HostPort"]),
                    "hostIp": b["HostIp"],
                }
            )
    job["state"]["resources"] = {
        "clusterId": 1,
        "gpuIds": list(range(res["gpus"])),
        "cpuIds": list(range(res["cpus"])),
        "cpuMemoryGb": res["cpuMemoryGb"],
        "gpuMemoryGb": 0,
        "slaveName": "standin-worker",
        "slaveHost": address,
        "slaveInstanceId": f"standin-{standin_id(d)}",
        "slaveInstancePid": os.getpid(),
        "workerId": worker_id,
        "portMappings": mappings,
    }
    set_status(rec, JobStatus.RUNNING)


def refresh(client: docker.DockerClient, rec: dict[str, Any]) -> None:
    """A running job whose container exited is FINISHED (exit 0) or FAILED."""
    try:
        container = client.containers.get(rec["container"])
    except docker.errors.NotFound:
        event(rec, "ERROR", "container disappeared")
        set_status(rec, JobStatus.FAILED)
        return
    if container.status in ("exited", "dead"):
        code = container.attrs["State"]["ExitCode"]
        rec["exitCode"] = code
        # Assumed wording: the master's events are not in the client code.
        event(rec, "INFO" if code == 0 else "ERROR", f"container exited with code {code}")
        set_status(rec, JobStatus.FINISHED if code == 0 else JobStatus.FAILED)


def schedule(d: Path) -> None:
    """The master's turn: notice ended containers, start queued jobs that fit."""
    recs = [json.loads(p.read_text()) for p in sorted((d / "jobs").glob("*.json"))]
    live = [r for r in recs if JobStatus(r["job"]["state"]["status"]) in RUNNING_LIKE]
    queued = [r for r in recs if r["job"]["state"]["status"] == "QUEUED"]
    if not live and not queued:
        return
    client = engine() if live or os.environ.get("GPULAB_STANDIN_SLOTS") != "0" else None
    for rec in live:
        refresh(client, rec)
        save(d, rec)
    slots = os.environ.get("GPULAB_STANDIN_SLOTS")
    running = sum(JobStatus(r["job"]["state"]["status"]) in RUNNING_LIKE for r in recs)
    for rec in sorted(queued, key=lambda r: r["job"]["state"]["eventTimes"]["created"]):
        cpus = rec["job"]["request"]["resources"]["cpus"]
        if slots is not None and running >= int(slots):
            why = "no free slot on any worker"
        elif cpus > (os.cpu_count() or 1):
            why = f"no worker has {cpus} CPUs"
        else:
            assert client is not None
            start(client, d, rec, worker_id=running)
            running += 1
            save(d, rec)
            continue
        # queuedExplanations: schemas/job2.py JobStateScheduling.
        if rec["job"]["state"]["scheduling"].get("queuedExplanations") != [why]:
            rec["job"]["state"]["scheduling"]["queuedExplanations"] = [why]
            save(d, rec)


def master(job_id: str | None = None) -> tuple[Path, dict[str, Any] | None]:
    d = state_dir()
    with locked(d):
        schedule(d)
        return d, load(d, job_id) if job_id else None


def check_login(cert: str, password: str | None) -> None:
    """What building the API client does with the PEM (apiclient.py:63-78, __main__.py:446-464)."""
    if not os.path.isfile(cert):
        raise click.ClickException(f"The certificate file cannot be found ('{cert}').")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        # keyfile = certfile: the login PEM holds both (__main__.py:417).
        context.load_cert_chain(certfile=cert, keyfile=cert, password=password)
    except ssl.SSLError as err:
        if "password" in str(err).lower() or "bad decrypt" in str(err).lower():
            raise click.ClickException(
                "The certificate is encrypted. You need to specify the correct password."
            ) from err
        raise click.ClickException(
            "Something went wrong trying to setup the SSL parameters."
        ) from err
    except OSError as err:  # errno 22: bad password (apiclient.py:73-76)
        raise click.ClickException(
            "The certificate is encrypted. You need to specify the correct password."
        ) from err


def login_keys(cert: str) -> list[str]:
    """extra.sshPubKeys as gpulab-cli sends them: the PEM's RSA key plus
    ~/.ssh/id_*.pub (__main__.py:683-703), replacing the file's (__main__.py:907-911)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

    keys = []
    pub = x509.load_pem_x509_certificate(Path(cert).read_bytes()).public_key()
    if isinstance(pub, RSAPublicKey):
        keys.append(
            pub.public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            ).decode()
        )
    for name in ("id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"):
        path = Path.home() / ".ssh" / name
        if path.exists():
            keys.append(path.read_text().strip(" \t\r\n"))
    return keys


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--cert",
    type=click.Path(readable=True),
    envvar="GPULAB_CERT",
    required=True,
    help="Login certificate",
)  # __main__.py:342
@click.option(
    "-p", "--password", type=click.STRING, help="Password associated with the login certificate"
)  # __main__.py:343
@click.pass_context
def cli(ctx: click.Context, cert: str, password: str | None) -> None:
    ctx.obj = {"cert": cert, "password": password}


def login(ctx: click.Context) -> None:
    check_login(ctx.obj["cert"], ctx.obj["password"])


def wait_for_run(job_id: str, wait_done: bool) -> None:
    """actual_wait (__main__.py:1511-1592, 1594-1650): poll every 2 s while QUEUED/ASSIGNED/
    STARTING, then say "Job is now running" whatever the state is, exit 0."""
    print("Waiting for Job to start running...", file=sys.stderr)
    prev = None
    while True:
        time.sleep(2)
        _, rec = master(job_id)
        if rec is None:
            print("Error fetching job info. Give up waiting.", file=sys.stderr)
            return
        status = JobStatus(rec["job"]["state"]["status"])
        if status != prev:
            print(f"Job is in state {status.name}", file=sys.stderr)
        prev = status
        if status not in QUEUED_LIKE:
            break
    print("Job is now running", file=sys.stderr)
    if wait_done:
        print("Waiting for Job to finish...", file=sys.stderr)
        while True:
            time.sleep(2)
            _, rec = master(job_id)
            if rec is None:
                print("Error fetching job info. Give up waiting.", file=sys.stderr)
                return
            status = JobStatus(rec["job"]["state"]["status"])
            if status not in {
                JobStatus.STARTING,
                JobStatus.RUNNING,
                JobStatus.MUSTHALT,
                JobStatus.HALTING,
            }:
                break
        print("Job has finished", file=sys.stderr)


@cli.command("submit")
@click.option("--project", envvar="GPULAB_PROJECT", required=False)  # __main__.py:804-807
@click.option("--wait-run", is_flag=True)
@click.option("--wait-done", is_flag=True)
@click.option("--email-queued", is_flag=True)
@click.option("--email-run", is_flag=True)
@click.option("--email-done", is_flag=True)
@click.option("--hold", is_flag=True)
@click.option("--ssh-pub-key", multiple=True)
@click.argument("job_file", type=click.File("r"), default="-")
@click.pass_context
def submit(
    ctx: click.Context,
    project: str | None,
    wait_run: bool,
    wait_done: bool,
    email_queued: bool,
    email_run: bool,
    email_done: bool,
    hold: bool,
    ssh_pub_key: tuple[str, ...],
    job_file: Any,
) -> None:
    login(ctx)
    # actual_run (__main__.py:826-862): the file must parse as NewJobV4CLI.
    try:
        data = json.loads(job_file.read())
        data["deploymentEnvironment"] = "production"
        if data.get("owner", {}).get("projectUrn") and not project:
            project = data["owner"]["projectUrn"].rsplit("+", 1)[-1]
        data.pop("owner", None)
        new = NewJobV4CLI.model_validate(data)
    except Exception as err:
        if os.environ.get("GPULAB_STANDIN_DEBUG"):
            print(err, file=sys.stderr)
        raise click.ClickException(
            "Could not parse provided Job (Use `gpulab-cli --debug submit ...` for more details)"
        ) from err
    if not project:
        raise click.ClickException(
            "--project is mandatory if not specified in job.owner.projectUrn"
        )
    request = new.request.model_dump(mode="json", exclude_none=True)
    request.setdefault("extra", {})["sshPubKeys"] = login_keys(ctx.obj["cert"]) + list(ssh_pub_key)
    sched = request.setdefault("scheduling", {})
    # Assumed: the master fills what JobRequestScheduling requires (a stored
    # job has both durations) from the request or its defaults.
    sched.setdefault("maxDuration", "4h")
    sched.setdefault("minDuration", sched["maxDuration"])
    job_id = str(uuid.uuid4())
    t = now()
    rec: dict[str, Any] = {
        "project": project,
        "job": {
            "uuid": job_id,
            "name": new.name,
            "description": new.description,
            "deploymentEnvironment": "production",
            "request": request,
            "owner": {
                "projectUrn": f"urn:publicid:IDN+ilabt.imec.be+project+{project}",
                "userUrn": USER_URN,
                "userEmail": "standin@example.org",
            },
            "state": {
                "status": "QUEUED",
                "scheduling": {},
                "eventTimes": {"created": t, "statusUpdated": t},
            },
        },
    }
    set_status(rec, JobStatus.ONHOLD if hold else JobStatus.QUEUED)
    d = state_dir()
    with locked(d):
        save(d, rec)
    # The id on stdout as soon as the master has the job (__main__.py:950-952).
    print(job_id, flush=True)
    if wait_run or wait_done:
        wait_for_run(job_id, wait_done)


@cli.command("jobs")
@click.argument("job_id", required=False)
@click.option("-r", "--raw", is_flag=True)
@click.pass_context
def jobs(ctx: click.Context, job_id: str | None, raw: bool) -> None:
    login(ctx)
    if job_id is None:
        d, _ = master()
        items = [json.loads(p.read_text())["job"] for p in sorted((d / "jobs").glob("*.json"))]
        print(
            json.dumps(items, indent=4)
            if raw
            else "\n".join(f"{j['uuid']} {j['name'][:20]:20} {j['state']['status']}" for j in items)
        )
        return
    _, rec = master(job_id)
    if rec is None:  # __main__.py:1496
        raise click.ClickException(f"Could not retrieve info for job '{job_id}': not found")
    job = rec["job"]
    if raw:  # __main__.py:1395-1396
        print(json.dumps(job, indent=4))
        return
    print("{:>15}: {}".format("Job ID", job["uuid"]))
    print("{:>15}: {}".format("Name", job["name"]))
    print("{:>15}: {}".format("Status", job["state"]["status"]))


@cli.command("cancel")
@click.argument("job_id")
@click.pass_context
def cancel(ctx: click.Context, job_id: str) -> None:
    login(ctx)
    d = state_dir()
    with locked(d):
        schedule(d)
        rec = load(d, job_id)
        # Assumed: the master refuses to cancel an unknown or ended job (the
        # client only shows the refusal, __main__.py:1091-1094).
        if rec is None:
            raise click.ClickException(f"Error while cancelling job: no job {job_id}")
        if JobStatus(rec["job"]["state"]["status"]) in ENDED:
            raise click.ClickException(
                f"Error while cancelling job: job is {rec['job']['state']['status']}"
            )
        if rec.get("container"):
            with contextlib.suppress(docker.errors.NotFound):
                engine().containers.get(rec["container"]).stop(timeout=5)
        set_status(rec, JobStatus.CANCELLED)
        save(d, rec)
    print(job_id)  # __main__.py:1091-1092


@cli.command("log")
@click.argument("job_id")
@click.option("-f", "--follow", is_flag=True)
@click.pass_context
def log(ctx: click.Context, job_id: str, follow: bool) -> None:
    login(ctx)
    _, rec = master(job_id)
    if rec is None:
        raise click.ClickException(f"Error while fetching log for {job_id}: not found")
    text = b""
    if rec.get("container"):
        with contextlib.suppress(docker.errors.NotFound):
            text = engine().containers.get(rec["container"]).logs()
    if not text:  # 204 No content (__main__.py:1207-1211)
        click.secho("No log data available (yet?)", err=True)
        return
    for line in text.decode(errors="replace").splitlines():
        click.echo(line)


@cli.command("debug")
@click.argument("job_id")
@click.option("-r", "--raw", is_flag=True)
@click.pass_context
def debug(ctx: click.Context, job_id: str, raw: bool) -> None:
    login(ctx)
    _, rec = master(job_id)
    if rec is None:
        raise click.ClickException(f"Error while fetching events for {job_id}: not found")
    events = rec.get("events", [])
    if raw:
        print(json.dumps(events, indent=4))
        return
    for e in events:
        if e["type"] == "STATUS_CHANGE":
            print(f"{e['time']} STATE CHANGED -> {e['newState']}")
        else:
            print(f"{e['time']} LOG {e['type']}: {e['msg']}")


@cli.command("wait")
@click.argument("job_id")
@click.option("--wait-run", is_flag=True)
@click.option("--wait-done", is_flag=True)
@click.pass_context
def wait(ctx: click.Context, job_id: str, wait_run: bool, wait_done: bool) -> None:
    login(ctx)
    if not wait_run and not wait_done:  # __main__.py:1507-1508
        raise click.ClickException("At least one of --wait-run or --wait-done is required")
    wait_for_run(job_id, wait_done)


def purge(d: Path) -> list[str]:
    """Tests' clean-up: remove this stand-in's containers and network; names the
    containers that were still running."""
    client = engine()
    still = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}={standin_id(d)}"}):
        if c.status == "running":
            still.append(c.name)
        c.remove(force=True)
    for n in client.networks.list(filters={"label": f"{LABEL}={standin_id(d)}"}):
        n.remove()
    return still


def main() -> None:
    # The real CLI refuses an https_proxy (__main__.py:2007-2012).
    if os.environ.get("https_proxy"):
        print('Error: You have the "https_proxy" environment variable set.', file=sys.stderr)
        sys.exit(1)
    # Options read GPULAB_<NAME> (__main__.py:2026), e.g. GPULAB_PASSWORD.
    cli(auto_envvar_prefix="GPULAB")


if __name__ == "__main__":
    main()

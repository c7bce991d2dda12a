"""A stand-in for jFed CLI 2 (`java -jar experimenter-cli2.jar -a ACTION.yaml`)
that creates a Virtual Wall slice as Docker containers on this machine.

For tests only (tests/e2e/test_campaign.py, test_virtualwall.py); never offered to users as a
testbed. It encodes only what public material shows, and says "assumed" where
it had to choose:

- Action files: keys and values as in jFed's published CLI 2 examples
  (SolidLabResearch/solidlab-env-setup, rspec/{{cookiecutter.rspec_name}}/
  jfed-cli2-run-rspec.yaml: action RUN, deleteOn, experiment.requestRSpec
  {source: PROVIDE_FILE, providedContentSource}, experiment.slice {project,
  sliceName, expireTimeMin}, waitForReady.maxTimeMin, output.ansibleDir,
  user.pem). jFed writes its Ansible inventory `ansible-hosts` into
  output.ansibleDir (same repository, README-jFed-cli-rspec.md, step 4:
  `ansible-playbook --inventory=.../ansible-hosts`).
- RSpec: ProtoGENI v3 request (one <node> per machine, raw-pc, disk_image,
  <services><execute shell command>, <interface><ip address netmask>, <link>
  of type lan joining interface_refs, capacity in kbit/s on <property>).
- <execute> runs as the experimenter's own user, not root, and after the node
  is reported ready: Emulab's runstartup switches to the user's UID before it
  runs the startup command, asynchronously to the AM's ready state
  (docs/testbeds.md, Virtual Wall section); real Virtual Wall RSpecs
  therefore put `sudo` inside the command (e.g. Sebastiaan149/benchmark-jfed,
  rspec/wall1-four-pcgen07-1p-ubuntu24.rspec). The experimenter has
  passwordless sudo on the node (assumed from those RSpecs: their commands run
  sudo without a terminal).
- Component managers: wall1 is urn:publicid:IDN+wall1.ilabt.imec.be+authority+cm,
  wall2 urn:publicid:IDN+wall2.ilabt.iminds.be+authority+cm (current RSpecs of
  both); that any other wall URN is refused is assumed.

Node = one container from the node image (systemd, sshd: a bare machine), on a
control network (ssh published on 127.0.0.1) and one network per <link> with
the RSpec's addresses; the link is shaped to its capacity with tc tbf inside
each container (the testbed's switch does it on the real Virtual Wall).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

NS = {"r": "http://www.geni.net/resources/rspec/3"}
KNOWN_CMS = {
    "urn:publicid:IDN+wall1.ilabt.imec.be+authority+cm": "wall1.ilabt.imec.be",
    "urn:publicid:IDN+wall2.ilabt.iminds.be+authority+cm": "wall2.ilabt.iminds.be",
}
LABEL = "org.hpcbench.jfed-standin.slice"
PREFIX = "jfedsi"
NODE_IMAGE = os.environ.get("JFED_STANDIN_NODE_IMAGE", "hpcbench/node:latest")
# Experimenter account on every node (on the real testbed: your portal login).
EXPERIMENTER = os.environ.get("JFED_STANDIN_USER", "jfeduser")
# Seconds between "ready" and the start of <execute> (assumed: the real delay
# varies; a few seconds make a caller that does not wait fail reliably).
EXECUTE_DELAY_S = float(os.environ.get("JFED_STANDIN_EXECUTE_DELAY_S", "5"))
# Directories that get a volume of their own on every node. A real node's disk
# is an ordinary filesystem; a container's root is overlayfs, which
# nfs-ganesha's VFS backend cannot export (no file handles), so the directory
# the head exports (the Ansible shared_dir) lives on a volume here.
DISK_DIRS = os.environ.get("JFED_STANDIN_DISK_DIRS", "/shared").split()


class StandinError(Exception):
    """What jFed would report before giving up; exit status 1."""


@dataclass
class Node:
    client_id: str
    cm: str
    image: str
    executes: list[tuple[str, str]]  # (shell, command)
    ips: dict[str, tuple[str, str]]  # interface client_id -> (address, netmask)


@dataclass
class Link:
    client_id: str
    interfaces: list[str]
    capacity_kbps: int | None
    kind: str


@dataclass
class Request:
    nodes: list[Node]
    links: list[Link] = field(default_factory=list)


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise StandinError(f"docker {' '.join(args[:2])}: {proc.stderr.strip()}")
    return proc


def say(msg: str) -> None:
    print(f"[jfed-standin] {msg}", flush=True)


# ------------------------------------------------------------------ parsing


def load_action(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise StandinError(f"cannot read action file {path}: {err}") from err
    if not isinstance(data, dict) or data.get("action") not in {"RUN", "DELETE"}:
        raise StandinError(f"{path}: action must be RUN or DELETE")
    pems = (data.get("user") or {}).get("pem") or []
    if not pems or not all(Path(p).is_file() for p in pems):
        raise StandinError(f"{path}: user.pem must list your login PEM file")
    return data


def slice_of(action: dict[str, Any]) -> tuple[str, str]:
    where = action["experiment"]["slice"] if action["action"] == "RUN" else action["slice"]
    project, name = where.get("project"), where.get("sliceName")
    if not project or not name:
        raise StandinError("the action file names no project or sliceName")
    return str(project), str(name)


def parse_rspec(path: Path) -> Request:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        raise StandinError(f"request RSpec {path}: {err}") from err
    if root.get("type") != "request":
        raise StandinError(f"{path}: not a request RSpec")
    nodes = []
    for el in root.findall("r:node", NS):
        cm = el.get("component_manager_id", "")
        if cm not in KNOWN_CMS:
            raise StandinError(f"node {el.get('client_id')}: unknown component manager {cm!r}")
        sliver = el.find("r:sliver_type", NS)
        if sliver is None or sliver.get("name") != "raw-pc":
            raise StandinError(f"node {el.get('client_id')}: only raw-pc slivers are stood in for")
        disk = sliver.find("r:disk_image", NS)
        image = disk.get("name", "") if disk is not None else ""
        if image and f"+{KNOWN_CMS[cm]}+image+" not in image:
            raise StandinError(f"node {el.get('client_id')}: disk image {image} is not of {cm}")
        executes = [
            (e.get("shell", "sh"), e.get("command", ""))
            for e in el.findall("r:services/r:execute", NS)
        ]
        ips = {}
        for iface in el.findall("r:interface", NS):
            ip = iface.find("r:ip", NS)
            if ip is not None:
                ips[iface.get("client_id", "")] = (ip.get("address", ""), ip.get("netmask", ""))
        nodes.append(Node(el.get("client_id", ""), cm, image, executes, ips))
    links = []
    for el in root.findall("r:link", NS):
        caps = {int(p.get("capacity", "0")) for p in el.findall("r:property", NS)}
        kind = el.find("r:link_type", NS)
        links.append(
            Link(
                el.get("client_id", ""),
                [r.get("client_id", "") for r in el.findall("r:interface_ref", NS)],
                min(caps) if caps else None,
                kind.get("name", "") if kind is not None else "",
            )
        )
    if not nodes:
        raise StandinError(f"{path}: no <node>")
    return Request(nodes, links)


# ------------------------------------------------------------------ docker


def slice_label(project: str, name: str) -> str:
    return f"{project}/{name}"


def container_name(slice_name: str, client_id: str) -> str:
    return f"{PREFIX}-{slice_name}-{client_id}"


def slice_containers(label: str) -> list[str]:
    out = docker("ps", "-a", "--filter", f"label={LABEL}={label}", "--format", "{{.Names}}")
    return out.stdout.split()


def slice_networks(label: str) -> list[str]:
    out = docker("network", "ls", "--filter", f"label={LABEL}={label}", "--format", "{{.Name}}")
    return out.stdout.split()


def image_for(node: Node) -> str:
    """Disk image URN -> local Docker image: the node image, unless
    JFED_STANDIN_IMAGES (JSON {urn: image}) maps it (a custom disk image)."""
    mapping = json.loads(os.environ.get("JFED_STANDIN_IMAGES", "{}"))
    return str(mapping.get(node.image, NODE_IMAGE))


def link_network(req: Request, link: Link) -> ipaddress.IPv4Network:
    nets = set()
    for node in req.nodes:
        for iface, (addr, mask) in node.ips.items():
            if iface in link.interfaces:
                nets.add(ipaddress.ip_network(f"{addr}/{mask}", strict=False))
    if len(nets) != 1:
        raise StandinError(f"link {link.client_id}: its interfaces are not in one subnet")
    return nets.pop()


def create(action: dict[str, Any]) -> None:
    project, name = slice_of(action)
    label = slice_label(project, name)
    if slice_containers(label):
        raise StandinError(f"slice {name} already exists in project {project}")
    exp = action["experiment"]
    req_src = exp["requestRSpec"]
    if req_src.get("source") != "PROVIDE_FILE":
        raise StandinError("only requestRSpec.source PROVIDE_FILE is stood in for")
    req = parse_rspec(Path(req_src["providedContentSource"]))
    ansible_dir = Path((action.get("output") or {}).get("ansibleDir", ""))
    wait_s = 60 * float((exp.get("waitForReady") or {}).get("maxTimeMin", 30))
    say(f"creating slice {name} in project {project}: {len(req.nodes)} nodes")
    try:
        hosts = start_nodes(req, name, label)
        wait_ready(hosts, wait_s)
        for node in req.nodes:
            add_experimenter(container_name(name, node.client_id))
        shape_links(req, name)
    except (StandinError, subprocess.TimeoutExpired):
        if (action.get("deleteOn") or {}).get("failCreate", False):
            remove(label)
        raise
    write_ansible_hosts(ansible_dir, req, hosts, name, project)
    say("Ready, because ExperimentState is READY")
    for node in req.nodes:
        run_executes(container_name(name, node.client_id), node)


def start_nodes(req: Request, name: str, label: str) -> dict[str, int]:
    ctl = f"{PREFIX}-{name}-ctl"
    docker("network", "create", "--label", f"{LABEL}={label}", ctl)
    lans = {}
    for link in req.links:
        net = link_network(req, link)
        gateway = str(net.broadcast_address - 1)  # keep .1.. free for the nodes
        lan = f"{PREFIX}-{name}-{link.client_id}"
        docker(
            "network",
            "create",
            "--label",
            f"{LABEL}={label}",
            "--subnet",
            str(net),
            "--gateway",
            gateway,
            "--internal",
            lan,
        )
        lans[link.client_id] = lan
    hosts = {}
    for node in req.nodes:
        cname = container_name(name, node.client_id)
        domain = KNOWN_CMS[node.cm]
        # As the local testbed runs its nodes (terraform/modules/docker_testbed):
        # systemd as PID 1 without --privileged.
        docker(
            "create",
            "--name",
            cname,
            "--hostname",
            node.client_id,
            "--domainname",
            f"{name}.{PREFIX}.{domain}",
            "--label",
            f"{LABEL}={label}",
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "NET_ADMIN",
            "--cap-add",
            "DAC_READ_SEARCH",
            "--tmpfs",
            "/run:rw,exec",
            "--tmpfs",
            "/run/lock",
            "-v",
            "/sys/fs/cgroup:/sys/fs/cgroup:ro",
            *(arg for path in DISK_DIRS for arg in ("-v", path)),
            "--network",
            ctl,
            "-p",
            "127.0.0.1::22",
            "--stop-signal",
            "SIGRTMIN+3",
            image_for(node),
        )
        for link in req.links:
            for iface, (addr, _) in node.ips.items():
                if iface in link.interfaces:
                    docker("network", "connect", "--ip", addr, lans[link.client_id], cname)
        docker("start", cname)
        port = docker("port", cname, "22/tcp").stdout.split()[0].rsplit(":", 1)[1]
        hosts[node.client_id] = int(port)
    return hosts


def wait_ready(hosts: dict[str, int], timeout_s: float) -> None:
    """Ready = sshd answers with its banner (a booted node), bounded by waitForReady."""
    deadline = time.monotonic() + timeout_s
    for client_id, port in hosts.items():
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
                    s.settimeout(3)
                    if s.recv(4).startswith(b"SSH-"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StandinError(f"node {client_id} did not become ready in time")
            time.sleep(1)


def add_experimenter(cname: str) -> None:
    """The experimenter's own account with passwordless sudo (the testbed makes it)."""
    script = (
        f"id {EXPERIMENTER} >/dev/null 2>&1 || useradd -m -s /bin/bash {EXPERIMENTER}; "
        f"echo '{EXPERIMENTER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/50-experimenter; "
        "chmod 440 /etc/sudoers.d/50-experimenter"
    )
    docker("exec", cname, "sh", "-c", script)


def shape_links(req: Request, name: str) -> None:
    for link in req.links:
        if not link.capacity_kbps:
            continue
        for node in req.nodes:
            for iface, (addr, _) in node.ips.items():
                if iface not in link.interfaces:
                    continue
                cname = container_name(name, node.client_id)
                dev = docker(
                    "exec",
                    cname,
                    "sh",
                    "-c",
                    f"ip -o -4 addr show | awk '$4 ~ /^{addr}\\// {{print $2}}'",
                )
                dev_name = dev.stdout.strip()
                if not dev_name:
                    raise StandinError(f"{node.client_id}: no interface holds {addr}")
                burst = max(1600, link.capacity_kbps * 1000 // 8 // 250)  # ~4 ms of traffic
                docker(
                    "exec",
                    cname,
                    "tc",
                    "qdisc",
                    "replace",
                    "dev",
                    dev_name,
                    "root",
                    "tbf",
                    "rate",
                    f"{link.capacity_kbps}kbit",
                    "burst",
                    str(burst),
                    "latency",
                    "50ms",
                )
        say(f"link {link.client_id}: {link.capacity_kbps} kbit/s")


def write_ansible_hosts(
    directory: Path, req: Request, hosts: dict[str, int], name: str, project: str
) -> None:
    """jFed's Ansible inventory. Its exact layout is assumed (not in public
    docs); the host lines carry ansible_host, ansible_port and ansible_user."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"# jFed CLI 2 stand-in: slice {name} of project {project}", "[nodes]"]
    for node in req.nodes:
        lines.append(
            f"{node.client_id} ansible_host=127.0.0.1 ansible_port={hosts[node.client_id]}"
            f" ansible_user={EXPERIMENTER}"
        )
    (directory / "ansible-hosts").write_text("\n".join(lines) + "\n")


def run_executes(cname: str, node: Node) -> None:
    """<execute> after ready, as the experimenter, in the background: jFed has
    already returned by the time it runs. Its output goes to
    /var/tmp/startup-<i>.txt on the node (assumed name)."""
    for i, (shell, command) in enumerate(node.executes):
        wrapped = f"sleep {EXECUTE_DELAY_S}; {command}"
        docker(
            "exec",
            "-d",
            "-u",
            EXPERIMENTER,
            "-w",
            f"/home/{EXPERIMENTER}",
            cname,
            "sh",
            "-c",
            f"{shlex.quote(shell)} -c {shlex.quote(wrapped)} > /var/tmp/startup-{i}.txt 2>&1",
        )


def remove(label: str) -> int:
    names = slice_containers(label)
    if names:
        docker("rm", "-f", "-v", *names)  # -v: the nodes' disk volumes too
    nets = slice_networks(label)
    if nets:
        docker("network", "rm", *nets)
    return len(names)


def delete(action: dict[str, Any]) -> None:
    project, name = slice_of(action)
    removed = remove(slice_label(project, name))
    if not removed and (action.get("slice") or {}).get("failOnNonExistingSlice", True):
        raise StandinError(f"slice {name} does not exist in project {project}")
    say(f"slice {name}: {removed} nodes deleted")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="experimenter-cli2.jar (stand-in)")
    parser.add_argument("-a", "--action", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        action = load_action(args.action)
        if action["action"] == "RUN":
            create(action)
        else:
            delete(action)
    except StandinError as err:
        print(f"ERROR: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A testbed's kind, the first step of reading a testbed: which of `env:` (a testbed
hpcbench deploys), `slurm:` (a partition) or `hosts:` (machines you have) it gives,
and that kind's keys checked and resolved into a Place: `scale`'s options for it,
what identifies it (hashed into the testbed's fingerprint), its nodes and GPUs per
node where its keys say, and a line for the plan."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hpcbench.campaign import checks
from hpcbench.campaign.checks import Problem
from hpcbench.campaign.sweep_keys import parse, strip_prefix
from hpcbench.core.errors import UsageError
from hpcbench.core.secrets import looks_secret
from hpcbench.launchers.parse import parse_hosts, parse_login
from hpcbench.testbeds import kinds
from hpcbench.testbeds.kinds import Kind

VARIABLE = re.compile(r"[a-z_][a-z0-9_]{0,63}", re.ASCII)
TOPOLOGY = re.compile(r"([1-9][0-9]*)x([1-9][0-9]*)", re.ASCII)
WHOLE = re.compile(r"[0-9]{1,18}", re.ASCII)  # not str.isdigit: it takes '²', int() does not
# What a partition's ssh_key, known_hosts and a login's job_dir are checked alone with.
STAND_IN_LOGIN = ["--slurm-login=login", "--slurm-python=/python"]


def by_key() -> dict[str, Kind]:
    """The key that gives each registered kind (env: the deployed ones), in the order
    the error names them: deployed, queued, the others as registered."""
    found: dict[str, Kind] = {}
    order = sorted(kinds.registered().values(), key=lambda k: (not k.deployed, not k.queued))
    for kind in order:
        if kind.campaign_key:
            found.setdefault(kind.campaign_key, kind)
    return found


@dataclass(frozen=True)
class Place:
    """Where a testbed's sweep runs, as its kind's keys say."""

    kind: Kind
    key: str  # the file's key that gave the kind: env, slurm or hosts
    env: str  # the environment deployed, or the kind's own name (slurm, hosts)
    where_args: list[str]  # `scale`'s options for it: --env ... or --hosts ...
    identity: dict[str, Any]  # what identifies it, hashed into the fingerprint
    nodes_available: int | None  # where its keys say (node_count, topology, nodes:)
    slots: int | None  # GPUs (workers) per node, where its keys say
    where: str = ""  # the partition and login node, or the hosts: what the plan shows
    settings: dict[str, str] = field(default_factory=dict)  # a deployed one's Terraform
    ansible: dict[str, Any] = field(default_factory=dict)  # and Ansible variables


def kind_of(raw: dict[str, Any], path: str) -> str:
    """Which of env:, slurm: and hosts: a testbed gives (exactly one); settings: and
    ansible: only with env:."""
    known = by_key()
    given = [k for k in known if k in raw]
    if len(given) != 1:
        said = [f"{key}: ({kind.described})" for key, kind in known.items()]
        raise Problem(path, f"give one of {', '.join(said[:-1])} or {said[-1]}")
    if not known[given[0]].deployed:
        for key in ("settings", "ansible"):
            if key in raw:
                raise Problem(
                    f"{path}.{key}", f"is for testbeds hpcbench deploys (env:), not {given[0]}:"
                )
    return given[0]


def resolve(key: str, raw: dict[str, Any], path: str) -> Place:
    """The kind's keys (key: what kind_of found) checked, each error naming its key."""
    kind = by_key()[key]
    if not kind.deployed:
        read = READERS.get(kind.name, _declared)
        return Place(kind, key, kind.name, *read(kind, raw[key], f"{path}.{key}"))
    env = checks.text(raw.get("env"), f"{path}.env", None, "an environment")
    try:
        kind = kinds.for_env(env)  # the environment's own: its lease, its hints
    except UsageError as err:
        raise Problem(f"{path}.env", str(err)) from None
    settings, ansible = _deployed(raw, path)
    nodes_available, slots = _shape(settings)
    identity = {"env": env, "settings": settings, "ansible": ansible}
    return Place(
        kind, key, env, ["--env", env], identity, nodes_available, slots, "", settings, ansible
    )


def _deployed(raw: dict[str, Any], path: str) -> tuple[dict[str, str], dict[str, Any]]:
    """A deployed testbed's Terraform settings and Ansible variables, checked."""
    settings: dict[str, str] = {}
    for key, value in checks.mapping(raw.get("settings"), f"{path}.settings").items():
        where = f"{path}.settings.{key}"
        if not VARIABLE.fullmatch(key):
            raise Problem(where, "a Terraform variable name: lower-case letters, digits, _")
        if looks_secret(key):
            raise Problem(
                where,
                "looks like a secret, which never goes in a file: export it "
                "as its module documents (docs/testbeds.md)",
            )
        settings[key] = checks.setting(value, where)
        settings[key] = checks.link(key, settings[key], where)
    ansible = checks.mapping(raw.get("ansible"), f"{path}.ansible")
    for key, value in ansible.items():
        where = f"{path}.ansible.{key}"
        if not VARIABLE.fullmatch(key):
            raise Problem(where, "an Ansible variable name: lower-case letters, digits, _")
        if looks_secret(key):
            raise Problem(where, "looks like a secret, which never goes in a file")
        checks.plain(value, where)
    return settings, ansible


Read = tuple[list[str], dict[str, Any], int | None, int | None, str]


def _declared(kind: Kind, value: Any, path: str) -> Read:
    """A kind's keys as it declares them (Kind.campaign_options), each becoming its
    `scale` option, checked by the very parser `scale` uses, its error naming the key;
    what identifies it (less its operational keys); its nodes where `nodes` is given."""
    given = checks.mapping(value, path, tuple(kind.campaign_options))
    argv: list[str] = []
    for key, raw_value in given.items():
        flag, where = kind.campaign_options[key], f"{path}.{key}"
        if flag is None:
            continue
        if isinstance(raw_value, bool):  # YAML 1.1's yes/no/on/off
            raise Problem(where, "YAML read this as true/false: write the value in quotes")
        number = isinstance(raw_value, int | float)
        argv.append(f"{flag}={checks.text(str(raw_value) if number else raw_value, where)}")
    try:
        parse([], ["--env", kind.name, "--out", "results", *argv])
    except UsageError as err:
        raise Problem(path, strip_prefix(str(err))) from None
    nodes = (
        checks.int_list(given["nodes"], f"{path}.nodes", 100_000)[-1] if "nodes" in given else None
    )
    identity = {k: v for k, v in given.items() if k not in kind.operational}
    return ["--env", kind.name, *argv], {kind.campaign_key: identity}, nodes, None, kind.name


def _slurm(kind: Kind, value: Any, path: str) -> Read:
    """A Slurm partition: `scale --env slurm`'s options for it (each key checked by the
    very parser `scale` uses, its error naming the key), what identifies it, its nodes
    and GPUs per node where given, and a line for the plan."""
    keys = kind.campaign_options
    given = checks.mapping(value, path, tuple(keys))
    if "partition" not in given:
        raise Problem(f"{path}.partition", "name the partition (sinfo -s lists them)")
    argv: list[str] = []
    for key, raw_value in given.items():
        flag, where = keys[key], f"{path}.{key}"
        if flag is None:  # nodes: the most the partition gives; bounds the sweep
            continue
        if key == "time":
            own = [flag, str(max(1, -(-checks.duration(raw_value, where) // 60)))]
        elif key in ("sbatch", "container_mounts") and isinstance(raw_value, list):
            texts = [checks.text(v, where) for v in raw_value]
            own = [f"{flag}={t}" for t in texts] if key == "sbatch" else [flag, ",".join(texts)]
        elif key in ("queue_wait", "container_import"):
            own = [flag, str(checks.duration(raw_value, where))]
        elif isinstance(raw_value, bool):  # YAML 1.1's yes/no/on/off: never a name or count
            raise Problem(where, "YAML read this as true/false: write the value in quotes")
        elif isinstance(raw_value, float) and key not in kind.counts:  # 1e3, .nan: no name
            raise Problem(where, f"YAML read this as the number {raw_value}: write it in quotes")
        else:
            # A number as its text: the option's own parser says what is wrong with 1.5.
            number = isinstance(raw_value, int | float)
            text = checks.text(str(raw_value) if number else raw_value, where)
            own = [f"{flag}={text}"]  # =: a value may start with '-' (sbatch's --exclusive)
        try:
            if key == "login":  # alone it lacks --slurm-python: its own syntax only
                parse_login(own[0].partition("=")[2])
            elif key in ("ssh_key", "known_hosts") or (key == "job_dir" and "login" in given):
                # Alone they lack the login they are for (job_dir: its ~ is the login's):
                # checked with a stand-in, and with the keys together below.
                parse(own + STAND_IN_LOGIN, ["--env", "slurm", "--out", "results"])
            elif key in ("container_mounts", "container_import"):  # alone it lacks the
                image = ["--container-image=/image.sqsh"]  # image it is for: its syntax
                parse(own + image, ["--env", "slurm", "--out", "results"])  # here
            else:
                parse(own, ["--env", "slurm", "--out", "results"])
        except UsageError as err:
            raise Problem(where, strip_prefix(str(err))) from None
        argv += own
    try:
        parse([], ["--env", "slurm", "--out", "results", *argv])  # the keys together
    except UsageError as err:
        raise Problem(path, strip_prefix(str(err))) from None
    nodes = (
        checks.int_list(given["nodes"], f"{path}.nodes", 100_000)[-1] if "nodes" in given else None
    )
    gpus = given.get("gpus_per_node")
    slots = int(gpus) if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus else None
    identity = {k: v for k, v in given.items() if k not in kind.operational}
    login = given.get("login")
    where = f"partition {given['partition']}" + (f" via {login}" if login else "")
    return ["--env", "slurm", *argv], {"slurm": identity}, nodes, slots, where


def _hosts(kind: Kind, value: Any, path: str) -> Read:
    """Machines you have, as `scale --hosts` takes them: host:slots (workers)."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        text = ",".join(value)
    elif isinstance(value, str):
        text = value
    else:
        raise Problem(path, "must be a list of host:slots such as [node1:4, node2:4]")
    try:
        hosts = parse_hosts(text)
    except UsageError as err:
        raise Problem(path, str(err).removeprefix("--hosts: ")) from None
    listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
    slots = min(h.slots for h in hosts)
    return ["--hosts", listed], {"hosts": listed}, len(hosts), slots, f"hosts {listed}"


def _shape(settings: dict[str, str]) -> tuple[int | None, int | None]:
    """Nodes and GPUs per node where the settings say: `node_count` and `gpus_per_node`
    (local, Virtual Wall, OpenStack) or a GPULab `topology` <jobs>x<GPUs per job>."""
    topology = settings.get("topology")
    if topology is not None:
        match = TOPOLOGY.fullmatch(topology)
        if match:
            return int(match[1]), int(match[2])
    count, gpus = settings.get("node_count", ""), settings.get("gpus_per_node", "")
    return (
        int(count) if WHOLE.fullmatch(count) else None,
        int(gpus) if WHOLE.fullmatch(gpus) else None,
    )


# The kinds whose keys say more than their options (a partition's durations and lists,
# a host list), by name; the others' are read as they declare them (_declared).
READERS = {"slurm": _slurm, "hosts": _hosts}

"""Is every node of a fresh deploy reachable the way Ansible will reach it?

Nodes boot after Terraform created them; before Ansible starts, deploy waits
(bounded) until `ssh ... true` succeeds on each, with the inventory's own
ssh settings: user, key, port, and the ProxyJump/ProxyCommand of testbeds
behind a bastion (jFed/GPULab proxy, an OpenStack head). A bare TCP probe of
ansible_host would miss both the bastion and a key the node refuses.

Host keys are learned into the testbed's known_hosts on this first contact
(accept-new, as the inventory tells Ansible), and checked from then on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from hpcbench.core import bounded
from hpcbench.core.errors import UsageError
from hpcbench.core.ssh import KEY, KNOWN_HOSTS, SshAccess, config_path, last_line
from hpcbench.testbeds.nodeset import load_inventory

CONNECT_TIMEOUT_S = 10  # one ssh attempt's connect; ssh's own limit
ATTEMPT_S = 30  # one whole attempt (through a bastion: two connects and two logins)
PAUSE_S = 2.0
# Before each run of a sweep: one `ssh ... true` per node it needs, all at once. A node
# that died mid-sweep would otherwise cost each later run that needs it its whole
# --timeout (the launcher waits for it); this bound is what it costs instead.
PREFLIGHT = bounded.Limit(
    "reaching a run's nodes before it starts", "HPCBENCH_PREFLIGHT_TIMEOUT_S", 10
)


@dataclass(frozen=True)
class Target:
    name: str
    access: SshAccess


def targets(inventory: Path) -> list[Target]:
    """The inventory's nodes and how to reach each; a malformed one is a UsageError."""
    try:
        testbed = load_inventory(inventory)
    except UsageError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        # e.g. `ansible_port: abc`, an entry that is not a mapping
        raise UsageError(
            f"{inventory}: malformed inventory ({type(err).__name__}: {err}); "
            "fix the entry or redeploy"
        ) from None
    return [Target(n.name, n.access) for n in testbed.nodes if n.access is not None]


def argv(access: SshAccess, known_hosts: Path) -> list[str]:
    """`ssh ... true` as Ansible would connect, host keys learned on first contact.

    File names quoted as SshAccess.argv quotes them (ssh.config_path): ssh reads each
    -o as a configuration line, so a state folder with a space would otherwise be two
    known_hosts files and a % a token. UsageError for a name ssh cannot take."""
    known = config_path(str(known_hosts), KNOWN_HOSTS)
    args = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        f"UserKnownHostsFile={known}",
        "-o",
        "LogLevel=ERROR",
        "-p",
        str(access.port),
    ]
    # -o IdentityFile, not -i: ssh checks -i's file before expanding its % tokens, so
    # a quoted name with a % would not reach the key (SshAccess.argv).
    if access.key_file:
        key = config_path(access.key_file, KEY)
        args += ["-o", "IdentitiesOnly=yes", "-o", f"IdentityFile={key}"]
    # The inventory's ProxyJump/ProxyCommand; ssh keeps the first value of an
    # option, so these cannot override the host-key settings above.
    args += list(access.extra_args)
    args += ["--", f"{access.user}@{access.host}" if access.user else access.host, "true"]
    return args


def wait(inventory: Path, known_hosts: Path, limit: bounded.Limit = bounded.REACH) -> None:
    """Returns once every node answered; raises bounded.Timeout naming the first that
    did not, with ssh's last words, when limit runs out."""
    seconds = limit.seconds()
    deadline = time.monotonic() + seconds
    for target in targets(inventory):
        problem = ""
        while True:
            left = deadline - time.monotonic()
            try:  # the whole group: a ProxyCommand's process goes with its ssh
                proc = bounded.run(
                    argv(target.access, known_hosts),
                    limit,
                    capture=True,
                    seconds=max(1.0, min(ATTEMPT_S, left)),
                    grace_s=2,
                )
                if proc.returncode == 0:
                    break
                problem = last_line(proc.stderr)
            except bounded.Timeout:
                problem = "no answer"
            if time.monotonic() + PAUSE_S > deadline:
                raise bounded.Timeout(f"ssh to {target.name} ({problem})", seconds, limit.variable)
            time.sleep(PAUSE_S)


def unreachable(nodes: Sequence[Target], limit: bounded.Limit = PREFLIGHT) -> dict[str, str]:
    """The nodes that do not answer one `ssh ... true` within limit, each with why (ssh's
    last words, or no answer): probed at once, as the launch connects (the harness's own
    host-key checks, SshAccess.argv), so the whole check takes one limit at most."""
    seconds = limit.seconds()

    def problem(target: Target) -> str | None:
        try:  # the whole group: a ProxyCommand's process goes with its ssh
            proc = bounded.run(
                [*target.access.argv(), "true"], limit, capture=True, seconds=seconds, grace_s=1
            )
        except bounded.Timeout:
            return f"no answer in {seconds:.0f} s"
        return None if proc.returncode == 0 else last_line(proc.stderr)

    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        whys = list(pool.map(problem, nodes))
    return {t.name: why for t, why in zip(nodes, whys, strict=True) if why is not None}

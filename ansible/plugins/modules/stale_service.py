#!/usr/bin/python
"""stale_service: is a running systemd unit older than its configuration?

A role templates a configuration and notifies a handler that restarts the
service. If the run is interrupted between the two, the file is new, the
restart never happened, and the next run sees no change: the handler is lost.
This module looks instead of remembering: it reports `changed` when the unit is
active and one of `paths` was modified after the unit last entered the active
state, so a task that `notify`s the role's own restart handler from it makes
the next run restart the service. It changes nothing itself (check mode
included), and reports ok once the service has been restarted after the file
changed: a second run stays changed=0.

Times: systemd's ActiveEnterTimestampMonotonic is a CLOCK_MONOTONIC timestamp
in microseconds (org.freedesktop.systemd1(5), the unit's *Timestamp and
*TimestampMonotonic properties); a file's mtime is CLOCK_REALTIME, converted here with the offset
between the two clocks now. A clock step between the write and now shifts that
offset by the step: stepped back, the service may be restarted once more than
needed; stepped forward, a write within the step of the start is missed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time

DOCUMENTATION = r"""
---
module: stale_service
short_description: Tell whether a running systemd unit started before its configuration last changed
description:
  - >-
    Reports changed when the unit is active and one of O(paths) was modified
    after the unit entered the active state, or systemd says the unit's file
    changed on disk (NeedDaemonReload). Never restarts anything: notify the
    role's restart handler from the task.
options:
  name:
    description: The systemd unit, e.g. ssh.service.
    type: str
    required: true
  paths:
    description: Files the unit reads, or glob patterns; missing ones are ignored.
    type: list
    elements: path
    required: true
"""

RETURN = r"""
stale:
  description: Whether the unit runs with an older configuration than the one on disk.
  type: bool
  returned: always
reason:
  description: Why, in words.
  type: str
  returned: always
"""

PROPS = ("LoadState", "ActiveState", "ActiveEnterTimestampMonotonic", "NeedDaemonReload")


def parse_show(text: str) -> dict[str, str]:
    """`systemctl show -p A -p B UNIT` output: one KEY=VALUE a line."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def staleness(
    props: dict[str, str], mtimes: dict[str, float], realtime_minus_monotonic: float
) -> tuple[bool, str]:
    """(stale, reason) for a unit's `systemctl show` properties and its files' mtimes."""
    if props.get("LoadState") != "loaded" or props.get("ActiveState") != "active":
        return False, "not running: nothing to restart"
    if props.get("NeedDaemonReload") == "yes":
        return True, "its unit file changed on disk after systemd loaded it"
    started_us = int(props.get("ActiveEnterTimestampMonotonic") or 0)
    if started_us <= 0:
        return False, "systemd reports no start time"
    started = started_us / 1e6
    newer = sorted(p for p, m in mtimes.items() if m - realtime_minus_monotonic > started)
    if newer:
        return True, f"started before {', '.join(newer)} changed"
    return False, "started after its configuration last changed"


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "paths": {"type": "list", "elements": "path", "required": True},
        },
        supports_check_mode=True,
    )
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        module.exit_json(changed=False, stale=False, reason="no systemctl: no systemd here")
    argv = [systemctl, "show", module.params["name"]]
    for prop in PROPS:
        argv += ["-p", prop]
    rc, out, err = module.run_command(argv)
    if rc != 0:  # e.g. "System has not been booted with systemd" (a GPULab job)
        reason = f"systemctl show failed, nothing to compare: {err.strip()}"
        module.exit_json(changed=False, stale=False, reason=reason)
    mtimes = {}
    for pattern in module.params["paths"]:
        for path in glob.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                mtimes[path] = os.stat(path).st_mtime
    offset = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)
    stale, reason = staleness(parse_show(out), mtimes, offset)
    module.exit_json(changed=stale, stale=stale, reason=f"{module.params['name']}: {reason}")


if __name__ == "__main__":
    main()

"""Deploy figures of the local testbed: first deploy, idempotent re-run, destroy.

    python evaluation/deploy_time.py [--nodes 1,2,4]

For each node count: a first deploy (images already built), a second deploy
(its time and Ansible's changed count, which must be 0) and a destroy. The
testbed gets its own name, subnet, ports and state folder, so a testbed the
user deployed stays untouched. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time

from cli import hpcbench  # evaluation/cli.py

BENCH_VARS = [
    "name=hpcbench-bench",
    "subnet=172.30.8.0/24",
    "ssh_port_base=22800",
    "jupyter_port=28888",
]


def timed(environ: dict[str, str], *args: str) -> tuple[float, str]:
    """Seconds `hpcbench args` took, and what it printed."""
    start = time.monotonic()
    proc = hpcbench(*args, env=environ)
    return time.monotonic() - start, proc.stdout


def changed(output: str) -> int:
    found = re.search(r"ansible changed=(\d+)", output)
    return int(found[1]) if found else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1,2,4")
    parser.add_argument("--cpus-per-node", default="0.5")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hpcbench-bench-") as state:
        environ = {**os.environ, "HPCBENCH_STATE": state}
        for n in [int(x) for x in args.nodes.split(",")]:
            var_args = [
                a
                for v in [*BENCH_VARS, f"node_count={n}", f"cpus_per_node={args.cpus_per_node}"]
                for a in ("--var", v)
            ]
            first, out1 = timed(environ, "deploy", "--env", "local", *var_args)
            second, out2 = timed(environ, "deploy", "--env", "local")
            gone, _ = timed(environ, "destroy", "--env", "local")
            rows.append((n, first, changed(out1), second, changed(out2), gone))
            print(
                f"{n} node(s): deploy {first:.0f} s, re-deploy {second:.0f} s "
                f"(changed={changed(out2)}), destroy {gone:.0f} s",
                flush=True,
            )
    print("\n| nodes | first deploy (s) | changed | re-deploy (s) | changed | destroy (s) |")
    print("|---|---|---|---|---|---|")
    for n, first, c1, second, c2, gone in rows:
        print(f"| {n} | {first:.0f} | {c1} | {second:.0f} | {c2} | {gone:.0f} |")


if __name__ == "__main__":
    main()

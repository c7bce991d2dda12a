"""Jobs the LRZ way and the GWDG way: pyxis loaded into Slurm, and `srun
--container-image=<the stack .sqsh>` starting on every node as the testbed's
user; Lmod's module command in a batch job, putting the stack's Python on PATH."""

import shlex

import pytest


@pytest.fixture(scope="module")
def pyxis(testbed):
    image = testbed.var("pyxis_image")
    if not (testbed.var("enable_slurm") and image):
        pytest.skip("no Slurm, or no pyxis_image in the inventory (no image store): no pyxis")
    # A node is in some partition, not always the default one: srun picks from these.
    parts = ",".join(p["name"] for p in testbed.var("slurm_partitions") or [])
    return {
        "head": testbed.head,
        "image": image,
        "user": testbed.var("testbed_user"),
        "partitions": f"--partition={parts} " if parts else "",
    }


def as_user(user: str, command: str) -> str:
    """A command as the testbed's user, in a login shell (its ~ and PATH)."""
    return f"su - {shlex.quote(user)} -c {shlex.quote(command)}"


def test_srun_offers_pyxiss_options(host, pyxis):
    assert "--container-image" in host.check_output("srun --help")


def test_the_stack_image_starts_on_every_node(testbed, pyxis):
    """One step per node, each in the stack's .sqsh (pyxis imports, enroot starts it),
    all at once: each node unpacks the image into its own folder, so the steps wait on
    nothing but their own node's CPU."""
    head = testbed.host(pyxis["head"])
    nodes = [n["name"] for n in testbed.nodes]
    step = (
        f"srun {pyxis['partitions']}--nodes=1 --ntasks=1 --nodelist=$node --time=5 "
        f"--container-image={pyxis['image']} "
        "/opt/hpcbench/venv/bin/python -c 'import socket, torch; print(socket.gethostname())'"
    )
    # A line per node: its name, srun's exit status, what the step printed.
    script = (
        'errs=$(mktemp -d) && for node in "$@"; do '
        f'( got=$({step} 2>"$errs/$node"); printf "%s %s %s\\n" "$node" "$?" "$got" ) & '
        'done; wait; cat "$errs"/* >&2; rm -rf "$errs"'
    )
    command = f"bash -c {shlex.quote(script)} _ {' '.join(nodes)}"
    with head.sudo():
        out = head.run(as_user(pyxis["user"], command))
    got = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line}
    assert got == {node: ["0", node] for node in nodes}, out.stdout + out.stderr


def test_a_batch_jobs_module_load_puts_the_stacks_python_on_path(testbed, pyxis):
    """The GWDG setup line in a batch script (a non-login bash, as sbatch starts it),
    submitted from a login shell: the stack's Python is on PATH after the line and
    not before it (the site's profile, which the script sources for `module`, puts
    no stack there: lmod_remove_profiles), so the line is what puts it there."""
    head = testbed.host(pyxis["head"])
    script = (
        "#!/bin/bash\n"
        "type module >/dev/null 2>&1 || . /etc/profile >/dev/null 2>&1\n"
        'echo "before $(command -v python || echo none)"\n'
        "module load miniforge3 && source activate hpcbench\n"
        'echo "after $(command -v python)"\n'
    )
    command = (
        "f=$(mktemp) && printf %s " + shlex.quote(script) + ' > "$f" && '
        'sbatch --wait --time=5 --parsable --output="$HOME/lmod-%j.out" "$f" >/dev/null && '
        'cat "$HOME"/lmod-*.out && rm -f "$f" "$HOME"/lmod-*.out'
    )
    with head.sudo():
        out = head.run(as_user(pyxis["user"], command))
    assert out.rc == 0, out.stdout + out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines.get("after") == "/opt/hpcbench/venv/bin/python", out.stdout
    assert lines.get("before") != "/opt/hpcbench/venv/bin/python", out.stdout


def test_enroot_unpacks_containers_where_the_inventory_says(testbed, pyxis):
    """enroot_data_path, where the inventory sets one, is the folder enroot makes for
    the user's containers on every node: its own, private (enroot's umask 077)."""
    path = testbed.var("enroot_data_path")  # pyxis, so enroot (the fixture)
    if not path:
        pytest.skip("no enroot_data_path in the inventory: enroot's default")
    for node in testbed.nodes:
        host = testbed.host(node["name"])
        # Any enroot command makes its folders first (enroot.in, `mkdir -p`).
        show = f'enroot list >/dev/null && stat -c "%U %a" "{path}"'
        with host.sudo():
            out = host.run(as_user(pyxis["user"], show))
        assert out.rc == 0 and out.stdout.split() == [pyxis["user"], "700"], (
            node["name"],
            out.stdout + out.stderr,
        )

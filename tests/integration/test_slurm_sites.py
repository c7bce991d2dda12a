"""The e2e campaign's LRZ and GWDG partitions submit the scripts campaigns/lrz.yaml and
gwdg.yaml render, apart from the partition, the image's path and the device.

Both campaigns are rendered by `campaign run --dry-run` (nothing is checked or
submitted): the site's file as it is, and the same file with its partition taken as
tests/slurm_sites.py gives it to the local Slurm testbed, reached over SSH as the
e2e test reaches it. Every script line is compared after the three differences (and
the paths of the two machines' folders, the random rendezvous port, and the time
limits that the image's kind sets) are masked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.slurm_sites import REPO, site_slurm

pytestmark = pytest.mark.integration

# What differs by design, each masked to one token.
MASKS = [
    (re.compile(r"--partition=\S+"), "--partition=<partition>"),
    (re.compile(r"'?--container-image=[^\s']+'?"), "--container-image=<image>"),
    (re.compile(r" --device \w+"), " --device <device>"),
    (re.compile(r" --gpus \d+"), ""),  # the device's count
    (re.compile(r"MASTER_PORT=\d+"), "MASTER_PORT=<port>"),
    # The image's import allowance follows its kind (a registry pull, a .sqsh unpack).
    (re.compile(r"--time=\d+"), "--time=<time>"),
    (re.compile(r"--deadline=now\+\d+minutes"), "--deadline=<deadline>"),
    (re.compile(r"/[\w.+%-]+(?:/[\w.+%-]+)*"), "<path>"),
]
DEVICE_LINES = re.compile(r"#SBATCH --gres=")


def masked(script: list[str]) -> list[str]:
    out = []
    for line in script:
        if DEVICE_LINES.match(line):
            continue
        for pattern, token in MASKS:
            line = pattern.sub(token, line)
        out.append(line)
    return out


def first_run_script(text: str) -> list[str]:
    """The first measured run's script in `campaign run --dry-run`'s output."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("# batch "))
    shebang = lines.index("#!/bin/bash", start)
    end = next(i for i in range(shebang, len(lines)) if lines[i] == 'exit "$rc"')
    return lines[shebang : end + 1]


def dry_run(path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "hpcbench", "campaign", "run", "--dry-run", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def as_the_testbed_runs_it(site: str, tmp_path: Path) -> Path:
    """The site's campaign with its first partition as the e2e test runs it."""
    data = yaml.safe_load((REPO / "campaigns" / f"{site}.yaml").read_text())
    key, known = tmp_path / "key", tmp_path / "known_hosts"
    key.write_text("not read by a dry run\n")
    known.write_text("")
    first = data["testbeds"][0]
    first["slurm"] = {
        **site_slurm(site, "fast", "/images/hpcbench+stack.sqsh"),
        "login": "hpcbench@127.0.0.1:2222",
        "ssh_key": str(key),
        "known_hosts": str(known),
        "job_dir": "/shared/slurm-jobs",
        "bench_dir": "/opt/hpcbench/bench",
    }
    first.pop("sweep", None)  # its gpus_per_node list
    data["testbeds"] = [first]
    data["sweep"]["device"] = "cpu"
    data["out"] = str(tmp_path / "results")
    path = tmp_path / f"{site}-testbed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("site", ["lrz", "gwdg"])
def test_the_testbeds_scripts_are_the_sites_apart_from_partition_image_and_device(
    site: str, tmp_path: Path
) -> None:
    ours = first_run_script(dry_run(as_the_testbed_runs_it(site, tmp_path)))
    theirs = first_run_script(dry_run(REPO / "campaigns" / f"{site}.yaml"))
    assert masked(ours) == masked(theirs)
    # The masks hide no more than they should: the scripts are not trivially equal,
    # and what they mask is there to be masked.
    assert ours != theirs
    assert any("--partition=fast" in x for x in ours)
    if site == "lrz":
        assert any("--container-image=/images/hpcbench+stack.sqsh" in x for x in ours)
        assert any("--container-image=nvcr.io#nvidia/pytorch" in x for x in theirs)


def test_the_masks_see_a_script_that_differs_elsewhere() -> None:
    """A difference outside the partition, image and device is not masked away."""
    script = [
        "#SBATCH --partition=a",
        "srun --cpus-per-task=2 '--container-image=x.sqsh' python train.py --device cpu",
    ]
    other = [
        "#SBATCH --partition=b",
        "srun --cpus-per-task=4 '--container-image=y.sqsh' python train.py --device cuda",
    ]
    assert masked(script) != masked(other)
    assert masked(script) == masked([script[0].replace("=a", "=b"), script[1]])

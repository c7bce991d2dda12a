"""campaigns/lrz.yaml's and gwdg.yaml's partitions as the local Slurm testbed runs them.

The e2e campaign (tests/e2e/test_campaign_slurm.py) takes each site's `slurm:` keys
from the campaign file itself and changes only what names the cluster: the
partition, the image's path and the device (GPUs per node). How the testbed is
reached (login, key, job folder, where bench/ is) is added beside them; what the
jobs' scripts say apart from those is what the site's campaign renders
(tests/integration/test_slurm_sites.py compares them line by line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def site_slurm(site: str, partition: str, image: str | None = None) -> dict[str, Any]:
    """The first partition of campaigns/<site>.yaml with another partition name and
    image path, and no GPUs."""
    data = yaml.safe_load((REPO / "campaigns" / f"{site}.yaml").read_text())
    slurm = dict(data["testbeds"][0]["slurm"])
    slurm["partition"] = partition
    slurm.pop("gpus_per_node", None)
    if "container_image" in slurm:
        assert image, f"{site}.yaml runs a container: give the image's path"
        slurm["container_image"] = image
    return slurm

"""The shipped table of published single-worker figures: every row quoted from a
source it names, and the lookup's rules (hpcbench.performance.published_figures)."""

from __future__ import annotations

import math
import re

import pytest

from hpcbench.performance import published_figures
from hpcbench.performance.published_figures import PRECISIONS, lookup, table

ROWS = table()["rows"]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['accelerator']}-{r['precision']}")
def test_every_row_is_quoted_from_a_source_it_names(row: dict) -> None:
    source = table()["sources"][row["source"]]
    assert source["title"] and source["setup"]
    # GitHub addresses are pinned to a commit: the quoted text does not move.
    if "github.com" in source["url"]:
        assert re.search(r"/(blob|tree)/[0-9a-f]{40}/", source["url"]), source["url"]
    assert row["precision"] in PRECISIONS and row["framework"] in ("pytorch", "tensorflow", "mxnet")
    assert isinstance(row["batch"], int) and row["batch"] > 0
    assert math.isfinite(row["images_per_s"]) and row["images_per_s"] > 0
    assert row["quote"].strip() and row["matches"]
    # The generic token matches the accelerator's own name as the source gives it.
    assert published_figures._answers(row, row["matches"][-1]) > 0


def test_a_gpu_name_as_torch_gives_it_finds_its_rows_and_never_another_precision() -> None:
    found = lookup("NVIDIA A100-SXM4-80GB", "resnet50", 224, 256, ("amp",))
    assert found is not None and found.precision == "amp" and "80GB" in found.accelerator
    assert lookup("Tesla T4", "resnet50", 224, 32, ("amp",)) is None  # no such row
    assert lookup("P100", "resnet50", 224, 64, ("amp",)) is None  # FP32 rows only
    fp32 = lookup("Tesla P100-SXM2-16GB", "resnet50", 224, 64, ("tf32", "fp32"))
    assert fp32 is not None and fp32.images_per_s == 219 and fp32.batch == 64


def test_the_nearest_batch_wins_before_a_closer_name() -> None:
    small = lookup("A100-SXM4-80GB", "resnet50", 224, 32, ("amp",))
    large = lookup("A100-SXM4-80GB", "resnet50", 224, 256, ("amp",))
    assert small is not None and large is not None
    assert small.batch == 32 and large.batch == 256
    assert "published: " in small.source and small.url in small.source

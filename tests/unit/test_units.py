"""bench/units.py: the one size parser the harness and the workload share."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import units  # noqa: E402


@pytest.mark.parametrize(
    "text, size",
    [
        ("64M", 64 << 20),
        ("64MiB", 64 << 20),
        ("64MB", 64 << 20),
        ("4K", 4096),
        ("4096", 4096),
        ("1G", 1 << 30),
        (" 4k ", 4096),
        ("4G", 4 << 30),
    ],
)
def test_sizes(text, size):
    assert units.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "-1", "64Mi", "1e9", "x", "5G", "2", "0", "nanM", "४K"])
def test_bad_sizes_say_what_to_write(text):
    with pytest.raises(ValueError, match="not a size like 4K|out of range"):
        units.parse_size(text)


@pytest.mark.parametrize("text", ["", "-1", "1e3", "1_0", "४", "0x10", "9" * 40, "2000", " "])
def test_counts_refuse_what_is_not_a_bounded_whole_number(text):
    with pytest.raises(ValueError, match="not a whole number|out of range"):
        units.count("threads", text)


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "1e3", "5000", ""])
def test_megabytes_refuse_what_is_not_a_bounded_number(text):
    with pytest.raises(ValueError, match="not a number|out of range"):
        units.megabytes("bucket-cap-mb", text)

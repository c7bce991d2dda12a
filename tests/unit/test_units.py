"""bench/units.py: the one size parser the harness and the workload share."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import units  # noqa: E402


@pytest.mark.parametrize(
    "text, size",
    [("64M", 64 << 20), ("64MiB", 64 << 20), ("64MB", 64 << 20), ("4K", 4096), ("4096", 4096),
     ("1G", 1 << 30), (" 4k ", 4096), ("4G", 4 << 30)],
)  # fmt: skip
def test_sizes(text, size):
    assert units.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "-1", "64Mi", "1e9", "x", "5G", "2", "0", "nanM", "४K"])
def test_bad_sizes_say_what_to_write(text):
    with pytest.raises(ValueError, match="not a size like 4K|out of range"):
        units.parse_size(text)


def test_the_workload_accepts_what_the_harness_accepts():
    # bench/allreduce.py's --max-bytes goes through the same parser: 64MiB is
    # taken, and a bad size is refused by argparse before torch is touched.
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); sys.modules['torch'] = type(sys)('t');"
        "import allreduce; print(allreduce.size_arg('64MiB'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(64 << 20), out.stderr

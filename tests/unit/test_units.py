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


def test_the_workload_accepts_what_the_harness_accepts():
    # bench/allreduce.py's --max-bytes goes through the same parser: 64MiB is
    # taken, and a bad size is refused by argparse before torch is touched.
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); sys.modules['torch'] = type(sys)('t');"
        "import allreduce; print(allreduce.size_arg('64MiB'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(64 << 20), out.stderr


@pytest.mark.parametrize("text", ["", "-1", "1e3", "1_0", "४", "0x10", "9" * 40, "2000", " "])
def test_counts_refuse_what_is_not_a_bounded_whole_number(text):
    with pytest.raises(ValueError, match="not a whole number|out of range"):
        units.count("threads", text)


@pytest.mark.parametrize("text", ["nan", "inf", "-1", "1e3", "5000", ""])
def test_megabytes_refuse_what_is_not_a_bounded_number(text):
    with pytest.raises(ValueError, match="not a number|out of range"):
        units.megabytes("bucket-cap-mb", text)


def test_the_workload_refuses_the_counts_the_harness_refuses():
    # train.py's options go through units' bounds: --threads 100000 is refused by
    # argparse (status 2) before torch is imported, as hpcbench refuses it.
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); sys.modules['torch'] = type(sys)('t');"
        "sys.modules['torch.nn'] = type(sys)('n'); sys.modules['torch.nn.functional'] = "
        "type(sys)('f'); sys.modules['torch'].nn = sys.modules['torch.nn'];"
        "sys.modules['torch.nn'].functional = sys.modules['torch.nn.functional'];"
        "sys.modules['gpumon'] = type(sys)('g'); import train;"
        "train.parse_args(['--threads', '100000'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "out of range: use 0 to 1024" in out.stderr, out.stderr

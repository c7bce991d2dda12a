"""bench/units.py as the workload uses it, each script in a process of its own with torch
stood in for: allreduce.py's --max-bytes takes the sizes the harness takes, train.py's
options refuse the counts it refuses (the parser: tests/unit/test_units.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_workload_accepts_what_the_harness_accepts():
    # bench/allreduce.py's --max-bytes goes through the same parser: 64MiB is
    # taken, and a bad size is refused by argparse before torch is touched.
    code = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); sys.modules['torch'] = type(sys)('t');"
        "import allreduce; print(allreduce.size_arg('64MiB'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(64 << 20), out.stderr


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

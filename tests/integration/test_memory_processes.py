"""The memory forecast's loss term against what a backward holds, measured in a process
of its own (the forecast: tests/unit/test_memory.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from hpcbench.performance import memory

pytestmark = pytest.mark.integration


def test_the_losss_backward_holds_three_fp32_tensors_of_the_logits():
    """In a process of its own: its peak resident memory above what it held before the
    loss is the loss's alone. Every large block is its own mapping (glibc's
    M_MMAP_THRESHOLD), returned to the system when freed; a small loss first pages in
    the code the backward runs; then the kernel's high-water mark is reset to what is
    resident (/proc/self/clear_refs, "5"), so that neither the import's peak nor pages
    the machine took back under load count as the loss's."""
    child = textwrap.dedent(
        """
        import torch, torch.nn.functional as F
        n, v = 1024, 32000
        logits = torch.randn(n, v, dtype=torch.bfloat16).requires_grad_()
        labels = torch.randint(0, v, (n,))
        small = torch.randn(4, 8, dtype=torch.bfloat16).requires_grad_()
        F.cross_entropy(small.float(), torch.randint(0, 8, (4,))).backward()

        def status(key):
            with open("/proc/self/status") as f:
                return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key + ":"))

        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        resident = status("VmRSS")
        F.cross_entropy(logits.float(), labels).backward()
        print((status("VmHWM") - resident) / (n * v * 4))
        """
    )
    pytest.importorskip("torch")
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    assert float(out.stdout) == pytest.approx(memory.LOSS_FP32_TENSORS, abs=0.2)

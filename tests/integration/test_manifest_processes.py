"""bench/'s manifest rendered as the stack role's `sha256sum` prints it, run here on the
same files, and read back (the manifest compared per node: tests/unit/test_manifest.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hpcbench.testbeds import manifest

pytestmark = pytest.mark.integration


def test_rendered_like_sha256sum_and_parsed_back(bench):
    text = manifest.render(manifest.compute(bench))
    assert text.splitlines()[1].endswith("  train.py")
    assert manifest.parse(text) == manifest.compute(bench)
    if shutil.which("sha256sum"):  # the role's tool, run as it would on a node
        out = subprocess.run(
            ["sha256sum", "models/a.json", "train.py"],
            cwd=bench,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert out == text

"""Fixtures the integration tests share with tests/unit's modules, imported from
where they are defined."""

from tests.unit.test_manifest import bench  # noqa: F401
from tests.unit.test_planted_files import victim  # noqa: F401
from tests.unit.test_slurm_scheduler import fake_slurm  # noqa: F401

"""One probe serves a testbed's sweep parts, so it times what any of them issues; and a
probe that did not time a collective a sweep asks for does not serve that sweep."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from hpcbench.campaign import campaign_file
from hpcbench.core.bench import units
from hpcbench.launchers.specs import ProbeSpec, SweepSpec
from hpcbench.measure import sweep
from hpcbench.measure.store import Store
from tests.unit.test_forecast import probe

REPO = Path(__file__).resolve().parents[2]


def test_a_campaign_s_probe_times_fsdp2_s_collectives_where_a_part_runs_fsdp2() -> None:
    lm = campaign_file.load(REPO / "campaigns" / "local-lm.yaml")  # parallel: [ddp, fsdp2]
    for tb in lm.testbeds:
        assert [p.workload.parallel for p in tb.parts] == ["ddp", "fsdp2"]
        # the DDP part runs first and probes for both
        assert {p.sweep.probe.collectives for p in tb.parts if p.sweep.probe} == {
            tuple(units.COLLECTIVES)
        }
    cnn = campaign_file.load(REPO / "campaigns" / "local.yaml")
    for tb in cnn.testbeds:
        assert [p.sweep.probe.collectives for p in tb.parts if p.sweep.probe] == [("all_reduce",)]


def _probe(**collectives: list[dict]) -> dict:
    return probe(2, 1e8, backend="ddp", **collectives)


def test_a_probe_of_the_all_reduce_alone_does_not_serve_an_fsdp2_sweep(tmp_path) -> None:
    target = SimpleNamespace(
        testbed=SimpleNamespace(env="local"), workers=lambda n: n, backend="ddp"
    )
    todo = [(SimpleNamespace(nodes=2, workers=2), 0)]
    store = Store(tmp_path)
    store.append(_probe())
    ddp = SweepSpec(batches=(8,), out=tmp_path, probe=ProbeSpec(budget_s=60))
    fsdp2 = SweepSpec(
        batches=(8,), out=tmp_path, probe=ProbeSpec(budget_s=60, collectives=units.COLLECTIVES)
    )
    assert sweep.planned_probes(target, ddp, store, todo)[1] == []
    assert sweep.planned_probes(target, fsdp2, store, todo)[1] == [2]
    timed = [{"bytes": 1 << 20, "time_s": 0.01}]
    store.append(_probe(all_gather=timed, reduce_scatter=timed))
    assert sweep.planned_probes(target, fsdp2, store, todo)[1] == []

"""What `hpcbench probe` prints of a probe record (hpcbench/measure/probe.py format_probe)."""

from __future__ import annotations

from hpcbench.measure import probe
from tests.unit.test_allreduce_model import HIDDEN, RESOLVED

RECORD = {
    "workers": 2,
    "nodes": 2,
    "backend": "horovod",
    "status": "ok",
    "results": [
        {"bytes": 67108864, "time_s": 0.563, "algbw": 1.19e8, "busbw": 1.19e8, "cpu_s": 0.558}
    ],
}
WORK = {"allreduces": 5, "bytes": 67108864, "lost_s_per_byte": 1.04e-9}


def test_the_cpu_work_and_the_background_share_are_printed_where_measured():
    text = probe.format_probe({**RECORD, "cpu_work": {**WORK, "background_share": 0.107}})
    assert "beside 5 all-reduces of 67108864 B lost 1.04 ns per byte" in text
    assert "the running backend's threads took 10.7% of the computation's cores" in text


def test_older_and_gpu_probes_print_no_background():
    older = probe.format_probe({**RECORD, "cpu_work": WORK})  # from before it was measured
    gpu = probe.format_probe({**RECORD, "cpu_work": None})
    # No per-rank figures: no noise to print, nor to tell the figure from.
    assert older.splitlines()[-1].endswith("lost 1.04 ns per byte (ranks' mean)")
    assert "background" not in older
    assert "CPU work" not in gpu and "background" not in gpu


def test_the_cpu_work_is_printed_with_its_noise_and_said_where_the_link_hid_it():
    hidden = probe.format_probe({**RECORD, "cpu_work": HIDDEN})
    assert "lost -1.90 ± 1.36 ns per byte (ranks' mean); not told from its noise" in hidden
    assert "no forecast of another testbed takes it" in hidden
    resolved = probe.format_probe({**RECORD, "cpu_work": RESOLVED})
    assert "lost 1.20 ± 0.10 ns per byte (ranks' mean)" in resolved
    assert "not told" not in resolved

"""What `hpcbench probe` prints of a probe record (hpcbench/probe.py format_probe)."""

from __future__ import annotations

from hpcbench import probe

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
    assert "lost 1.04 ns per byte" in older and "background" not in older
    assert "CPU work" not in gpu and "background" not in gpu

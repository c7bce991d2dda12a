import io

import pytest

from hpcbench import cli
from hpcbench.core.errors import UsageError
from hpcbench.core.progress import Progress, format_duration
from hpcbench.measure.store import Store
from hpcbench.performance import allreduce_model
from hpcbench.reports import report


def _run(workers, times, batch=32, repeat=0, env="vw", status="ok", **extra):
    return {
        "kind": "run",
        "status": status,
        "env": env,
        "model": "resnet50",
        "backend": "horovod",
        "batch": batch,
        "image_size": 224,
        "data": "synthetic",
        "gpus_per_node": 1,
        "nodes": workers,
        "workers": workers,
        "repeat": repeat,
        "steps": 10,
        "window_times": times,
        "weights_in_sync": True,
        "allreduce_bytes": 102e6,
        "fingerprint": {
            "env": env,
            "torch": "2.15.0",
            "horovod": "0.28.1",
            "link_rate": "1gbit",
            "hosts": [f"n{i}" for i in range(workers)],
        },
        **extra,
    }


def _store(tmp_path, env="vw", slow=1.0):
    store = Store(tmp_path / env)
    link = allreduce_model.LinkModel(4, 50e-6, 117e6)
    store.append(
        {
            "kind": "probe",
            "status": "ok",
            "env": env,
            "backend": "horovod",
            "nodes": 4,
            "workers": 4,
            "results": [
                {
                    "bytes": s,
                    "time_s": link.allreduce_time(s),
                    "algbw": 0,
                    "busbw": allreduce_model.busbw(s, link.allreduce_time(s), 4),
                }
                for s in (4096, 1 << 26)
            ],
        }
    )
    for repeat in range(2):
        for batch in (32, 64):
            store.append(_run(1, [1.0 * slow, 1.02 * slow], batch, repeat, env))
            store.append(_run(4, [1.6 * slow, 1.7 * slow], batch, repeat, env))
    store.append(_run(2, [], 32, 0, env, status="failed", error="timed out after 2 s\nlast"))
    return store


def test_report_tables_plots_and_html(tmp_path):
    store = _store(tmp_path)
    md_path, html_path = report.build_report(str(store.dir))
    md = md_path.read_text()
    assert "### resnet50, horovod, batch 32/worker, 224 px, synthetic data, env vw" in md
    # 1 worker: 320 img/s on average; 4 workers 4*320/1.65 -> E about 0.61.
    assert "| 4 | 4 | 2 |" in md and "0.61" in md
    assert "| link_rate | 1gbit |" in md and "| horovod | 0.28.1 |" in md
    assert "## All-reduce probes" in md and "## Failed runs" in md and "timed out" in md
    assert "ResNet-50 has about 25.6 M parameters" in md  # context for the model measured
    pngs = sorted((store.dir / "plots").glob("*.png"))
    # Throughput and efficiency; where the time went (stacked bars per node count).
    assert [p.name for p in pngs] == [
        "00-vw-resnet50-horovod-time.png",
        "00-vw-resnet50-horovod.png",
    ]
    assert all(p.stat().st_size > 10_000 for p in pngs)
    html = html_path.read_text()
    assert html.startswith("<!doctype html>") and "<table>" in html
    assert all(p.name in html for p in pngs)


def test_predicted_band_appears_where_a_probe_matches(tmp_path):
    md = report.build_report(str(_store(tmp_path).dir))[0].read_text()
    four = [line for line in md.splitlines() if line.startswith("| 4 | 4 |") and "repeats" in line]
    # T1 = 0.101 s; T_ar = 6 x 50 us + 1.5 x 102 MB / 117 MB/s = 1.31 s:
    # no overlap 0.101 / 1.41 = 0.07, full overlap 0.101 / 1.31 = 0.08.
    assert len(four) == 2 and all(line.split("|")[12].strip() == "0.07-0.08" for line in four)
    one = [line for line in md.splitlines() if line.startswith("| 1 | 1 |") and "repeats" in line]
    assert all(line.split("|")[12].strip() == "1.00-1.00" for line in one)


def test_compare_side_by_side(tmp_path):
    a, b = _store(tmp_path, "vw"), _store(tmp_path, "vw10g", slow=0.5)
    text = report.comparison(str(a.dir), str(b.dir))
    assert "| env | vw | vw10g |" in text
    row = next(
        line for line in text.splitlines() if line.startswith("| resnet50 | horovod | 32 | 4 |")
    )
    assert "| 2.00 |" in row  # B is twice as fast


def test_report_and_compare_cli(tmp_path, capsys):
    store = _store(tmp_path)
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    assert cli.main(["compare", str(store.dir), str(store.dir)]) == 0
    assert "Configurations in both" in capsys.readouterr().out
    assert cli.main(["report", "--out", str(tmp_path / "none")]) == 2
    assert "results.jsonl not found" in capsys.readouterr().err


def test_empty_store_is_a_usage_error(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    with pytest.raises(UsageError, match="holds no runs"):
        report.load(str(tmp_path))


def test_formatting():
    assert report.fmt(None) == "-" and report.fmt(float("nan")) == "-"
    assert report.fmt(12.345, 1, 0.25) == "12.3 ± 0.2"
    assert format_duration(59) == "59s" and format_duration(61) == "1m01s"
    assert format_duration(3700) == "1h01m"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_plain_lines_with_eta_off_a_terminal():
    out = io.StringIO()
    p = Progress(3, out)
    p.start("a")
    p.finish("a", True, 10.0, "5 images/s")
    p.finish("b", False, 20.0, "boom")
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/3] a ..."
    assert lines[1] == "[1/3] a: ok in 10s 5 images/s, ETA 20s"
    assert lines[2] == "[2/3] b: FAILED in 20s boom, ETA 15s"
    assert lines[-1].endswith("2 runs in 0s, 1 failed")
    assert "\r" not in out.getvalue()


def test_progress_bar_on_a_terminal():
    out = _Tty()
    p = Progress(4, out, width=8)
    p.start("x")
    p.finish("x", True, 30.0)
    text = out.getvalue()
    assert "[........] 0/4 ETA --" in text and "[##......] 1/4 ETA 1m30s" in text


def test_progress_bar_shows_no_eta_after_the_last_run():
    out = _Tty()
    p = Progress(2, out, width=8)
    p.finish("x", True, 30.0)
    p.finish("y", True, 30.0)
    last = out.getvalue().rsplit("\r", 1)[-1]
    assert "2/2" in last and "ETA" not in last and "done" in last


def test_the_environment_gives_the_machines_cores_and_the_nodes_cpus_apart(tmp_path):
    # A container node of one CPU (its quota) on a machine of two cores.
    store = Store(tmp_path / "vw")
    use = {"per_host": [{"cpus": 1.0, "cpu_limit": "cgroup quota 100000/100000 us"}]}
    for workers in (1, 2):
        run = _run(workers, [1.0, 1.0], nodes_use=use)
        run["fingerprint"]["cores"] = 2
        store.append(run)
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    md = (store.dir / "report.md").read_text()
    assert "| cores: cores of the machine the node runs on | 2 |" in md
    assert (
        "| CPUs a node may use (its quota, else the CPUs it may run on) "
        "| 1 (cgroup quota 100000/100000 us) |"
    ) in md


def test_a_damaged_store_still_reports_and_says_how_many_lines_it_skipped(tmp_path, capsys):
    store = _store(tmp_path)
    with store.path.open("ab") as f:
        f.write(b'7\n\xff\xfe\n{"kind": "run"}\n')
    store.append(_run(4, [0.0, 1.0], repeat=5))  # a 0 s window cannot give a throughput
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    md = (store.dir / "report.md").read_text()
    assert "4 damaged lines of results.jsonl were skipped (line 11, 12, 13, 14)" in md
    assert "| 4 | 4 | 2 |" in md and "0.61" in md  # every good run is there, as without damage


def test_report_states_the_noise_floor_and_compare_says_what_is_beyond_it(tmp_path):
    def noisy(env, slow):  # baselines that vary by 5% between repeats
        store = Store(tmp_path / env)
        for repeat, wobble in enumerate((1.0, 1.05, 0.95)):
            store.append(_run(1, [slow * wobble] * 3, 32, repeat, env))
        return store

    a = noisy("a", 1.0)
    md = report.build_report(str(a.dir))[0].read_text()
    assert "Noise floor: the single-worker throughput is known to ±12.4% (95% CI)" in md
    same = report.comparison(str(a.dir), str(noisy("b", 1.03).dir))
    faster = report.comparison(str(a.dir), str(noisy("c", 0.5).dir))
    row = next(r for r in same.splitlines() if r.startswith("| resnet50 | horovod | 32 | 1 |"))
    assert "no (within noise)" in row  # 3% slower, well inside both intervals
    row = next(r for r in faster.splitlines() if r.startswith("| resnet50 | horovod | 32 | 1 |"))
    assert "| yes |" in row


def test_where_the_time_went(tmp_path):
    md = report.build_report(str(_store(tmp_path).dir))[0].read_text()
    rows = [
        line.split("|")[1:-1]
        for line in md.splitlines()
        if line.startswith("| 4 | 4 |") and "repeats" not in line
    ]
    step, compute, data, exposed, overlapped = (float(c) for c in rows[0][4:9])
    # T1 = 101 ms, T4 = 165 ms: 64 ms exposed; the probe's T_ar (1.31 s) would hide more
    # than the whole computation, so the overlap is capped at the 101 ms of compute.
    assert (step, compute, data, exposed, overlapped) == (165.0, 101.0, 0.0, 64.0, 101.0)
    assert "Node CPU limit: not recorded" in md


def test_a_point_outside_its_band_names_the_likeliest_cause(tmp_path):
    md = report.build_report(str(_store(tmp_path).dir))[0].read_text()
    rows = [
        line for line in md.splitlines() if line.startswith("| 4 | 4 |") and "repeats" not in line
    ]
    # E = 0.61 against a band of 0.07-0.08: above it, and nothing in the run explains it
    # (no data time, no straggler or node figures recorded).
    assert all("above the band: no cause stands out" in r for r in rows)


# Records that parse as JSON but do not fit the store's schema: skipped, named and
# counted; values that fit but are awkward (long or NUL-bearing env names, a model
# name in mathtext): reported as written. `report` never crashes on either.


def _crafted(tmp_path, **fields):
    """The good store of _store with every run and probe carrying `fields`."""
    out = Store(tmp_path / "crafted")
    for record in _store(tmp_path).records():
        record.pop("schema")
        out.append({**record, **fields} if record["kind"] in ("run", "probe") else record)
    return out


_PROBE = {
    "kind": "probe",
    "status": "ok",
    "backend": "horovod",
    "nodes": 4,
    "workers": 4,
    "results": [{"bytes": 4096, "time_s": 1e-4, "algbw": 1.0, "busbw": 1.0}],
}
UNFIT = {
    "nodes_use as text": _run(4, [1.6, 1.7], repeat=7, nodes_use="busy"),
    "rank_window_times flat": _run(4, [1.6, 1.7], repeat=7, rank_window_times=[1.6, 1.7]),
    "a probe without env": _PROBE,
    "nodes = 10**18": {**_run(4, [1.6, 1.7], repeat=7), "nodes": 10**18},
    "fingerprint a list": _run(4, [1.6, 1.7], repeat=7, fingerprint=[1]),
}


@pytest.mark.parametrize("case", UNFIT)
def test_a_record_that_does_not_fit_the_schema_is_skipped_named_and_counted(tmp_path, capsys, case):
    store = _store(tmp_path)
    store.append(UNFIT[case])
    line = len(store.path.read_text().splitlines())
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    assert f"{store.path}:{line}: skipping a line: a {UNFIT[case]['kind']} record whose " in (
        capsys.readouterr().err
    )
    md = (store.dir / "report.md").read_text()
    assert f"1 damaged lines of results.jsonl were skipped (line {line})" in md
    assert "| 4 | 4 | 2 |" in md  # the good runs are all there


@pytest.mark.parametrize(
    ("field", "value"),
    [("env", "e" * 300), ("env", "a\x00b/../c"), ("model", "$\\foo$"), ("model", "$x^$")],
)
def test_awkward_names_are_reported_as_written(tmp_path, field, value):
    store = _crafted(tmp_path, **{field: value})
    assert cli.main(["report", "--out", str(store.dir)]) == 0
    plots = sorted((store.dir / "plots").iterdir())
    assert plots and all(
        len(p.name.encode()) <= 255 and p.parent == store.dir / "plots" for p in plots
    )
    md = (store.dir / "report.md").read_text()
    assert value in md

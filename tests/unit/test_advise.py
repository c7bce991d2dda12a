"""`hpcbench advise`: every testbed of the campaign files searched over node counts and
the layouts a model allows; the front is exactly the options no other beats on time,
GPU-hours and cost; each other option names one that beats it, or says it does not fit;
the campaign file it writes is forecast by `campaign plan` as the advice forecast it;
bad input is one line, exit 2, and nothing written."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import advice, campaign_file, forecast
from hpcbench.core.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
LLAMA_8B = REPO / "tests" / "fixtures" / "llama-3-8b" / "config.json"
LLAMA_70B = REPO / "tests" / "fixtures" / "llama-3-70b" / "config.json"
SITES = [REPO / "campaigns" / "lrz.yaml", REPO / "campaigns" / "gwdg.yaml"]

# Two partitions of a cluster: 4 A100 80GB a node at 1 EUR per GPU-hour, and 8 H100 a
# node at 3; both with the link across nodes given.
TWO = """\
name: two
out: {out}
sweep: {{model: llama-1b, backend: ddp, seq_len: 1024, batch: [4], nodes: 1,
         device: cuda, repeats: 1, no_probe: true}}
testbeds:
  - name: a100
    slurm: {{partition: a100, python: /opt/py/bin/python, gpus_per_node: 4, nodes: 4}}
    hardware: {{accelerator: A100-SXM4-80GB, link: 100gbit, transport: rdma, intra_node: nvlink3}}
    price: {{amount: 1, currency: EUR, per: gpu-hour}}
  - name: h100
    slurm: {{partition: h100, python: /opt/py/bin/python, gpus_per_node: 8, nodes: 2}}
    hardware: {{accelerator: H100 80GB HBM3, link: 200gbit, transport: rdma, intra_node: nvlink4}}
    price: {{amount: 3, currency: EUR, per: gpu-hour}}
"""


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def two(tmp_path: Path) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(textwrap.dedent(TWO).format(out=tmp_path / "out"))
    return path


def eight_b(tmp_path: Path) -> list[str]:
    """Llama 3 8B, 20B tokens, over the two partitions."""
    return ["--model", str(LLAMA_8B), "--tokens", "20B", "--campaign", str(two(tmp_path))]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["advise", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def advice_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def beats(a: dict, b: dict) -> bool:
    keys = [k for k in ("hours", "gpu_hours", "cost") if a[k] is not None and b[k] is not None]
    return all(a[k] <= b[k] for k in keys) and any(a[k] < b[k] for k in keys)


def test_the_front_is_every_option_no_other_beats_and_each_other_names_its_better(tmp_path, capsys):
    data = advice_json(
        capsys, "--model", str(LLAMA_8B), "--tokens", "20B", "--campaign", str(two(tmp_path))
    )
    options = {o["number"]: o for o in data["options"]}
    scored = [o for o in options.values() if o["fits"] and o["hours"] is not None]
    assert len(scored) > 10  # node counts x layouts on two partitions
    front = {o["number"] for o in scored if not any(beats(a, o) for a in scored)}
    assert set(data["front"]) == front
    # Both partitions searched: every node count up to each one's `nodes:`.
    assert {(o["testbed"], o["nodes"]) for o in options.values()} >= {
        ("a100", n) for n in (1, 2, 3, 4)
    } | {("h100", 1), ("h100", 2)}
    for o in scored:
        if o["number"] in front:
            continue
        named = int(o["verdict"].split("than #")[1].split()[0])
        assert beats(options[named], o), (o["verdict"], options[named])
    # The bests are on the front, and each is the best of the front on its own.
    for word, key in (("time", "hours"), ("gpu_hours", "gpu_hours"), ("cost", "cost")):
        best = options[data["best"][word]]
        assert best["number"] in front
        assert best[key] == min(options[n][key] for n in front)
    # Every front option's numbers carry their sources: the one-worker figure, E's link,
    # the memory beside the GPU's, the energy's board power; cost from the price.
    for n in front:
        o = options[n]
        assert any(s.startswith("one worker at batch") for s in o["sources"]), o["sources"]
        assert o["memory_line"] and " of 80 GB" in o["memory_line"]
        assert "W (" in o["energy_source"] and o["energy_kwh"] > 0
        assert math.isclose(o["cost"], o["gpu_hours"] * (1 if o["testbed"] == "a100" else 3))
        assert o["hours_low"] <= o["hours"] <= o["hours_high"]


@pytest.mark.parametrize("chosen", ["front", "all"])
def test_each_chosen_option_is_a_cell_campaign_plan_forecasts_the_same(tmp_path, capsys, chosen):
    """--out writes the front (--all: every option that fits) as a testbed per place and
    layout; its cells of several workers are exactly the chosen options, each forecast
    by the file's own plan as the advice forecast it."""
    out = tmp_path / "advice.yaml"
    more = ["--all"] if chosen == "all" else []
    data = advice_json(capsys, *eight_b(tmp_path), "--out", str(out), *more)
    picked = [
        o
        for o in data["options"]
        if (o["number"] in data["front"]) or (chosen == "all" and o["fits"] and o["hours"])
    ]
    assert len(picked) > (len(data["front"]) if chosen == "all" else 0)
    by_cell = {(o["name"], o["workers"], o["layout"]["parallel"]): o for o in picked}
    assert len(by_cell) == len(picked)  # no two options are one cell
    written = campaign_file.load(out)  # `campaign run` takes it as it is
    # What it was advised for, which its report draws the measured front of.
    assert written.advice is not None
    assert (written.advice.model, written.advice.amount, written.advice.unit) == (
        str(LLAMA_8B),
        20e9,
        "tokens",
    )
    cells = set()
    for tb in written.testbeds:
        for f in forecast.testbed_forecast(written, tb):
            if f.cell.workers == 1:
                continue  # the baseline every sweep measures first
            part = next(p for p in tb.parts if f.cell in p.cells)
            key = (tb.name, f.cell.workers, part.workload.parallel)
            cells.add(key)
            o = by_cell[key]
            assert f.per_s == pytest.approx(o["per_s"], rel=1e-12)
            assert f.efficiency == pytest.approx(o["efficiency"], rel=1e-12)
            assert part.workload.tp == o["layout"]["tp"]
            assert part.workload.grad_accum == o["layout"]["grad_accum"]
            assert part.workload.activation_checkpoint == o["layout"]["checkpoint"]
            assert f.cell.batch == o["layout"]["micro_batch"]
    assert cells == {k for k in by_cell if k[1] > 1}


def test_campaign_run_takes_the_file_advise_writes_unchanged(tmp_path, capsys):
    out = tmp_path / "advice.yaml"
    code, _, err = run(
        capsys,
        *eight_b(tmp_path),
        "--global-batch",
        "512",
        "--out",
        str(out),
    )
    assert code == 0, err
    assert cli.main(["campaign", "run", "--dry-run", str(out)]) == 0
    scripts = capsys.readouterr().out
    # Every advised option's job script, its layout on the workload's command line.
    for tb in campaign_file.load(out).testbeds:
        [part] = tb.parts
        assert f"--partition={tb.parts[0].target.slurm.partition}" in scripts or tb.where in scripts
        if part.workload.tp > 1:
            assert f"--tp {part.workload.tp}" in scripts
        if part.workload.grad_accum > 1:
            assert f"--grad-accum {part.workload.grad_accum}" in scripts


def test_a_global_batch_is_kept_by_every_option_with_its_accumulation(tmp_path, capsys):
    data = advice_json(
        capsys,
        *eight_b(tmp_path),
        "--global-batch",
        "256",
    )
    for o in data["options"]:
        lay = o["layout"]
        assert lay["micro_batch"] * lay["grad_accum"] * (o["workers"] // lay["tp"]) == 256, o


def test_a_model_that_fits_nowhere_names_the_least_memory_any_layout_needs(tmp_path, capsys):
    text = (
        two(tmp_path)
        .read_text()
        .replace("nodes: 4}", "nodes: 1}")
        .replace("nodes: 2}", "nodes: 1}")
    )
    path = tmp_path / "small.yaml"
    path.write_text(text)
    out = tmp_path / "advice.yaml"
    code, stdout, err = run(
        capsys,
        "--model",
        str(LLAMA_70B),
        "--tokens",
        "1B",
        "--campaign",
        str(path),
        "--out",
        str(out),
    )
    assert code == 2 and stdout == "" and not out.exists()
    [line] = err.strip().splitlines()
    assert "fits nowhere searched: the least memory per GPU is" in line and "GB" in line


@pytest.mark.parametrize("flag", [["--all"], ["--results", "r"]])
def test_what_only_out_takes_is_refused_without_it(tmp_path, capsys, flag):
    code, stdout, err = run(capsys, *eight_b(tmp_path), *flag)
    assert code == 2 and stdout == "" and "give --out FILE" in err


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--tokens", "0"], "--tokens '0': give a count above 0"),
        (["--tokens", "lots"], "--tokens 'lots'"),
        (["--tokens", "1B", "--samples", "5"], "give one of --tokens"),
        (["--tokens", "1B", "--testbed", "nope"], "--testbed nope: no testbed of that name"),
        (
            ["--samples", "1M", "--model", "resnet50", "--global-batch", "7"],
            "--global-batch 7: no layout keeps it",
        ),
        (["--tokens", "1B", "--model", "resnet50"], "is a CNN, whose budget is --samples"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, argv, says):
    out = tmp_path / "advice.yaml"
    model = [] if "--model" in argv else ["--model", str(LLAMA_8B)]
    code, stdout, err = run(
        capsys, *model, *argv, "--campaign", str(two(tmp_path)), "--out", str(out)
    )
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert says in line and stdout == "" and not out.exists()


@given(st.text(alphabet="0123456789.eEkMBGT -+x", max_size=12))
@settings(max_examples=200, deadline=None)
def test_a_budget_is_a_count_above_0_or_one_line(text):
    try:
        value = advice.amount(text, "--tokens")
    except UsageError as err:
        assert str(err).startswith("--tokens ") and "\n" not in str(err)
    else:
        assert value > 0 and math.isfinite(value)


@given(
    st.lists(
        st.tuples(st.floats(1, 1e4), st.floats(1, 1e6), st.one_of(st.none(), st.floats(1, 1e6))),
        min_size=1,
        max_size=12,
    )
)
@settings(max_examples=200, deadline=None)
def test_the_front_of_any_options_is_their_pareto_front(points):
    options = [
        advice.Option(
            n + 1,
            "f",
            "t",
            "t",
            1,
            1,
            advice.Layout("ddp", 1),
            "t",
            {},
            {},
            True,
            hours=h,
            gpu_hours=g,
            cost=c,
        )
        for n, (h, g, c) in enumerate(points)
    ]
    ranked = advice.Advice(advice.Request("m", 1.0, "tokens", ()), options, [])
    advice._rank(ranked)
    as_dicts = [{"hours": o.hours, "gpu_hours": o.gpu_hours, "cost": o.cost} for o in options]
    for o, d in zip(options, as_dicts, strict=True):
        assert o.front == (not any(beats(x, d) for x in as_dicts if x is not d))
    assert any(o.front for o in options)


@pytest.mark.parametrize("model", [LLAMA_8B, LLAMA_70B])
def test_the_sites_front_gives_every_number_its_source(capsys, model):
    """campaigns/lrz.yaml and gwdg.yaml, for Llama 3 8B and 70B: an advice whose lines
    hold no unknown but the queue waits no file gives (the V100 and P100 partitions,
    named without their form or size, get the forms' least rate and smallest size)."""
    files = [a for p in SITES for a in ("--campaign", str(p))]
    code, out, err = run(capsys, "--model", str(model), "--tokens", "20B", *files)
    assert code == 0, err
    front = out.split("the front")[1].split("fell out")[0]
    assert "#" in front
    for line in out.splitlines():
        if "unknown" in line:
            assert line.strip().startswith("queue wait per job: unknown"), line
    assert "V100 names no size of 16 GB, 32 GB: the smallest assumed" in out
    data = advice_json(capsys, "--model", str(model), "--tokens", "20B", *files)
    assert data["front"] and all(
        o["per_s"] and o["sources"] for o in data["options"] if o["number"] in data["front"]
    )


def test_a_transformer_on_a_gpu_without_bf16_is_forecast_in_fp32(tmp_path, capsys):
    """Volta and Pascal have no bf16 (the workload trains fp32 there, bench/lm.py
    training_precision): one worker is the fp32 peak's, and the job computes in fp32."""
    path = two(tmp_path)
    path.write_text(path.read_text().replace("A100-SXM4-80GB", "V100-SXM2-32GB"))
    data = advice_json(capsys, "--model", "llama-1b", "--tokens", "1B", "--campaign", str(path))
    v100 = [o for o in data["options"] if o["testbed"] == "a100" and o["per_s"]]
    assert v100
    for o in v100:
        one = next(s for s in o["sources"] if s.startswith("one worker at batch"))
        assert "15.7 TFLOPS fp32 (V100 SXM2" in one, one
    from hpcbench.performance import plans

    assert not plans.Job("llama-1b", 8, seq_len=1024, bf16_gpu=False).bf16
    assert plans.Job("llama-1b", 8, seq_len=1024).bf16


def test_plot_draws_the_options_as_a_png_and_a_bad_path_is_refused(tmp_path, capsys):
    png = tmp_path / "front.png"
    code, out, err = run(
        capsys,
        *eight_b(tmp_path),
        "--plot",
        str(png),
    )
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"drawn: {png}" in out
    code, out, err = run(
        capsys,
        *eight_b(tmp_path),
        "--plot",
        "a\nb.png",
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_the_advice_docs_campaigns_md_shows_is_what_the_command_prints(capsys):
    """docs/campaigns.md's advice, as a user reads it: each line it shows (but its
    elisions and the command) is a line the command prints today."""
    text = (REPO / "docs" / "campaigns.md").read_text()
    section = text.split("## Where to book: an advice over the files")[1].split("\n## ")[0]
    shown = [
        line[4:]
        for line in section.splitlines()
        if line.startswith("    ")
        and not line.lstrip().startswith(("$", "...", "--campaign"))
        and line.strip()
    ]
    assert len(shown) > 15
    files = [a for p in SITES for a in ("--campaign", str(p))]
    code, out, err = run(capsys, "--model", str(LLAMA_8B), "--tokens", "20B", *files)
    assert code == 0, err
    printed = set(out.replace(f"{REPO}/", "").splitlines())
    missing = [line for line in shown if line not in printed]
    assert not missing, missing

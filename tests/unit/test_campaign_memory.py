"""A transformer cell's memory per GPU before anything is booked: `campaign plan` gives
it beside the testbed's accelerator memory (and once per testbed where that is not
known, with the key that gives it), names the cells that do not fit with what would;
`campaign run` launches none of those, journals each as skipped with why, and counts
it; `--dry-run` says which it would skip and prints the scripts of the others. One
function (plans.memory_layout) makes a cell's layout for the campaign and `predict`."""

from __future__ import annotations

import json
import string
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, commands
from hpcbench.core.bench import peak_flops
from hpcbench.measure.store import Store
from hpcbench.performance import memory, sharded_model
from tests.unit.test_campaign import Fakes

LLAMA_1B = sharded_model.shape("llama-1b")
GB = 10**9

# Two partitions of one GPU a node, the same sweep: llama-1b at batch 4 of 1024 tokens
# under DDP on one GPU, about 36 GB (docs/method.md, "Memory per GPU"): it fits an
# 80 GB A100, not a 40 GB one.
TWO_SIZES = """\
name: mem
out: {out}
sweep: {{model: llama-1b, backend: ddp, seq_len: 1024, batch: [4], nodes: 1,
         device: cuda, repeats: 1, no_probe: true}}
testbeds:
  - name: big
    slurm: {{partition: big, python: /opt/py/bin/python, gpus_per_node: 1}}
    hardware: {{accelerator: {big}}}
  - name: small
    slurm: {{partition: small, python: /opt/py/bin/python, gpus_per_node: 1}}
    hardware: {{accelerator: {small}}}
"""


@pytest.fixture(autouse=True)
def _own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def write(tmp_path: Path, text: str = TWO_SIZES, **fill: str) -> Path:
    values = {"big": "A100-SXM4-80GB", "small": "A100-SXM4-40GB", **fill}
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text).format(out=tmp_path / "out", **values))
    return path


def plan(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["campaign", "plan", str(path)]) == 0
    return capsys.readouterr().out


def block_of(out: str, name: str) -> list[str]:
    """The plan's lines of one testbed, its heading to the line before the next."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("testbed ") and name in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


def memory_line(block: list[str], cell_id: str) -> str:
    """The line under a cell's row: its memory per GPU."""
    row = next(i for i, line in enumerate(block) if line.lstrip().startswith(cell_id))
    return block[row + 1].strip()


def one_gpu_ddp() -> memory.Layout:
    """The layout of a one-worker DDP cell, as the workload trains it: built by hand."""
    return memory.Layout(parallel="ddp", dp=1)


# A local testbed under the campaign's stand-ins (tests/unit/test_campaign.py, Fakes):
# GPT-2 medium at 1024 tokens on a V100 of the size given.
LOCAL = """\
name: mem
out: {out}
sweep: {{model: gpt2-medium, backend: ddp, parallel: fsdp2, seq_len: 1024,
         batch: {batch}, nodes: {nodes}, device: cuda, repeats: 1}}
testbeds:
  - name: a
    env: local
    settings: {{node_count: {node_count}, link_rate: 1gbit}}
    hardware: {{accelerator: {gpu}}}
    expect: {{tokens_per_s: 3000}}
"""


def local(tmp_path: Path, gpu: str, batch: str = "[8]", nodes: str = "1") -> Path:
    path = tmp_path / "c.yaml"
    count = max(int(n) for n in nodes.strip("[]").split(","))
    path.write_text(
        LOCAL.format(out=tmp_path / "out", batch=batch, nodes=nodes, node_count=count, gpu=gpu)
    )
    return path


def test_the_plan_gives_each_transformer_cells_memory_beside_its_gpus_and_names_what_would_fit(
    tmp_path, capsys
):
    path = write(tmp_path)
    out = plan(path, capsys)
    campaign = campaign_file.load(path)
    big, small = campaign.testbeds
    need = memory.breakdown(LLAMA_1B, 1024, 4, one_gpu_ddp()).total
    # Fits the 80 GB GPU: its memory beside the GPU's, and the figure's source once.
    block = block_of(out, "big")
    assert memory_line(block, big.cells[0].id) == f"memory {need / 1e9:.1f} GB per GPU of 80 GB"
    [source] = [line for line in block if "A100-SXM4-80GB" in line and "memory" in line]
    assert "80 GB (A100: https://www.nvidia.com/en-us/data-center/a100/" in source
    assert "not run" not in "\n".join(block)
    # Does not fit the 40 GB one: the verdict, and what would (one GPU is all it has).
    found = memory.smallest_layout(LLAMA_1B, 1024, 4, one_gpu_ddp(), 40 * GB, 1, 1)
    verdict = memory.verdict(need, 40 * GB, one_gpu_ddp(), found, 1)
    assert verdict == "does not fit in 40 GB; fits with --activation-checkpoint selective"
    block = block_of(out, "small")
    assert memory_line(block, small.cells[0].id) == f"memory {need / 1e9:.1f} GB per GPU: {verdict}"
    [row] = [line for line in block if line.lstrip().startswith(small.cells[0].id)]
    assert row.rstrip().endswith("not run: it does not fit")
    # Nothing of it is booked: no check job, no GPU-hours.
    assert "verify" not in "\n".join(block)
    assert "  nothing is booked: no cell of it fits" in block
    assert "campaign run` skips 1 cell that does not fit" in out
    assert not (tmp_path / "out").exists()


def test_an_accelerator_whose_memory_is_not_known_is_said_once_with_the_key_that_gives_it(
    tmp_path, capsys
):
    text = TWO_SIZES.replace("batch: [4]", "batch: [1, 4]")
    out = plan(write(tmp_path, text, small="A100"), capsys)
    block = "\n".join(block_of(out, "small"))
    assert block.count("whether each cell fits: unknown") == 1
    _, why = peak_flops.memory("A100")
    assert why in block and "`hardware: {accelerator: NAME}`" in block
    # Each cell still gets its memory, and is not skipped: only a known size stops one.
    assert block.count(" GB per GPU\n") + block.endswith(" GB per GPU") == 2
    assert "not run" not in block


def test_a_cnn_or_a_run_on_cpus_gets_no_memory_line(tmp_path, capsys):
    cnn = TWO_SIZES.replace("model: llama-1b, backend: ddp, seq_len: 1024", "model: resnet18")
    assert cnn != TWO_SIZES
    assert "GB per GPU" not in plan(write(tmp_path, cnn), capsys)
    cpu = TWO_SIZES.replace("device: cuda", "device: cpu")
    assert "GB per GPU" not in plan(write(tmp_path, cpu), capsys)


def test_predict_and_the_campaign_give_a_layout_one_memory(tmp_path, capsys):
    """The two-worker FSDP2 cell of a node of two GPUs, and predict's row for it."""
    text = TWO_SIZES.replace("backend: ddp,", "backend: ddp, parallel: fsdp2,")
    text = text.replace(
        "gpus_per_node: 1}}\n    hardware: {{accelerator: {big}",
        "gpus_per_node: 2}}\n    sweep: {{gpus_per_node: [2]}}\n    hardware: {{accelerator: {big}",
    )
    path = write(tmp_path, text)
    out = plan(path, capsys)
    big = campaign_file.load(path).testbeds[0]
    [two] = [c for c in big.cells if c.workers == 2]
    argv = "predict --model llama-1b --parallel fsdp2 --batch 4 --seq-len 1024 --workers 2"
    argv += " --gpus-per-node 2 --single-worker-tps 1000 --link 10gbit --json"
    assert cli.main([*argv.split(), "--accelerator", "A100-SXM4-80GB"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["memory_fits"] is True
    line = memory_line(block_of(out, "big"), two.id)
    assert line == f"memory {row['memory_bytes'] / 1e9:.1f} GB per GPU of 80 GB"


def test_run_launches_no_cell_that_does_not_fit_journals_why_and_counts_it(
    tmp_path, fakes: Fakes, capfd
):
    """On a 16 GB GPU, batch 2 fits one or two workers, batch 8 neither; the others run,
    the status and the last line say so."""
    path = local(tmp_path, "V100-SXM2-16GB", batch="[2, 8]", nodes="[1, 2]")
    campaign = campaign_file.load(path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    err = capfd.readouterr().err
    runs = Store(campaign.testbed_out(campaign.testbeds[0])).runs()
    assert {r["batch"] for r in runs} == {2} and {r["workers"] for r in runs} == {1, 2}
    rows = {(r["batch"], r["workers"]): r for r in commands.status_rows(campaign)}
    for workers in (1, 2):
        assert rows[(2, workers)]["status"] == "measured"
        skipped = rows[(8, workers)]
        assert skipped["status"] == "skipped"
        assert "does not fit in 16 GB" in str(skipped["why"]), skipped
    assert "2 of 4 cells measured, 0 failed, 2 skipped (they do not fit), 0 not run" in err
    capfd.readouterr()
    assert cli.main(["campaign", "status", str(path)]) == 0
    status = capfd.readouterr().out
    assert "2 measured, 2 skipped" in status
    assert sum("skipped   memory" in line for line in status.splitlines()) == 2
    # Nothing left to run: a resumed run touches nothing, journals nothing again.
    fakes.calls.clear()
    before = len(list(Store(campaign.out).records()))
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    assert fakes.calls == [] and len(list(Store(campaign.out).records())) == before


def test_a_measured_cell_stays_measured_where_the_file_names_a_smaller_gpu_after(
    tmp_path, fakes: Fakes
):
    path = local(tmp_path, "V100-SXM2-32GB")
    text = path.read_text()
    assert cli.main(["campaign", "run", str(path)]) == 0
    path.write_text(text.replace("V100-SXM2-32GB", "V100-SXM2-16GB"))  # same cell, smaller
    [row] = commands.status_rows(campaign_file.load(path))
    assert row["status"] == "measured"
    fakes.calls.clear()
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    [row] = commands.status_rows(campaign_file.load(path))
    assert row["status"] == "measured" and fakes.calls == []


def test_a_testbed_with_no_cell_that_fits_is_neither_checked_nor_booked(tmp_path, fakes: Fakes):
    path = local(tmp_path, "V100-SXM2-16GB")
    assert cli.main(["campaign", "run", str(path)]) == 0
    assert fakes.calls == []  # no terraform plan, deploy or sweep
    [row] = commands.status_rows(campaign_file.load(path))
    assert row["status"] == "skipped"


def test_the_dry_run_says_which_cells_it_skips_and_why_and_prints_the_others_scripts(
    tmp_path, capsys
):
    path = write(tmp_path)
    assert cli.main(["campaign", "run", "--dry-run", str(path)]) == 0
    out = capsys.readouterr().out
    small = campaign_file.load(path).testbeds[1]
    [skip] = [line for line in out.splitlines() if line.startswith("# not run: ")]
    assert skip.startswith(f"# not run: {small.cells[0].label} ({small.cells[0].id}): memory ")
    assert skip.endswith("does not fit in 40 GB; fits with --activation-checkpoint selective")
    assert "#SBATCH --partition=big\n" in out and "#SBATCH --partition=small\n" not in out
    assert not (tmp_path / "out").exists() and not (tmp_path / "state").exists()


NAMES = st.text(alphabet=string.ascii_letters + string.digits + " ._-", min_size=1, max_size=40)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(NAMES)
def test_any_accelerator_name_gives_each_cell_its_memory_or_one_line(tmp_path, capsys, name):
    doc = yaml.safe_load(
        textwrap.dedent(TWO_SIZES).format(out=tmp_path / "out", big="x", small="y")
    )
    doc["testbeds"][1]["hardware"]["accelerator"] = name
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    code = cli.main(["campaign", "plan", str(path)])
    out = capsys.readouterr()
    if code == 2:
        assert len(out.err.strip().splitlines()) == 1
        return
    assert code == 0, out.err
    block = "\n".join(block_of(out.out, "small"))
    size, _ = peak_flops.memory(name)
    if size is None:
        assert block.count("whether each cell fits: unknown") == 1
    else:
        assert f"GB per GPU of {size / 1e9:.0f} GB" in block or "does not fit in" in block
    assert not (tmp_path / "out").exists()

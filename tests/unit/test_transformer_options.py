"""The transformer's options through the harness: what cannot run is refused before
anything launches (one line, exit status 2, nothing written), what can is passed to
bench/train.py as it reads it, keyed apart from the CNNs' runs, and probed with the
collectives FSDP issues."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core.bench import transformer_configs
from hpcbench.launchers.specs import ProbeSpec, WorkloadSpec
from hpcbench.measure import probe, scale_options, store, sweep
from hpcbench.schedulers.base import Outcome

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import tokens  # noqa: E402

LOCAL = "scale --env localhost --backend ddp --model gpt-tiny --batch 4 --repeats 1"


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def _refused(capsys, tmp_path, command: str) -> str:
    out = tmp_path / "out"
    status = cli.main([*shlex.split(command), "--out", str(out), "--dry-run"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("hpcbench"), err
    assert not out.exists()
    return err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ("--model gpt-nano", "unknown model 'gpt-nano'"),
        ("--backend horovod", "gpt-tiny trains under torch.distributed: use --backend ddp"),
        ("--backend horovod --parallel fsdp2", "--parallel fsdp2 shards with torch.distributed"),
        ("--model resnet18 --parallel fsdp2", "--parallel fsdp2 is for the transformer models"),
        ("--seq-len 512", "--seq-len 512: gpt-tiny takes at most 256 tokens"),
        ("--model gpt2-small --seq-len 2048", "gpt2-small takes at most 1024 tokens"),
        ("--parallel fsdp2 --shard-group 2", "--shard-group 2 is HSDP's"),
        ("--image-size 32", "--image-size is for the CNNs"),
        ("--step graph", "--step graph: CUDA graphs are for the CNNs"),
        ("--model resnet18 --seq-len 64", "--seq-len is for the transformer models"),
        ("--parallel hsdp --shard-group 3 --nodes 1-2", "must divide the 2 workers"),
        ("--parallel fsdp2 --bucket-cap-mb 50 --nodes 1-2", "--bucket-cap-mb is DDP's"),
        ("--parallel hsdp --bucket-cap-mb 50 --nodes 1-2", "--parallel hsdp reduce-scatters"),
    ],
)
def test_what_cannot_run_is_refused_before_launch(capsys, tmp_path, options, says):
    assert says in _refused(capsys, tmp_path, f"{LOCAL} {options}")


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not tokens", "not a token file"),
        (tokens.HEADER.pack(tokens.MAGIC, 2, 256, 99, 0) + bytes(4), "the header says 99 tokens"),
        (tokens.HEADER.pack(tokens.MAGIC, 2, 5000, 2, 0) + bytes(4), "larger than the model's"),
        (tokens.HEADER.pack(tokens.MAGIC, 2, 256, 2, 0) + bytes(4), "fewer than one sequence"),
    ],
)
def test_a_token_file_that_does_not_fit_is_refused_before_launch(capsys, tmp_path, content, says):
    data = tmp_path / "data.tok"
    data.write_bytes(content)
    assert says in _refused(capsys, tmp_path, f"{LOCAL} --nodes 1 --data {data}")


@pytest.mark.parametrize("planted", ["fifo", "folder", "missing"])
def test_a_token_path_that_is_no_file_is_one_line_and_never_waits(capsys, tmp_path, planted):
    """A FIFO given as --data would block a plain open() until a writer came."""
    data = tmp_path / "data.tok"
    if planted == "fifo":
        os.mkfifo(data)
    elif planted == "folder":
        data.mkdir()
    says = "No such file" if planted == "missing" else "is not a regular file"
    assert says in _refused(capsys, tmp_path, f"{LOCAL} --nodes 1 --data {data}")


def test_hsdp_runs_a_nodes_workers_as_its_shard_group(capsys, tmp_path):
    data = tmp_path / "data.tok"
    tokens.write(data, list(range(256)) * 4, vocab=256)
    argv = [*shlex.split(LOCAL), "--parallel", "hsdp", "--nodes", "1-2", "--seq-len", "64"]
    argv += ["--data", str(data), "--out", str(tmp_path / "out"), "--dry-run", "--no-probe"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    runs = [block for block in printed.split("# batch")[1:]]
    two = next(r for r in runs if "2 worker(s)" in r)
    one = next(r for r in runs if "1 worker(s)" in r)
    # --env localhost: two 'nodes' of one process each, so a 2x1 mesh (replicate x shard).
    assert "--parallel hsdp" in two and "--shard-group 1" in two and "--seq-len 64" in two
    assert "--shard-group" not in one  # one worker trains unsharded


def _dry_run_baseline(capsys, tmp_path, *options: str) -> list[str]:
    """The train.py arguments of the single-worker baseline a dry run prints."""
    argv = [*shlex.split(LOCAL), *options, "--out", str(tmp_path / "out"), "--dry-run"]
    assert cli.main([*argv, "--no-probe"]) == 0, capsys.readouterr().err
    runs = capsys.readouterr().out.split("# batch")[1:]
    one = next(r for r in runs if "1 worker(s)" in r).split("\n")[1]
    words = shlex.split(one)
    return words[words.index("train.py") + 1 :]


def test_hsdp_with_a_shard_group_measures_a_baseline_the_workload_runs(capsys, tmp_path):
    """--shard-group 2 on two 'nodes' of one worker each: the sweep's baseline, which E
    needs, is one worker with the sweep's options, and the workload trains it unwrapped
    (bench/lm.py asks the shard group of its one worker before it builds anything)."""
    pytest.importorskip("torch")
    import train

    hsdp = ("--parallel", "hsdp", "--shard-group", "2", "--nodes", "1-2")
    script = _dry_run_baseline(capsys, tmp_path, *hsdp)
    args = train.parse_args(script)
    assert (args.parallel, args.shard_group) == ("hsdp", 2)
    assert transformer_configs.shard_group(args.parallel, args.shard_group, 1, 1) == 1


def test_the_workload_reads_back_every_transformer_value_the_harness_passes():
    torch = pytest.importorskip("torch")  # noqa: F841  (train.py imports it)
    import train

    spec = WorkloadSpec(
        model="gpt2-small",
        image_size=0,
        data="/tmp/tokens.tok",
        warmup=2,
        windows=4,
        steps=7,
        device="cpu",
        threads=2,
        step="compile",
        seq_len=512,
        parallel="hsdp",
        shard_group=4,
    )
    args = train.parse_args(sweep.workload_args(spec, "ddp", 16))
    for field in dataclasses.fields(spec):
        assert getattr(args, field.name) == getattr(spec, field.name), field.name


def test_the_workload_refuses_what_the_harness_refuses(capsys):
    torch = pytest.importorskip("torch")  # noqa: F841
    import train

    for argv in (
        ["--model", "gpt-tiny", "--backend", "horovod"],
        ["--seq-len", "64"],
        ["--model", "gpt-tiny", "--parallel", "fsdp2", "--bucket-cap-mb", "50"],
    ):
        with pytest.raises(SystemExit) as exit_:
            train.parse_args(argv)
        assert exit_.value.code == 2
    assert "use --backend ddp" in capsys.readouterr().err


def _base_record(**workload) -> dict:
    class Testbed:
        env, link_rate = "localhost", None

        def slots(self, node):
            return 1

        nodes = [None]

    class Launcher:
        name = "torchrun"

    class Target:
        testbed, backend, gpus_per_node, launcher = Testbed(), "ddp", 1, Launcher()
        given = ()

    config = sweep.Config(4, 2, 2)
    return sweep.base_record(Target(), WorkloadSpec(**workload), 0, config, 0)


def test_transformer_runs_are_keyed_apart_and_cnn_keys_stay_as_they_were():
    cnn = _base_record(model="resnet18", image_size=224)
    assert "parallel" not in cnn["method"] and "seq_len" not in cnn["method"]
    fsdp = _base_record(model="gpt-tiny", image_size=0, seq_len=128, parallel="fsdp2")
    hsdp = _base_record(model="gpt-tiny", image_size=0, seq_len=128, parallel="hsdp")
    assert "parallel=fsdp2 seq_len=128" in fsdp["method"]
    assert store.run_key(fsdp) != store.run_key(hsdp)


def test_a_sharded_sweep_probes_the_collectives_fsdp_issues():
    def probed(*argv: str) -> tuple[str, ...]:
        args = scale_options.scale_parser().parse_args(["--env", "localhost", *argv])
        return scale_options.sweep_spec(args).probe.collectives

    assert probed() == ("all_reduce",)  # the CNNs: as before
    assert probed("--parallel", "fsdp2") == ("all_reduce", "all_gather", "reduce_scatter")
    assert probed("--parallel", "hsdp") == ("all_reduce", "all_gather", "reduce_scatter")


def test_the_probe_record_keeps_each_collective():
    measured = {"bytes": 4096, "iters": 3, "time_s": 1e-3, "algbw": 4e6, "busbw": 2e6}
    result = {
        "results": [measured],
        "all_gather": [measured],
        "reduce_scatter": [measured],
        "collectives": {"reduce_scatter": {"ran": ["gloo:all_reduce"], "emulated": True}},
        "device": "cpu",
        "fingerprint": {},
    }

    class Target:
        backend = "ddp"

        class testbed:  # noqa: N801
            env, link_rate, iface = "localhost", None, "lo"

        class launcher:  # noqa: N801
            name = "torchrun"

        def workers(self, nodes):
            return 2

        def spec(self, script, args, nodes, workers, limit):
            self.args = list(args)
            return None

        def run(self, spec, timeout_s):
            return Outcome([0], [result], [], launched_at=0.0, duration_s=1.0)

    target = Target()
    spec = dataclasses.replace(ProbeSpec(timeout_s=60), collectives=("all_reduce", "all_gather"))
    record = probe.run_probe(target, 2, spec)
    assert target.args[target.args.index("--collectives") + 1] == "all_reduce,all_gather"
    assert record["all_gather"] == [measured] and record["reduce_scatter"] == [measured]
    assert record["collectives"]["reduce_scatter"]["emulated"] is True
    assert store.record_problem(record) is None  # the store keeps it

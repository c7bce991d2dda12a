"""The user's own model from its Hugging Face config.json (bench/transformer_configs.py,
from_hf): the published shapes counted as their model cards count them and built as
counted, named by their folder and a hash of the shape, passed to the workload, kept
in the record so that the report forecasts from the store alone, relative to a
campaign file, and every config either taken or refused in one line naming its field."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file
from hpcbench.core.bench import transformer_configs as tc
from hpcbench.core.errors import UsageError
from hpcbench.measure import analysis, scale_options
from hpcbench.performance import plans, sharded_model

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
sys.path.insert(0, str(REPO / "bench"))

# The parameters each model card's shape gives (the brief's counts, tied tables once).
PUBLISHED = {
    "qwen2-7b": 7_615_616_512,
    "mistral-7b-v0.3": 7_248_023_552,
    "llama-3-70b": 70_553_706_496,
    "llama-3-8b": 8_030_261_248,
    "llama-2-13b": 13_015_864_320,
    "gpt2": 124_439_808,
}
NAME = re.compile(r"[A-Za-z0-9._-]+@[0-9a-f]{8}")


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCBENCH_STATE", str(tmp_path / "state"))


def fixture(name: str) -> Path:
    return FIXTURES / name / "config.json"


def published(name: str) -> dict[str, Any]:
    return json.loads(fixture(name).read_text())


def written(folder: Path, config: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return path


def read(path: Path | str) -> Any:
    """The configuration the harness reads from a config.json (sharded_model.shape)."""
    config = sharded_model.shape(str(path))
    assert config is not None, f"{path}: read as no transformer"
    return config


def small(name: str, layers: int = 2) -> dict[str, Any]:
    """A published config cut to `layers` blocks, narrower and with a small vocabulary,
    its layout kept: the heads, the key-value heads, biases and tied tables as published."""
    config = published(name)
    if config["model_type"] == "gpt2":
        config.update(n_layer=layers, n_embd=config["n_head"] * 8, vocab_size=300)
    else:
        heads = config["num_attention_heads"]
        config.update(num_hidden_layers=layers, hidden_size=heads * 8, vocab_size=300)
        config["intermediate_size"] = 3 * config["hidden_size"]
    return config


def built(config: Any, device: str) -> Any:
    torch = pytest.importorskip("torch")
    import transformer

    with torch.device(device):
        torch.manual_seed(0)
        return transformer.Transformer(config, min(config.seq_len, 16))


# ------------------------------------------------------------------ shapes and counts
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_published_config_counts_the_parameters_its_model_card_gives(name):
    assert tc.param_counts(read(fixture(name)))["total"] == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_the_count_the_forecast_uses_is_the_model_the_workload_builds_at_full_size(name):
    config = read(fixture(name))
    model = built(config, "meta")  # shapes only: 70B parameters, no memory
    assert sum(p.numel() for p in model.parameters()) == tc.param_counts(config)["total"]
    units, root = sharded_model.units(config, config.seq_len)
    assert sum(u.params for u in units) + root.params == tc.param_counts(config)["total"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_two_layers_of_each_family_build_on_the_cpu_and_train_a_step_as_counted(tmp_path, name):
    torch = pytest.importorskip("torch")
    config = read(written(tmp_path / f"{name}-2", small(name)))
    assert config.layers == 2
    model = built(config, "cpu")
    assert sum(p.numel() for p in model.parameters()) == tc.param_counts(config)["total"]
    ids = torch.randint(0, config.vocab, (2, 17))
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    assert math.isfinite(float(loss))
    assert all(p.grad is not None for p in model.parameters())


def test_qwen2_biases_sit_on_q_k_v_alone_and_gpt2s_on_every_layer():
    qwen = built(read(fixture("qwen2-7b")), "meta").layers[0]
    assert [getattr(qwen.attention, w).bias is not None for w in ("wq", "wk", "wv", "wo")] == [
        True,
        True,
        True,
        False,
    ]
    assert qwen.mlp.w1.bias is None and qwen.mlp.w2.bias is None
    gpt = built(read(fixture("gpt2")), "meta")
    block = gpt.layers[0]
    assert all(getattr(block.attention, w).bias is not None for w in ("wq", "wk", "wv", "wo"))
    assert block.mlp.w1.bias is not None and block.mlp.w2.bias is not None
    assert gpt.output.weight is gpt.tok_embeddings.weight  # tied, as GPT-2's config says


def test_the_published_shapes_are_read_with_their_families_defaults():
    qwen, mistral = read(fixture("qwen2-7b")), read(fixture("mistral-7b-v0.3"))
    llama, gpt = read(fixture("llama-3-70b")), read(fixture("gpt2"))
    assert (qwen.kv_heads, qwen.head_dim, qwen.qkv_bias, qwen.tied) == (4, 128, True, False)
    # use_sliding_window false: Qwen2 attends fully whatever sliding_window says.
    assert qwen.sliding_window == 0 and qwen.rope_theta == 1e6 and qwen.norm_eps == 1e-6
    assert (mistral.vocab, mistral.sliding_window, mistral.context) == (32768, 0, 32768)
    assert (llama.heads, llama.kv_heads, llama.ffn, llama.tied) == (64, 8, 28672, False)
    assert (gpt.family, gpt.ffn, gpt.tied, gpt.context) == ("gpt2", 4 * 768, True, 1024)
    # The training sequence when --seq-len is not given: the context, at most 2048.
    assert [c.seq_len for c in (qwen, mistral, llama, gpt)] == [2048, 2048, 2048, 1024]


def test_a_head_dim_apart_from_dim_over_heads_shapes_q_k_v_and_o(tmp_path):
    config = published("llama-3-70b")
    config.update(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=96)
    config.update(num_hidden_layers=2, intermediate_size=512, vocab_size=300)
    c = read(written(tmp_path / "wide-heads", config))
    attention = built(c, "meta").layers[0].attention
    assert tuple(attention.wq.weight.shape) == (4 * 96, 256)
    assert tuple(attention.wk.weight.shape) == (2 * 96, 256)
    assert tuple(attention.wo.weight.shape) == (256, 4 * 96)
    model = built(c, "meta")
    assert sum(p.numel() for p in model.parameters()) == tc.param_counts(c)["total"]
    # The attention term counts every query head's QK^T and AV at the head's width.
    n = tc.param_counts(c)["matmul"]
    assert tc.flops_per_token(c, 64) - 6 * n == 6 * 2 * 4 * (96 + 96) * 64


# ------------------------------------------------------------------ names
def test_the_name_is_the_folder_and_a_hash_of_the_shape_so_copies_pool_and_changes_do_not(
    tmp_path, monkeypatch
):
    name = read(fixture("qwen2-7b")).name
    assert NAME.fullmatch(name) and name.startswith("qwen2-7b@")
    # The same shape elsewhere, its keys in another order and a field of no shape changed.
    config = dict(reversed(list(published("qwen2-7b").items())), torch_dtype="float32")
    copy_path = written(tmp_path / "copies" / "qwen2-7b", config)
    assert read(copy_path).name == name
    monkeypatch.chdir(tmp_path / "copies")
    assert read("qwen2-7b/config.json").name == name  # a relative path to it
    wider = dict(config, intermediate_size=18945)
    assert read(written(tmp_path / "other" / "qwen2-7b", wider)).name != name
    # Hugging Face's cache (huggingface.co/docs/hub/local-cache): the repository's name,
    # the snapshot's file a link to its blob.
    repo = tmp_path / "hub" / "models--Qwen--Qwen2-7B"
    blob = written(repo / "blobs", config).rename(repo / "blobs" / ("b" * 64))
    snapshot = repo / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(os.path.relpath(blob, snapshot))
    assert read(snapshot / "config.json").name == name.replace("qwen2-7b", "Qwen2-7B")


def test_a_shape_is_known_by_its_name_and_refused_where_the_name_does_not_carry_it():
    config = read(fixture("mistral-7b-v0.3"))
    shape = tc.shape_of(config)
    again = tc.from_shape(config.name, shape, "a record")
    assert (again.name, tc.shape_of(again)) == (config.name, shape)
    with pytest.raises(ValueError, match="does not carry"):
        tc.from_shape(config.name, {**shape, "ffn": shape["ffn"] + 1}, "a record")
    with pytest.raises(ValueError, match="layers"):
        tc.from_shape(config.name, {**shape, "layers": "32"}, "a record")


# ------------------------------------------------------------------ the commands
def test_predict_forecasts_a_config_json_in_tokens(capsys):
    argv = ["predict", "--model", str(fixture("qwen2-7b")), "--parallel", "fsdp2"]
    argv += ["--batch", "1", "--workers", "8-16", "--gpus-per-node", "8"]
    argv += ["--single-worker-tps", "3000", "--link", "100gbit"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "tokens/s" in out and read(fixture("qwen2-7b")).name in out


def test_scale_dry_run_passes_the_workload_the_name_and_the_shape(capsys, tmp_path):
    argv = ["scale", "--env", "localhost", "--backend", "ddp", "--nodes", "1", "--batch", "1"]
    argv += ["--model", str(fixture("gpt2")), "--dry-run", "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    config = read(fixture("gpt2"))
    words = out.split()
    assert words[words.index("--model") + 1] == config.name
    passed = json.loads(words[words.index("--model-shape") + 1].strip("'"))
    assert passed == tc.shape_of(config)
    assert not (tmp_path / "out").exists()


def _parsed(argv: list[str]) -> Any:
    """train.py's options, or None where it refused them (exit status 2)."""
    pytest.importorskip("torch")
    import train

    try:
        return train.parse_args(argv)
    except SystemExit as stop:
        assert stop.code == 2
        return None


def test_the_workload_takes_a_path_or_the_shape_its_name_carries_and_no_other(capsys):
    config = read(fixture("qwen2-7b"))
    args = _parsed(["--model", str(fixture("qwen2-7b")), "--backend", "ddp"])
    assert args is not None and args.model == config.name and args.seq_len == 2048
    shape = json.dumps(tc.shape_of(config), separators=(",", ":"))
    args = _parsed(["--model", config.name, "--model-shape", shape, "--backend", "ddp"])
    assert args is not None and args.model == config.name
    capsys.readouterr()
    other = json.dumps({**tc.shape_of(config), "layers": 27})
    assert _parsed(["--model", config.name, "--model-shape", other, "--backend", "ddp"]) is None
    [said] = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert "--model-shape" in said and "does not carry" in said, said


def test_a_campaign_reads_its_model_file_beside_itself_and_names_its_cells_alike(
    tmp_path, capsys, monkeypatch
):
    doc = {
        "name": "own",
        "sweep": {
            "model": "fixtures/qwen2-7b/config.json",
            "backend": "ddp",
            "parallel": "fsdp2",
            "seq_len": 1024,
            "batch": [1],
            "nodes": [1, 2],
            "repeats": 1,
        },
        "testbeds": [
            {
                "name": "a",
                "hosts": ["h1:8", "h2:8"],
                "expect": {"tokens_per_s": 3000},
            }
        ],
    }
    ids = []
    for where in ("one", "two"):
        folder = tmp_path / where
        shutil.copytree(FIXTURES / "qwen2-7b", folder / "fixtures" / "qwen2-7b")
        path = folder / "own.yaml"
        path.write_text(yaml.safe_dump({**doc, "out": str(folder / "out")}))
        monkeypatch.chdir(tmp_path)  # not the campaign's folder
        assert cli.main(["campaign", "plan", str(path)]) == 0, capsys.readouterr().err
        assert "tokens/s" in capsys.readouterr().out
        campaign = campaign_file.load(path)
        assert {p.workload.model for p in campaign.testbeds[0].parts} == {
            read(fixture("qwen2-7b")).name
        }
        ids.append([c.id for c in campaign.cells])
    assert ids[0] == ids[1]


def test_the_report_forecasts_a_run_from_the_shape_its_record_keeps(monkeypatch):
    config = read(fixture("mistral-7b-v0.3"))
    monkeypatch.setattr(tc, "_READ", {})  # a fresh process: only the store is read
    assert analysis.unit_of(config.name) == analysis.TOKENS
    run = {
        "model": config.name,
        "model_shape": tc.shape_of(config),
        "batch": 1,
        "backend": "ddp",
        "parallel": "fsdp2",
        "status": "failed",  # no seq_len recorded: the shape's
        "fingerprint": {"device": "cuda"},
    }
    assert analysis.seq_len_of(run) == config.seq_len
    job = analysis.job_of(run)
    assert job.transformer and tc.shape_of(sharded_model.shape(job.model)) == tc.shape_of(config)
    network = plans.nominal(100e9, "rdma")
    plan = plans.plan(job, network, [16], 8, 1.0)
    assert plan.model == config.name and plan.seq_len == config.seq_len


# ------------------------------------------------------------------ refusals
def _refused(capsys, tmp_path, path: Path, *options: str) -> str:
    """`scale --dry-run` of the config at path: exit status 2, one line, nothing made."""
    out = tmp_path / "out"
    argv = ["scale", "--env", "localhost", "--backend", "ddp", "--nodes", "1", "--batch", "1"]
    status = cli.main([*argv, "--model", str(path), *options, "--dry-run", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1 and err.startswith("hpcbench"), err
    assert not out.exists()
    return err


LLAMA = published("llama-3-70b")
REFUSED = [
    (
        {**published("mistral-7b-v0.3"), "model_type": "mixtral", "num_local_experts": 8},
        "num_local_experts",
    ),
    ({**published("qwen2-7b"), "model_type": "qwen2_moe", "num_experts": 64}, "num_experts"),
    ({**LLAMA, "model_type": "olmoe"}, "model_type 'olmoe'"),
    ({**LLAMA, "model_type": "bert"}, "model_type 'bert'"),
    ({k: v for k, v in LLAMA.items() if k != "model_type"}, "model_type"),
    ({k: v for k, v in LLAMA.items() if k != "hidden_size"}, "hidden_size"),
    ({**LLAMA, "hidden_size": "8192"}, "hidden_size"),
    ({**LLAMA, "num_hidden_layers": True}, "num_hidden_layers"),
    ({**LLAMA, "num_hidden_layers": 0}, "num_hidden_layers"),
    ({**LLAMA, "num_key_value_heads": 3}, "num_key_value_heads"),
    ({**LLAMA, "hidden_size": 8190}, "hidden_size"),
    ({**LLAMA, "tie_word_embeddings": "no"}, "tie_word_embeddings"),
    ({**LLAMA, "attention_bias": True}, "attention_bias"),
    ({**LLAMA, "rms_norm_eps": -1}, "rms_norm_eps"),
    ({**LLAMA, "head_dim": 127}, "head_dim"),
    ({**published("gpt2"), "n_inner": 1.5}, "n_inner"),
    ({**published("mistral-7b-v0.3"), "sliding_window": 1024}, "sliding_window 1024"),
    ([1, 2, 3], "JSON object"),
    ("{", "not JSON"),
    ('{"model_type": "llama", "rms_norm_eps": NaN}', "not JSON"),
    ("[" * 100_000, "not JSON"),
]


@pytest.mark.parametrize(("config", "says"), REFUSED)
def test_a_config_that_cannot_be_built_is_refused_in_one_line_naming_what(
    capsys, tmp_path, config, says
):
    path = written(tmp_path / "mine", config)
    assert says in _refused(capsys, tmp_path, path, "--seq-len", "2048")


def test_a_sliding_window_at_or_above_the_sequence_attends_as_full_attention_and_is_taken(
    capsys, tmp_path
):
    path = written(tmp_path / "swa", {**published("mistral-7b-v0.3"), "sliding_window": 4096})
    for seq_len in ("2048", "4096"):
        argv = ["scale", "--env", "localhost", "--backend", "ddp", "--nodes", "1"]
        argv += ["--batch", "1", "--model", str(path), "--seq-len", seq_len, "--dry-run"]
        assert cli.main([*argv, "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    assert "--seq-len 4097" in _refused(capsys, tmp_path, path, "--seq-len", "4097")
    # Absent, mistral's window is its class default, 4096 (configuration_mistral.py:79).
    absent = {k: v for k, v in published("mistral-7b-v0.3").items() if k != "sliding_window"}
    assert read(written(tmp_path / "absent", absent)).sliding_window == 4096


@pytest.mark.parametrize("planted", ["folder", "fifo", "missing", "big"])
def test_a_config_path_that_is_no_readable_file_is_one_line_and_never_waits(
    capsys, tmp_path, planted
):
    path = tmp_path / "mine" / "config.json"
    path.parent.mkdir()
    if planted == "folder":
        path.mkdir()
    elif planted == "fifo":
        os.mkfifo(path)
    elif planted == "big":
        path.write_text(json.dumps({**LLAMA, "pad": "x" * (1 << 20)}))
    says = {"folder": "not a regular file", "fifo": "not a regular file", "missing": "No such"}
    assert says.get(planted, "over 1 MiB") in _refused(capsys, tmp_path, path)


# ------------------------------------------------------------------ generated configs
def _family_config(family: str, dims: tuple[int, int, int, int, int]) -> dict[str, Any]:
    heads, group, width, layers, vocab = dims
    if family == "gpt2":
        return {
            "model_type": "gpt2",
            "n_embd": heads * width,
            "n_head": heads,
            "n_layer": layers,
            "vocab_size": vocab,
            "n_positions": 256,
        }
    return {
        "model_type": family,
        "hidden_size": heads * width,
        "num_attention_heads": heads,
        "num_key_value_heads": heads // group,
        "num_hidden_layers": layers,
        "intermediate_size": 3 * heads * width,
        "vocab_size": vocab,
        "max_position_embeddings": 256,
    }


FIELDS = sorted({k for f in ("gpt2", "llama") for k in _family_config(f, (2, 1, 2, 1, 8))})
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def configs(draw: st.DrawFn) -> tuple[Any, bool]:
    """(a config, whether it was left as drawn): one family's, of small sizes, then
    perhaps a field removed, set to any JSON value, or an expert count added."""
    family = draw(st.sampled_from(["gpt2", "llama", "mistral", "qwen2"]))
    heads = draw(st.sampled_from([1, 2, 4]))
    group = draw(st.sampled_from([g for g in (1, 2, 4) if heads % g == 0]))
    dims = (
        heads,
        group,
        draw(st.sampled_from([2, 4, 8])),
        draw(st.integers(1, 3)),
        draw(st.integers(1, 500)),
    )
    config: dict[str, Any] = _family_config(family, dims)
    change = draw(st.sampled_from(["none", "drop", "set", "experts"]))
    if change == "drop":
        del config[draw(st.sampled_from(sorted(config)))]
    elif change == "set":
        config[draw(st.sampled_from([*FIELDS, "tie_word_embeddings", "head_dim"]))] = draw(
            JSON_VALUES
        )
    elif change == "experts":
        config[draw(st.sampled_from(["num_local_experts", "num_experts"]))] = draw(
            st.integers(2, 64)
        )
    return config, change == "none"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(drawn=configs())
def test_generated_configs_are_taken_as_counted_or_refused_in_one_line(tmp_path, drawn):
    config, whole = drawn
    path = written(tmp_path / "drawn", config)
    args = scale_options.scale_parser().parse_args(
        ["--env", "localhost", "--backend", "ddp", "--model", str(path), "--seq-len", "16"]
    )
    try:
        spec = scale_options.workload_spec(args)
    except UsageError as err:
        assert not whole, f"{config}: refused: {err}"
        line = str(err)
        assert "\n" not in line and len(line) < 400, line
        return
    taken = tc.resolve(spec.model)
    assert NAME.fullmatch(spec.model) and taken is not None
    assert tc.param_counts(taken)["total"] > 0 and tc.flops_per_token(taken, 16) > 0


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_text_as_a_config_is_taken_or_refused_in_one_line(tmp_path, text):
    path = written(tmp_path / "text", text)
    try:
        config = sharded_model.shape(str(path))
    except UsageError as err:
        assert "\n" not in str(err)
        return
    assert config is not None and NAME.fullmatch(config.name)

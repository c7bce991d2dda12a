"""The forecast's models are the workload's: each CNN's gradient table
(hpcbench.performance.scaling_model) holds the parameters bench/train.py trains, at the
image size bench/models.json gives it, and each transformer's units
(hpcbench.performance.sharded_model) hold those bench/transformer.py builds. Every model
is built on PyTorch's meta device: shapes only, no weights."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hpcbench import cli
from hpcbench.core.bench import cnns
from hpcbench.performance import scaling_model, sharded_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
torch = pytest.importorskip("torch")
import train  # noqa: E402
import transformer  # noqa: E402
import transformer_configs  # noqa: E402

CNNS = sorted(cnns.MODELS)


def trained_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", CNNS)
def test_each_cnns_gradient_table_holds_every_parameter_the_workload_trains(name):
    with torch.device("meta"):
        model = train.build_model(name)
    table = scaling_model.model_layers(name, cnns.MODELS[name]["image_size"])
    assert sum(grad for grad, _ in table) / 4 == trained_parameters(model)


def predicted(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    argv = ["predict", "--workers", "1,8", "--step-time", "0.2", "--link", "10gbit", *extra]
    assert cli.main(argv) == 0
    return capsys.readouterr().out


def test_predict_takes_inception_v3_at_the_299_px_the_workload_trains_it_at(capsys):
    assert cnns.MODELS["inception_v3"]["image_size"] == 299
    plain = predicted(capsys, "--model", "inception_v3")
    assert "inception_v3 at 299 px" in plain
    assert plain == predicted(capsys, "--model", "inception_v3", "--image-size", "299")
    assert "resnet50 at 224 px" in predicted(capsys, "--model", "resnet50")


def test_a_torchvision_model_the_workload_does_not_train_takes_its_weights_crop(capsys):
    # torchvision/models/efficientnet.py, EfficientNet_B3_Weights.IMAGENET1K_V1: crop_size=300
    assert "efficientnet_b3" not in cnns.MODELS
    assert "efficientnet_b3 at 300 px" in predicted(capsys, "--model", "efficientnet_b3")


@pytest.mark.parametrize("name", sorted(transformer_configs.CONFIGS))
def test_each_transformers_forecast_holds_the_parameters_the_workload_builds(name):
    config = transformer_configs.CONFIGS[name]
    with torch.device("meta"):  # llama-1b would take 5 GB
        model = transformer.Transformer(config, config.seq_len)
    built = trained_parameters(model)
    blocks, root = sharded_model.units(config, config.seq_len)
    assert [b.params for b in blocks] == [trained_parameters(m) for m in model.layers]
    assert sum(b.params for b in blocks) + root.params == built
    layers = sharded_model.ddp_layers(config, config.seq_len, 4)
    assert sum(grad for grad, _ in layers) / 4 == built

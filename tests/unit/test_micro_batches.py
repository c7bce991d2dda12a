"""A step of K micro-batches (bench/steps.py, --grad-accum): its loss and its update are
those of one batch of K times as many sequences, its gradients reduced on the last
micro-batch alone, its gradient timeline the last micro-batch's. In one process; across
processes (DDP's no_sync, FSDP2's deferred reduce-scatter):
tests/integration/test_transformer_layouts.py."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import steps  # noqa: E402
import transformer  # noqa: E402
import transformer_configs as tc  # noqa: E402

TINY = tc.CONFIGS["gpt-tiny"]
SEQ = 16


class Batches:
    """next(): the rows of `ids` `per` at a time, in turn."""

    def __init__(self, ids: torch.Tensor, per: int) -> None:
        self.ids, self.per, self.turn = ids, per, 0

    def next(self):
        part = self.ids[self.turn * self.per : (self.turn + 1) * self.per]
        self.turn = (self.turn + 1) % (len(self.ids) // self.per)
        return part[:, :-1], part[:, 1:], 0.0


def one_step(micro_batches: int, ids: torch.Tensor):
    torch.manual_seed(0)
    model = transformer.Transformer(TINY, SEQ)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    synced: list[bool] = []

    def sync(last: bool):
        synced.append(last)
        return contextlib.nullcontext()

    parts = steps.Parts(model, model, optimizer, None, steps.autocast_factory(False, None))
    parts.sync = sync
    step = steps.Step(parts, Batches(ids, len(ids) // micro_batches), micro_batches)
    _, loss = step()
    return loss, {n: p.detach().clone() for n, p in model.named_parameters()}, synced, step


def test_k_micro_batches_step_as_one_batch_of_k_times_as_many():
    ids = torch.randint(0, TINY.vocab, (4, SEQ + 1), generator=torch.Generator().manual_seed(2))
    loss_one, weights_one, synced_one, _ = one_step(1, ids)
    loss_four, weights_four, synced_four, step = one_step(4, ids)
    assert float(loss_four) == pytest.approx(float(loss_one), rel=1e-6)  # their mean
    for name, w in weights_one.items():
        assert torch.allclose(weights_four[name], w, rtol=1e-5, atol=1e-7), name
    # Reduced on the last micro-batch alone.
    assert synced_one == [True] and synced_four == [False, False, False, True]
    # The gradient timeline is the last micro-batch's: one mark per parameter.
    assert len(step.gradient_timeline(torch.device("cpu"))) == len(
        list(step.parts.model.parameters())
    )

"""The step modes (bench/steps.py) on the CPU, in this process: what is captured, the
autocast a graph gets, the timelines, NHWC as Horovod takes it. What can run here
runs for real in tests/integration/test_step_modes_processes.py; CUDA graphs run in
`make bench-gpu`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
torch = pytest.importorskip("torch")

import steps  # noqa: E402


def test_the_capture_follows_where_the_all_reduce_can_run() -> None:
    assert steps.capture_kind("eager", True, "ddp", "nccl") is None
    assert steps.capture_kind("compile", True, "ddp", "nccl") is None
    # A single worker has no all-reduce, DDP over NCCL's is captured with the backward.
    assert steps.capture_kind("graph", False, "ddp", "nccl") == "whole"
    assert steps.capture_kind("graph", False, "horovod", "horovod") == "whole"
    assert steps.capture_kind("graph", True, "ddp", "nccl") == "whole"
    # Gloo works in host memory, Horovod in its own thread: outside the graph.
    assert steps.capture_kind("graph", True, "ddp", "gloo") == "partial"
    assert steps.capture_kind("graph", True, "horovod", "horovod+nccl") == "partial"


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_graphs_get_autocast_without_its_weight_cache() -> None:
    assert steps.autocast_factory(False, "whole")().__class__.__name__ == "nullcontext"
    for capture, cached in ((None, True), ("whole", False), ("partial", False)):
        cast = steps.autocast_factory(True, capture)()
        assert isinstance(cast, torch.autocast) and cast._cache_enabled is cached


def test_the_graph_timeline_keeps_eagers_order_within_the_graphs_backward() -> None:
    marks = [[0.5, 10], [0.6, 20], [0.9, 30]]
    out = steps.stretch(marks, forward_end=0.4, forward_s=0.01, backward_s=0.02)
    assert [b for _, b in out] == [10, 20, 30]
    assert out[0][0] == pytest.approx(0.01 + 0.1 / 0.5 * 0.02)
    assert out[-1][0] == pytest.approx(0.03)
    assert steps.stretch([], 0.4, 0.01, 0.02) == []


@given(
    st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=30),
    st.floats(0, 5, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
    st.floats(1e-6, 1, allow_nan=False),
)
def test_a_stretched_timeline_lies_within_the_graphs_backward(times, forward_end, fwd, bwd):
    marks = [[t, i] for i, t in enumerate(sorted(times))]
    out = steps.stretch(marks, forward_end, fwd, bwd)
    moments = [t for t, _ in out]
    assert moments == sorted(moments)
    assert all(fwd - 1e-12 <= t <= fwd + bwd * (1 + 1e-9) for t in moments)
    assert [b for _, b in out] == [b for _, b in marks]


def _nhwc(shape=(4, 3, 5, 5), dtype=None) -> torch.Tensor:
    t = torch.randn(*shape) if dtype is None else torch.randn(*shape).to(dtype)
    return t.contiguous(memory_format=torch.channels_last)


def test_nhwc_reaches_horovod_as_a_contiguous_view_of_its_own_memory() -> None:
    t = _nhwc()
    assert not t.is_contiguous()  # what Horovod's _check_function refuses
    view = steps.as_contiguous_view(t)
    assert view.is_contiguous() and view.data_ptr() == t.data_ptr()
    before = t.clone()
    view.mul_(2)  # an in-place all-reduce on the view sums the tensor itself
    assert torch.equal(t, before * 2)
    plain = torch.randn(4, 3, 5, 5)
    assert steps.as_contiguous_view(plain) is plain
    odd = torch.randn(3, 4).t()  # neither layout: left for Horovod to refuse, as before
    assert steps.as_contiguous_view(odd) is odd
    names = dict(steps.contiguous_views({"b": t, "a": plain}))
    assert list(names) == ["a", "b"] and names["b"].is_contiguous()


def test_the_compressor_gives_back_the_gradient_in_its_own_layout() -> None:
    compression = pytest.importorskip("horovod.torch.compression").Compression
    for inner, tolerance in ((compression.none, 0.0), (compression.fp16, 1e-2)):
        grad = _nhwc()
        safe = steps.ChannelsLastSafe(inner)
        sent, ctx = safe.compress(grad)
        assert sent.is_contiguous()
        back = safe.decompress(sent, ctx)
        assert back.shape == grad.shape and back.dtype == grad.dtype
        assert back.is_contiguous(memory_format=torch.channels_last)
        assert torch.allclose(back, grad, atol=tolerance, rtol=tolerance)
        flat = torch.randn(7)
        sent, ctx = safe.compress(flat)
        assert torch.allclose(safe.decompress(sent, ctx), flat, atol=tolerance)

"""The workload's input (bench/inputs.py): where real images are decoded, and that the
device decoder's crop, flip and normalisation give what torchvision's host path gives.
On the CPU the device decoder runs its very code on the CPU."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

import inputs  # noqa: E402

CPU = torch.device("cpu")


@given(st.integers(1, 4000), st.integers(1, 4000), st.integers(0, 2**32))
def test_a_crop_box_always_lies_inside_the_image(height, width, seed) -> None:
    top, left, h, w = inputs.random_crop_box(height, width, random.Random(seed))
    assert top >= 0 and left >= 0 and h >= 1 and w >= 1
    assert top + h <= height and left + w <= width


@given(st.integers(64, 2000), st.integers(64, 2000), st.integers(0, 2**32))
def test_a_crop_keeps_torchvisions_share_and_ratio_where_one_fits(height, width, seed) -> None:
    top, left, h, w = inputs.random_crop_box(height, width, random.Random(seed))
    if (h, w) == (height, width) or h == height or w == width:
        return  # the fallback: the whole image, or its central crop at the nearest ratio
    # Rounding of the sides moves the area and the ratio by at most a side's half pixel.
    assert inputs.SCALE[0] * 0.9 <= h * w / (height * width) <= inputs.SCALE[1]
    assert inputs.RATIO[0] * 0.9 <= w / h <= inputs.RATIO[1] * 1.1


def test_auto_decodes_on_the_device_only_with_cuda(monkeypatch) -> None:
    assert inputs.choose_decoder("workers", CPU) == ("workers", "")
    assert inputs.choose_decoder("device", CPU) == ("device", "")  # decode_jpeg runs on CPUs
    decoder, note = inputs.choose_decoder("auto", CPU)
    assert decoder == "workers" and "no CUDA device" in note
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(inputs, "device_decode_works", lambda d: "")
    assert inputs.choose_decoder("auto", gpu) == ("device", "")
    monkeypatch.setattr(inputs, "device_decode_works", lambda d: "decode_jpeg on cuda failed: x")
    decoder, note = inputs.choose_decoder("auto", gpu)
    assert decoder == "workers" and note.startswith("decode_jpeg on cuda failed: x; ")
    with pytest.raises(
        SystemExit, match="--decode device: decode_jpeg on cuda failed: x; use --decode workers"
    ):
        inputs.choose_decoder("device", gpu)


def _folder(root: Path, colours: list[tuple[int, int, int]], fmt: str = "JPEG") -> Path:
    for c, colour in enumerate(colours):
        folder = root / "train" / f"c{c}"
        folder.mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (60 + 7 * i, 40 + 5 * i), colour).save(
                folder / f"{i}.JPEG", fmt, quality=95
            )
    return root


def _batches(root: Path, decode: str, batch: int = 4) -> inputs.Batches:
    args = argparse.Namespace(
        data=str(root), decode=decode, batch=batch, image_size=16, seed=0, data_workers=0
    )
    return inputs.Batches(args, rank=0, size=1, device=CPU, memory_format=torch.channels_last)


@pytest.mark.parametrize("decode", ["device", "workers"])
def test_both_decoders_normalise_as_torchvisions_imagenet_reference(tmp_path, decode) -> None:
    colours = [(200, 30, 90), (10, 250, 128)]
    batches = _batches(_folder(tmp_path, colours), decode)
    mean, std = torch.tensor(inputs.MEAN), torch.tensor(inputs.STD)
    expected = {c: (torch.tensor(colours[c]) / 255 - mean) / std for c in range(2)}
    for _ in range(3):  # past an epoch's end: 6 files, batches of 4
        images, labels, waited = batches.next()
        assert images.shape == (4, 3, 16, 16) and waited >= 0
        assert images.is_contiguous(memory_format=torch.channels_last)
        for image, label in zip(images, labels.tolist(), strict=True):
            # A flat colour stays flat whatever the crop and flip; JPEG moves it a little.
            pixel = image.mean(dim=(1, 2))
            assert torch.allclose(pixel, expected[label], atol=0.05), (pixel, expected[label])
    assert batches.decoder == decode and batches.host_decoded == 0


def test_files_nvjpeg_refuses_are_decoded_on_the_host_and_counted(tmp_path) -> None:
    batches = _batches(_folder(tmp_path, [(1, 2, 3), (4, 5, 6)], fmt="PNG"), "device")
    images, _, _ = batches.next()
    assert images.shape == (4, 3, 16, 16) and torch.isfinite(images).all()
    assert batches.host_decoded >= 4  # the first batch's four, and more as threads work ahead


@settings(max_examples=20, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_a_file_no_decoder_reads_stops_the_run_with_what_it_is(tmp_path_factory, junk) -> None:
    root = _folder(tmp_path_factory.mktemp("junk"), [(9, 9, 9), (8, 8, 8)])
    for f in (root / "train").rglob("*.JPEG"):
        f.write_bytes(junk)
    batches = _batches(root, "device", batch=2)
    with pytest.raises(RuntimeError, match=r"bytes in the batch is no image .*remove it"):
        batches.next()

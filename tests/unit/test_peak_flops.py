"""Peak FLOPS by the name torch gives a GPU (bench/peak_flops.py), and an MFU that is
never above 100%: the record says why it is unknown instead."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import peak_flops  # noqa: E402


@pytest.mark.parametrize(
    ("device", "precision", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.5e12),  # the SXM5 part
        ("NVIDIA H100 PCIe", "bf16", 756.5e12),
        ("NVIDIA H100 NVL", "bf16", 835.5e12),
        ("NVIDIA H200", "bf16", 989.5e12),
        ("NVIDIA A100-SXM4-40GB", "bf16", 312e12),
        ("NVIDIA A100 80GB PCIe", "fp32", 19.5e12),
        ("Tesla V100-SXM2-32GB", "fp32", 15.7e12),
        ("Tesla V100-PCIE-16GB", "fp32", 14e12),
        ("Tesla V100S-PCIE-32GB", "fp16", 130e12),
        ("Tesla P100-PCIE-16GB", "fp16", 18.7e12),
        ("Tesla P100-SXM2-16GB", "fp32", 10.6e12),
        ("NVIDIA B200", "bf16", 2.25e15),
        ("NVIDIA L40S", "bf16", 362.05e12),
    ],
)
def test_each_gpu_gets_its_own_row(device, precision, peak):
    found, source = peak_flops.lookup(device, precision)
    assert found == peak and source.split(":")[0] and "nvidia.com" in source


@pytest.mark.parametrize(
    ("device", "precision"),
    [
        ("NVIDIA GH200 480GB", "bf16"),  # not an H200
        ("NVIDIA GB200", "bf16"),  # not a B200
        ("NVIDIA H200 NVL", "bf16"),  # a card below the SXM part
        ("Tesla V100-SXM2-16GB", "bf16"),  # Volta has no bfloat16
        ("Tesla P100-PCIE-16GB", "bf16"),  # nor has Pascal
        ("NVIDIA H100 NVL", "fp32"),
        ("NVIDIA GeForce RTX 4090", "bf16"),
    ],
)
def test_a_gpu_or_precision_without_a_row_has_no_peak_and_says_so(device, precision):
    found, why = peak_flops.lookup(device, precision)
    assert found is None and "bench/peak_flops.py" in why


@pytest.mark.parametrize(
    ("device", "fp16", "fp32", "watts", "sizes"),
    [
        # A name that shows no form, as a partition's page lists it: the lowest rate,
        # the most power, every size (the caller assumes the smallest, said so).
        ("V100", 112e12, 14e12, 300, [16, 32]),
        ("Tesla V100-DGXS-32GB", 112e12, 14e12, 300, [16, 32]),
        ("P100", 18.7e12, 9.3e12, 300, [12, 16]),
    ],
)
def test_a_name_without_its_form_gets_the_forms_least_rate_and_most_power(
    device, fp16, fp32, watts, sizes
):
    assert peak_flops.lookup(device, "fp16")[0] == fp16
    rate, source = peak_flops.lookup(device, "fp32")
    assert rate == fp32 and "form" in source and "nvidia.com" in source
    family = "V100" if "V100" in device else "P100"
    forms = [r.flops["fp32"] for r in peak_flops.PEAKS if r.name.startswith(f"{family} ")]
    assert len(forms) >= 2 and rate == min(forms), forms
    assert peak_flops.power(device)[0] == watts
    assert peak_flops.sizes(device) == [gb * 10**9 for gb in sizes]
    assert peak_flops.lookup(device, "bf16")[0] is None


def test_mfu_is_the_share_of_the_peak():
    assert peak_flops.mfu(250e12, 1000e12) == (0.25, None)


def test_an_mfu_above_one_is_never_given():
    share, why = peak_flops.mfu(1.2e15, 989.5e12)
    assert share is None and "exceed the peak" in why and "wrong peak or formula" in why


def test_without_a_peak_the_mfu_is_unknown_with_the_reason():
    assert peak_flops.mfu(1e12, None, "no peak for 'X'") == (None, "no peak for 'X'")


# ------------------------------------------------------------------ memory per GPU
@pytest.mark.parametrize(
    ("device", "gb"),
    [
        ("NVIDIA H100 80GB HBM3", 80),  # the SXM5 part
        ("NVIDIA H100 PCIe", 80),
        ("NVIDIA H100 NVL", 94),
        ("NVIDIA H200", 141),
        ("NVIDIA H200 NVL", 141),
        ("NVIDIA A100-SXM4-40GB", 40),
        ("NVIDIA A100-SXM4-80GB", 80),
        ("NVIDIA A100 80GB PCIe", 80),
        ("Tesla V100-SXM2-16GB", 16),
        ("Tesla V100-SXM2-32GB", 32),
        ("Tesla V100-PCIE-16GB", 16),
        ("Tesla V100S-PCIE-32GB", 32),
        ("Tesla P100-PCIE-12GB", 12),
        ("Tesla P100-SXM2-16GB", 16),
        ("NVIDIA L40S", 48),
    ],
)
def test_each_gpu_gets_its_data_sheets_memory_in_bytes(device, gb):
    found, source = peak_flops.memory(device)
    assert found == gb * 10**9 and f"{gb}GB" in source.replace(" ", "") and "nvidia.com" in source


@pytest.mark.parametrize(
    "device",
    [
        "NVIDIA H100 96GB HBM2e",  # an H100 SXM of another size: the 80 GB figure is not its own
        "NVIDIA A100-PCIE",  # an A100 that names no size: 40 or 80 GB
        "NVIDIA B200",  # a row with no memory figure
        "NVIDIA GH200 480GB",  # no row at all
        "NVIDIA GeForce RTX 4090",
    ],
)
def test_a_gpu_without_a_memory_figure_says_so(device):
    found, why = peak_flops.memory(device)
    assert found is None and "bench/peak_flops.py" in why and device in why

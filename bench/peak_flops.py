"""Peak FLOPS per accelerator and precision, memory and board power per GPU, each row
with its source, and MFU.

Dense figures: where a data sheet gives tensor-core rates "with sparsity" (2:4
structured), the row holds half of it, as the sheets' own footnotes say ("one-half
lower without sparsity"). A GPU matches the first row whose pattern is found in
torch.cuda.get_device_name(); a name no row matches, or a precision a matching row
lacks, has no peak, and the record says so instead of an MFU. On CPU nodes there is
no table: the workload measures a GEMM on the node (bench/lm.py, measured_gemm_flops).

Memory per GPU: the data sheet's "GB" as 10^9 bytes, the lower reading (torch's
total_memory of an "NVIDIA H100 80GB HBM3" is 79.18 GiB, 85.0e9 bytes, as torchtitan's
runs log it: "CUDA capacity: NVIDIA H100 80GB HBM3 with 79.18GiB memory"). A part sold
in several sizes holds each size under the pattern its name shows ("A100-SXM4-40GB"); a
name that shows none of them, or a row without a figure, has no memory figure, and
memory() says so.

Board power per GPU: the data sheet's maximum (TDP, "max power consumption"), the most
a GPU draws, so energy from it is an upper bound. A part whose forms differ in power
holds each under the pattern its name shows; a name that shows no form gets the most
of them, said so (the bound stays an upper one).

Runs on the nodes and in the harness: no torch, no hpcbench.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/"
H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
A100_PAGE = "https://www.nvidia.com/en-us/data-center/a100/"
V100_PAGE = "https://www.nvidia.com/en-us/data-center/v100/"
P100_PAGE = "https://www.nvidia.com/en-us/data-center/tesla-p100/"
P100_PCIE_BRIEF = f"{P100_PAGE} and the Tesla P100 PCIe product brief (PB-08248-001, 2016)"
L40S_PAGE = "https://www.nvidia.com/en-us/data-center/l40s/"
HGX_PAGE = "https://www.nvidia.com/en-us/data-center/hgx/"
TABLE = "bench/peak_flops.py"


@dataclass(frozen=True)
class Peak:
    name: str
    pattern: str  # a regular expression searched in the device's name
    flops: dict[str, float]  # by precision: bf16, fp16, fp32
    source: str
    memory: tuple[tuple[str, int], ...] = ()  # (a pattern searched in the name, bytes)
    memory_source: str = ""
    power: tuple[tuple[str, int], ...] = ()  # (a pattern searched in the name, watts)
    power_source: str = ""


GB = 10**9


PEAKS = (
    # "NVIDIA H100 80GB HBM3" is the SXM5 part; the PCIe card names itself "H100 PCIe".
    Peak(
        "H100 NVL",
        r"H100.*NVL",
        {"bf16": 835.5e12},
        f"{H100_PAGE}: H100 NVL BF16 Tensor Core 1,671 TFLOPS with sparsity, halved",
        ((r"", 94 * GB),),
        f"{H100_PAGE}: H100 NVL GPU memory 94GB",
        ((r"", 400),),
        f"{H100_PAGE}: H100 NVL max thermal design power 350-400W (configurable)",
    ),
    Peak(
        "H100 PCIe",
        r"H100.*PCIe",
        {"bf16": 756.5e12, "fp32": 51e12},
        f"{H100_PAGE}: H100 PCIe BF16 Tensor Core 1,513 TFLOPS with sparsity, halved; "
        "FP32 51 TFLOPS",
        ((r"", 80 * GB),),
        f"{H100_PAGE}: H100 PCIe GPU memory 80GB (HBM2e)",
        ((r"", 350),),
        f"{H100_PAGE}: H100 PCIe max thermal design power 300-350W (configurable)",
    ),
    Peak(
        "H100 SXM",
        r"H100",
        {"bf16": 989.5e12, "fp32": 67e12},
        f"{H100_PAGE}: H100 SXM BF16 Tensor Core 1,979 TFLOPS with sparsity, halved; "
        "FP32 67 TFLOPS",
        # Not an H100 SXM of another size ("H100 96GB HBM2e"): its name says 80GB.
        ((r"80GB", 80 * GB),),
        f"{H100_PAGE}: H100 SXM GPU memory 80GB (HBM3)",
        ((r"", 700),),
        f"{H100_PAGE}: H100 SXM max thermal design power up to 700W (configurable)",
    ),
    # Not GH200 (a Grace Hopper superchip), nor the H200 NVL card, whose rates differ.
    Peak(
        "H200 NVL",
        r"(?<!G)H200.*NVL",
        {},
        f"{H200_PAGE}: the NVL card's rates are below the SXM part's; no row yet",
        ((r"", 141 * GB),),
        f"{H200_PAGE}: H200 NVL GPU memory 141GB (HBM3e)",
        ((r"", 600),),
        f"{H200_PAGE}: H200 NVL max thermal design power up to 600W (configurable)",
    ),
    Peak(
        "H200 SXM",
        r"(?<!G)H200",
        {"bf16": 989.5e12, "fp32": 67e12},
        f"{H200_PAGE}: H200 SXM BF16 Tensor Core 1,979 TFLOPS with sparsity, halved; "
        "FP32 67 TFLOPS",
        ((r"", 141 * GB),),
        f"{H200_PAGE}: H200 SXM GPU memory 141GB (HBM3e)",
        ((r"", 700),),
        f"{H200_PAGE}: H200 SXM max thermal design power up to 700W (configurable)",
    ),
    # 40 GB and 80 GB, SXM4 and PCIe: one rate ("NVIDIA A100-SXM4-80GB", "A100 80GB PCIe").
    Peak(
        "A100",
        r"A100",
        {"bf16": 312e12, "fp32": 19.5e12},
        f"{A100_PAGE}: BF16 Tensor Core 312 TFLOPS (624 with sparsity); FP32 19.5 TFLOPS",
        ((r"40GB", 40 * GB), (r"80GB", 80 * GB)),
        f"{A100_PAGE}: GPU memory 40GB HBM2 or 80GB HBM2e, as the name says",
        ((r"(?i)pcie.*40GB|40GB.*pcie", 250), (r"(?i)pcie", 300), (r"SXM", 400), (r"", 400)),
        f"{A100_PAGE}: max thermal design power 300W (PCIe), 400W (SXM); the 40GB PCIe card 250W "
        "(NVIDIA A100 40GB PCIe product brief, PB-10137-001)",
    ),
    # Volta has no bfloat16: its tensor cores run fp16.
    Peak(
        "V100S PCIe",
        r"V100S",
        {"fp16": 130e12, "fp32": 16.4e12},
        f"{V100_PAGE}: V100S PCIe Tensor 130 TFLOPS, single precision 16.4 TFLOPS",
        ((r"", 32 * GB),),
        f"{V100_PAGE}: V100S PCIe memory 32GB HBM2",
        ((r"", 250),),
        f"{V100_PAGE}: V100S PCIe max power consumption 250 W",
    ),
    Peak(
        "V100 PCIe",
        r"V100-PCIE",
        {"fp16": 112e12, "fp32": 14e12},
        f"{V100_PAGE}: V100 PCIe Tensor 112 TFLOPS, single precision 14 TFLOPS",
        ((r"16GB", 16 * GB), (r"32GB", 32 * GB)),
        f"{V100_PAGE}: V100 PCIe memory 16GB or 32GB HBM2, as the name says",
        ((r"", 250),),
        f"{V100_PAGE}: V100 PCIe max power consumption 250 W",
    ),
    Peak(
        "V100 SXM2",
        r"V100-SXM2",
        {"fp16": 125e12, "fp32": 15.7e12},
        f"{V100_PAGE}: V100 SXM2 Tensor 125 TFLOPS, single precision 15.7 TFLOPS",
        ((r"16GB", 16 * GB), (r"32GB", 32 * GB)),
        f"{V100_PAGE}: V100 SXM2 memory 16GB or 32GB HBM2, as the name says",
        ((r"", 300),),
        f"{V100_PAGE}: V100 SXM2 max power consumption 300 W",
    ),
    # A name that shows no form ("V100", as a partition's page may list it, or the DGX
    # Station's V100-DGXS): the lowest rate of the forms above, the smallest size, the
    # most power, so that time and energy are not forecast short.
    Peak(
        "V100, form not named",
        r"V100",
        {"fp16": 112e12, "fp32": 14e12},
        f"{V100_PAGE}: the PCIe form's Tensor 112 TFLOPS, single precision 14 TFLOPS, the "
        "lowest of the forms (the name shows none)",
        ((r"16GB", 16 * GB), (r"32GB", 32 * GB)),
        f"{V100_PAGE}: V100 memory 16GB or 32GB HBM2, as the name says",
        ((r"", 300),),
        f"{V100_PAGE}: V100 SXM2 max power consumption 300 W, the most of the forms",
    ),
    # Pascal: no tensor cores, half precision at twice the single rate; no bfloat16.
    Peak(
        "P100 PCIe",
        r"P100-PCIE",
        {"fp16": 18.7e12, "fp32": 9.3e12},
        f"{P100_PCIE_BRIEF}: half precision 18.7 TFLOPS, single precision 9.3 TFLOPS",
        ((r"12GB", 12 * GB), (r"16GB", 16 * GB)),
        f"{P100_PCIE_BRIEF}: 12 GB or 16 GB CoWoS HBM2, as the name says",
        ((r"", 250),),
        f"{P100_PCIE_BRIEF}: max power consumption 250 W",
    ),
    Peak(
        "P100 SXM2",
        r"P100-SXM2",
        {"fp16": 21.2e12, "fp32": 10.6e12},
        f"{P100_PAGE}: Tesla P100 for NVLink-optimized servers, half precision 21.2 "
        "TFLOPS, single precision 10.6 TFLOPS",
        ((r"", 16 * GB),),
        f"{P100_PAGE}: Tesla P100 for NVLink-optimized servers, 16 GB CoWoS HBM2",
        ((r"", 300),),
        f"{P100_PAGE}: Tesla P100 for NVLink-optimized servers, max power consumption 300 W",
    ),
    Peak(
        "P100, form not named",
        r"P100",
        {"fp16": 18.7e12, "fp32": 9.3e12},
        f"{P100_PCIE_BRIEF}: the PCIe form's half precision 18.7 TFLOPS, single precision "
        "9.3 TFLOPS, the lower of the forms (the name shows none)",
        ((r"12GB", 12 * GB), (r"16GB", 16 * GB)),
        f"{P100_PCIE_BRIEF}: 12 GB or 16 GB CoWoS HBM2, as the name says",
        ((r"", 300),),
        f"{P100_PAGE}: the NVLink form's max power consumption 300 W, the most of the forms",
    ),
    Peak(
        "B200",
        r"(?<!G)B200",
        {"bf16": 2.25e15, "fp32": 75e12},
        f"{HGX_PAGE}: HGX B200, per GPU FP16/BF16 Tensor Core 4.5 PFLOPS with sparsity, "
        "halved; FP32 75 TFLOPS (torchtitan's tools/utils.py get_peak_flops: 2.25e15)",
        (),
        f"{HGX_PAGE}: no figure per GPU in this table (public pages give 180GB and 192GB)",
    ),
    Peak(
        "L40S",
        r"L40S",
        {"bf16": 362.05e12, "fp32": 91.6e12},
        f"{L40S_PAGE}: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity); FP32 91.6 TFLOPS",
        ((r"", 48 * GB),),
        f"{L40S_PAGE}: GPU memory 48GB GDDR6 with ECC",
        ((r"", 350),),
        f"{L40S_PAGE}: max power consumption 350W",
    ),
)


def lookup(device_name: str, precision: str) -> tuple[float | None, str]:
    """(peak FLOPS, its source), or (None, why there is none)."""
    for row in PEAKS:
        if re.search(row.pattern, device_name):
            if precision in row.flops:
                return row.flops[precision], f"{row.name}: {row.source}"
            return None, f"no {precision} peak for {row.name} ({device_name}) in {TABLE}"
    return None, f"no peak for {device_name!r} in {TABLE}"


def memory(device_name: str) -> tuple[int | None, str]:
    """(bytes of memory per GPU, its source), or (None, why there is none)."""
    for row in PEAKS:
        if re.search(row.pattern, device_name):
            for pattern, size in row.memory:
                if re.search(pattern, device_name):
                    return size, f"{row.name}: {row.memory_source}"
            return None, (
                f"no memory figure for {device_name!r} in {TABLE} ({row.name}: "
                f"{row.memory_source or 'no figure'})"
            )
    return None, f"no memory figure for {device_name!r} in {TABLE}"


def sizes(device_name: str) -> list[int]:
    """Every memory size the row a name matches lists (its part's sizes), smallest first."""
    for row in PEAKS:
        if re.search(row.pattern, device_name):
            return sorted(size for _, size in row.memory)
    return []


def power(device_name: str) -> tuple[int | None, str]:
    """(the most watts a GPU draws, its source), or (None, why there is none)."""
    for row in PEAKS:
        if re.search(row.pattern, device_name):
            for pattern, watts in row.power:
                if re.search(pattern, device_name):
                    forms = {w for _, w in row.power}
                    unnamed = not pattern and len(forms) > 1
                    said = "; the name shows no form: the most of them" if unnamed else ""
                    return watts, f"{row.name}: {row.power_source}{said}"
            return None, f"no board power for {row.name} ({device_name}) in {TABLE}"
    return None, f"no board power for {device_name!r} in {TABLE}"


def native_bf16(device_name: str) -> bool:
    """Whether a GPU computes bf16 natively, so that a transformer trains in it
    (bench/lm.py training_precision): its row has a bf16 rate. A name no row matches is
    taken to (each part without one, Volta and Pascal, has a row saying so)."""
    for row in PEAKS:
        if re.search(row.pattern, device_name):
            return "bf16" in row.flops
    return True


def mfu(achieved: float, peak: float | None, why: str = "") -> tuple[float | None, str | None]:
    """(MFU, None), or (None, why it is unknown). Above 1 it is never given: the model's
    FLOPs outrunning the peak means a wrong peak or a wrong formula."""
    if peak is None or peak <= 0:
        return None, why or "no peak FLOPS"
    share = achieved / peak
    if share > 1:
        return None, (
            f"the model's FLOPs ({achieved / 1e12:.3g} TFLOPS) exceed the peak "
            f"({peak / 1e12:.3g} TFLOPS): a wrong peak or formula, so no MFU"
        )
    return share, None

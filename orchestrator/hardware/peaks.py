"""The peak FLOP/s a measurement is judged against: a GPU's datasheet peak, matched by its
exact model, or an upper bound on a CPU's, derived from what its cores execute (issue 21).

A row whose FLOP model x items/s exceeds its peak is implausible, so a peak must never be
below what the device can do, and must belong to that device: "NVIDIA L40S" is not an L4
and "NVIDIA RTX A1000" not an A100. A GPU name is therefore normalised to a canonical model
(vendor prefixes and memory sizes dropped, "Tesla V100-SXM2-16GB" -> "V100-SXM2") and
looked up whole; a name that is no known model, or a precision its datasheet has no rate
for, has no peak, and `peak_gap` says why (the report shows "no peak").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

TERA = 1e12
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class Peak:
    """The peak a measurement is judged against."""

    flops: float  # FLOP/s of all the devices the cell used together
    source: str  # "datasheet", "measured" or "estimate" (the local CPU)
    reference: str = ""  # the datasheet, or how the estimate was made


@dataclass(frozen=True)
class GpuDatasheet:
    """One GPU model's dense (no sparsity) peaks per device, as its vendor publishes them.

    fp32 is the plain (non-tensor-core) rate; tf32, fp16 and bf16 the dense tensor-core
    rates with FP32 accumulation, as autocast runs them. A precision is either in `tflops`
    or in `gaps` with the reason the datasheet has no rate for it; `notes` say how a figure
    was derived where it is not the datasheet's own row for that precision.
    """

    model: str  # canonical key, e.g. "H100-SXM"
    reference: str  # the vendor document the figures come from
    memory_gb: float  # the largest memory of the model's variants (a bound for the judge)
    tflops: Mapping[str, float]
    gaps: Mapping[str, str] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)


# Before Ampere there are no TF32 tensor cores: a tf32 cell (TF32 *allowed*, see
# workloads/torch_common.py::set_precision) computes in plain fp32, so fp32 is its peak.
_TF32_IS_FP32 = {"tf32": "the fp32 rate, as there are no TF32 tensor cores"}


def _no_bf16(arch: str) -> dict[str, str]:
    return {"bf16": f"{arch} has no bf16 arithmetic; its datasheet gives no bf16 rate"}


DATASHEET_PEAKS: dict[str, GpuDatasheet] = {sheet.model: sheet for sheet in (
    # NVIDIA Tesla P100 datasheet, SXM2 and PCIe columns (fp16 on the CUDA cores, 2x fp32):
    # https://www.nvidia.com/en-us/data-center/tesla-p100/
    GpuDatasheet("P100-SXM2", "NVIDIA Tesla P100 datasheet (SXM2)", 16,
                 {"fp32": 10.6, "tf32": 10.6, "fp16": 21.2},
                 _no_bf16("Pascal"), _TF32_IS_FP32),
    GpuDatasheet("P100-PCIE", "NVIDIA Tesla P100 datasheet (PCIe, 12 and 16 GB)", 16,
                 {"fp32": 9.3, "tf32": 9.3, "fp16": 18.7}, _no_bf16("Pascal"), _TF32_IS_FP32),
    # NVIDIA Tesla V100 datasheet, SXM2 / PCIe / V100S columns; fp16 is the "Tensor
    # Performance" row: https://www.nvidia.com/en-us/data-center/v100/
    GpuDatasheet("V100-SXM2", "NVIDIA Tesla V100 datasheet (SXM2, 16 and 32 GB)", 32,
                 {"fp32": 15.7, "tf32": 15.7, "fp16": 125}, _no_bf16("Volta"), _TF32_IS_FP32),
    GpuDatasheet("V100-PCIE", "NVIDIA Tesla V100 datasheet (PCIe, 16 and 32 GB)", 32,
                 {"fp32": 14, "tf32": 14, "fp16": 112}, _no_bf16("Volta"), _TF32_IS_FP32),
    GpuDatasheet("V100S-PCIE", "NVIDIA Tesla V100 datasheet (V100S PCIe)", 32,
                 {"fp32": 16.4, "tf32": 16.4, "fp16": 130}, _no_bf16("Volta"), _TF32_IS_FP32),
    # NVIDIA T4 Tensor Core GPU datasheet ("Mixed Precision (FP16/FP32)" 65 TFLOPS):
    # https://www.nvidia.com/en-us/data-center/tesla-t4/
    GpuDatasheet("T4", "NVIDIA T4 Tensor Core GPU datasheet", 16,
                 {"fp32": 8.1, "tf32": 8.1, "fp16": 65}, _no_bf16("Turing"), _TF32_IS_FP32),
    # NVIDIA A10 Tensor Core GPU datasheet (sparse figures halved):
    # https://www.nvidia.com/en-us/data-center/products/a10-gpu/
    GpuDatasheet("A10", "NVIDIA A10 Tensor Core GPU datasheet, dense", 24,
                 {"fp32": 31.2, "tf32": 62.5, "fp16": 125, "bf16": 125}),
    # The A10G is AWS's own GA102 variant (g5); NVIDIA publishes no datasheet for it. The
    # figures are those quoted for it (80 SMs at 1710 MHz: fp32 35; tensor cores at the
    # GeForce rate with FP32 accumulation, as the RTX 3090; the A10 has more tensor and
    # less fp32 throughput): https://aws.amazon.com/ec2/instance-types/g5/
    GpuDatasheet("A10G", "NVIDIA A10G as quoted for AWS EC2 G5 (no NVIDIA datasheet), dense",
                 24, {"fp32": 35, "tf32": 35, "fp16": 70, "bf16": 70}),
    # NVIDIA L4 Tensor Core GPU datasheet (tensor figures printed with sparsity, halved):
    # https://www.nvidia.com/en-us/data-center/l4/
    GpuDatasheet("L4", "NVIDIA L4 Tensor Core GPU datasheet, dense", 24,
                 {"fp32": 30.3, "tf32": 60, "fp16": 121, "bf16": 121}),
    # NVIDIA L40S GPU datasheet (dense | sparse: TF32 183 | 366, BF16 and FP16 362.05 | 733):
    # https://www.nvidia.com/en-us/data-center/l40s/
    GpuDatasheet("L40S", "NVIDIA L40S datasheet, dense", 48,
                 {"fp32": 91.6, "tf32": 183, "fp16": 362.05, "bf16": 362.05}),
    # NVIDIA A100 Tensor Core GPU datasheet: 40 and 80 GB, SXM4 and PCIe share these peaks
    # (sparse figures halved): https://www.nvidia.com/en-us/data-center/a100/
    GpuDatasheet("A100-SXM4", "NVIDIA A100 Tensor Core GPU datasheet (SXM), dense", 80,
                 {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312}),
    GpuDatasheet("A100-PCIE", "NVIDIA A100 Tensor Core GPU datasheet (PCIe), dense", 80,
                 {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312}),
    # NVIDIA H100 Tensor Core GPU datasheet, SXM / PCIe / NVL columns (tensor figures
    # printed with sparsity, halved): https://www.nvidia.com/en-us/data-center/h100/
    GpuDatasheet("H100-SXM", "NVIDIA H100 Tensor Core GPU datasheet (SXM), dense", 80,
                 {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5}),
    GpuDatasheet("H100-PCIE", "NVIDIA H100 Tensor Core GPU datasheet (PCIe), dense", 80,
                 {"fp32": 51, "tf32": 378, "fp16": 756.5, "bf16": 756.5}),
    GpuDatasheet("H100-NVL", "NVIDIA H100 Tensor Core GPU datasheet (NVL), dense", 94,
                 {"fp32": 60, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5}),
    # NVIDIA H200 Tensor Core GPU datasheet, SXM / NVL columns (sparse figures halved):
    # https://www.nvidia.com/en-us/data-center/h200/
    GpuDatasheet("H200-SXM", "NVIDIA H200 Tensor Core GPU datasheet (SXM), dense", 141,
                 {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5}),
    GpuDatasheet("H200-NVL", "NVIDIA H200 Tensor Core GPU datasheet (NVL), dense", 141,
                 {"fp32": 60, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5}),
    # NVIDIA HGX B200 specifications, per GPU (TF32 2.25 and FP16/BF16 4.5 PFLOP/s with
    # sparsity, halved): https://www.nvidia.com/en-us/data-center/hgx/
    GpuDatasheet("B200", "NVIDIA HGX B200 specifications (per GPU), dense", 192,
                 {"fp32": 75, "tf32": 1125, "fp16": 2250, "bf16": 2250}),
    # NVIDIA GeForce GTX TITAN X (Maxwell GM200) specifications: no fp16 arithmetic.
    GpuDatasheet("GTX TITAN X", "NVIDIA GeForce GTX TITAN X specifications", 12,
                 {"fp32": 6.7, "tf32": 6.7},
                 {"fp16": "Maxwell GM200 has no fp16 arithmetic; no fp16 rate is published",
                  **_no_bf16("Maxwell")}, _TF32_IS_FP32),
    # NVIDIA TITAN RTX specifications (Turing TU102: 130 tensor TFLOPS, FP32 accumulate).
    GpuDatasheet("TITAN RTX", "NVIDIA TITAN RTX specifications", 24,
                 {"fp32": 16.3, "tf32": 16.3, "fp16": 130}, _no_bf16("Turing"), _TF32_IS_FP32),
    # NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 column (dense, FP32
    # accumulate; FP16 accumulate would double fp16, which autocast does not use).
    GpuDatasheet("RTX 3090", "NVIDIA Ampere GA102 GPU architecture whitepaper (RTX 3090)",
                 24, {"fp32": 35.6, "tf32": 35.6, "fp16": 71, "bf16": 71}),
)}

# A normalised name (see `_normalised`) -> its canonical model. Only whole names match.
GPU_NAMES: dict[str, str] = {
    "P100 SXM2": "P100-SXM2", "P100 PCIE": "P100-PCIE",
    "V100 SXM2": "V100-SXM2", "V100 PCIE": "V100-PCIE", "V100S PCIE": "V100S-PCIE",
    "T4": "T4", "A10": "A10", "A10G": "A10G", "L4": "L4", "L40S": "L40S",
    "A100 SXM4": "A100-SXM4", "A100 SXM": "A100-SXM4", "A100 PCIE": "A100-PCIE",
    # AWS names the p4d/p4de GPU just "A100": every A100 variant has the same peaks.
    "A100": "A100-SXM4",
    "H100 HBM3": "H100-SXM", "H100 SXM5": "H100-SXM", "H100 SXM": "H100-SXM",
    "H100 PCIE": "H100-PCIE", "H100 NVL": "H100-NVL",
    "H200": "H200-SXM", "H200 SXM": "H200-SXM", "H200 HBM3E": "H200-SXM",
    "H200 NVL": "H200-NVL",
    "B200": "B200",
    "GTX TITAN X": "GTX TITAN X", "TITAN RTX": "TITAN RTX", "RTX 3090": "RTX 3090",
}
# Names that stand for several models with different peaks: no guess between them.
AMBIGUOUS_GPU_NAMES = {
    "P100": "P100 SXM2 and PCIe", "V100": "V100 SXM2 and PCIe", "H100": "H100 SXM, PCIe and NVL",
}
_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE"}


def _normalised(name: str) -> str:
    """Upper case, "-" and "_" as spaces, memory sizes ("16GB", "80 GB") and the vendor's
    words dropped: "Tesla V100-SXM2-16GB" -> "V100 SXM2", "NVIDIA H100 80GB HBM3" ->
    "H100 HBM3"."""
    text = re.sub(r"\b\d+(\.\d+)?\s*GI?B\b", " ", name.upper().replace("-", " ").replace("_", " "))
    return " ".join(word for word in text.split() if word not in _VENDOR_WORDS)


def gpu_model_key(gpu_model: str) -> str | None:
    """The canonical model of a GPU name as NVML, the driver or AWS write it, or None for a
    name that is no known model (never a prefix or substring guess)."""
    return GPU_NAMES.get(_normalised(gpu_model))


def gpu_datasheet(gpu_model: str | None) -> GpuDatasheet | None:
    """The datasheet of the GPU model a name stands for, or None."""
    key = gpu_model_key(gpu_model) if gpu_model else None
    return DATASHEET_PEAKS[key] if key else None


def gpu_memory_gb(gpu_model: str) -> float | None:
    """The memory of a GPU model in GB (its largest variant's), or None if unknown."""
    sheet = gpu_datasheet(gpu_model)
    return sheet.memory_gb if sheet else None


def datasheet_peak(gpu_model: str | None, precision: str, devices: int) -> Peak | None:
    """Datasheet peak of `devices` GPUs of `gpu_model` at `precision` (the per-device peak
    x devices), or None where there is none: `peak_gap` says why."""
    sheet = gpu_datasheet(gpu_model)
    if sheet is None or devices < 1 or precision not in sheet.tflops:
        return None
    note = sheet.notes.get(precision)
    reference = f"{sheet.reference}; {precision}: {note}" if note else sheet.reference
    return Peak(sheet.tflops[precision] * TERA * devices, "datasheet", reference)


def peak_gap(gpu_model: str | None, precision: str, devices: int = 1) -> str | None:
    """Why `datasheet_peak` has no peak for these arguments, or None where it has one."""
    if not gpu_model:
        return "no GPU model recorded"
    if devices < 1:
        return f"no GPUs of {gpu_model!r} counted"
    sheet = gpu_datasheet(gpu_model)
    if sheet is None:
        among = AMBIGUOUS_GPU_NAMES.get(_normalised(gpu_model))
        if among:
            return f"ambiguous GPU model {gpu_model!r}: the {among} have different peaks"
        return f"unknown GPU model {gpu_model!r}"
    if precision in sheet.tflops:
        return None
    why = sheet.gaps.get(precision) or f"the peak table holds {', '.join(PRECISIONS)}"
    return f"no {precision} peak for NVIDIA {sheet.model}: {why}"


CPU_MHZ_TURBO_HEADROOM = 2.0


def cpu_peak_estimate(precision: str = "fp32", cpuinfo: str | None = None,
                      cpus: int | None = None, max_mhz: float | None = None) -> Peak | None:
    """An upper bound on this CPU's FLOP/s at `precision`: usable CPUs x clock x FLOPs per
    cycle per core (`cpu_flops_per_cycle`), or None where the clock is unknown.

    It flags impossible figures, so it errs high: every usable CPU counts as a core
    (hyperthreads share their core's units, so with SMT the bound is about 2x loose), and
    the clock is the highest the kernel reports (cpufreq's maximum, else twice the fastest
    "cpu MHz", which may be a base clock below turbo). With `cpuinfo` given (a test,
    another node) only it and `max_mhz` are read.
    """
    here = cpuinfo is None
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                cpuinfo = handle.read()
        except OSError:
            return None
    mhz = [float(value) for key, value in _pairs(cpuinfo) if key == "cpu MHz"]
    clock = max_mhz or (_max_cpu_mhz() if here else None)
    if not clock and mhz:
        # "cpu MHz" is the clock of the moment, or a VM's base clock: turbo reaches up to
        # about 1.9x base on today's servers (Xeon 8480: 2.0 -> 3.8 GHz), so allow 2x.
        clock = CPU_MHZ_TURBO_HEADROOM * max(mhz)
    if not clock:
        return None
    per_cycle, why = cpu_flops_per_cycle(precision, cpuinfo)
    usable = cpus or len(os.sched_getaffinity(0))
    return Peak(usable * clock * 1e6 * per_cycle, "estimate",
                f"{usable} CPUs x {clock:g} MHz x {per_cycle} {precision} FLOP/cycle ({why})")


# Intel family 6 models whose AVX-512 cores have one 512-bit FMA unit (ports 0+1 fused,
# none on port 5): Cannon Lake, Ice Lake client, Tiger Lake, Rocket Lake. 512-bit or two
# 256-bit FMAs a cycle, 32 fp32 FLOP either way.
INTEL_ONE_FMA512_MODELS = {0x66, 0x7D, 0x7E, 0x8C, 0x8D, 0xA7}
# Arm cores by (CPU implementer, CPU part): fp32 FLOP/cycle of their FMA pipes.
ARM_CORES = {
    (0x41, 0xD0C): (16, "Neoverse N1: two 128-bit FMA pipes"),
    (0x41, 0xD49): (16, "Neoverse N2: two 128-bit FMA pipes"),
    (0x41, 0xD40): (32, "Neoverse V1: four 128-bit FMA pipes"),
    (0x41, 0xD4F): (32, "Neoverse V2: four 128-bit FMA pipes"),
    (0x46, 0x001): (64, "A64FX: two 512-bit SVE FMA pipes"),
}


def cpu_flops_per_cycle(precision: str, cpuinfo: str) -> tuple[int, str]:
    """FLOPs one core can retire per cycle at `precision`, and why, from /proc/cpuinfo.

    fp32 counts the FMAs the core executes a cycle (2 FLOP per lane): the vendor, family
    and model decide it where they tell the datapath width, since the flags only say which
    instructions decode. AMD family 0x17 models below 0x30 (Zen, Zen+): two 128-bit FMA
    pipes, 16. Family 0x17 from 0x30 and 0x19 (Zen 2, Zen 3, Zen 4): two 256-bit FMA pipes,
    32, even where avx512f shows (Zen 4 runs AVX-512 as two halves). Family 0x1A (Zen 5):
    512-bit datapaths, 64 with avx512f (mobile Zen 5 runs them as halves, so there 2x
    loose). Intel client AVX-512 cores with one 512-bit FMA (INTEL_ONE_FMA512_MODELS): 32.
    Otherwise the widest FMA the flags show with two FMA units assumed (server cores have
    them): AVX-512 64, AVX2+FMA 32, AVX (a 256-bit multiply and add) 16, SSE 8. Arm: the
    known Neoverse cores (ARM_CORES), else four 128-bit pipes (32), 64 with SVE (its
    vector length is not in cpuinfo). The separate FADD pipes of Zen are not counted: dense
    kernels are FMA-bound.

    bf16 and fp16 use the matrix or dot-product units where the flags show them: AMX 1024 a
    cycle (amx_bf16, amx_fp16), AVX512-BF16 and AVX512-FP16 twice the fp32 rate, Arm's
    BFMMLA four times; otherwise they compute at the fp32 rate (tf32 is fp32 on a CPU).
    """
    fields: dict[str, str] = {}
    for key, value in _pairs(cpuinfo):
        fields.setdefault(key, value)  # the first processor's
    flags = set(fields.get("flags", "").split())
    if not flags and "Features" in fields:
        return _arm_per_cycle(precision, fields)
    vendor = fields.get("vendor_id", "")
    family, model = _int(fields.get("cpu family")), _int(fields.get("model"))
    if vendor == "AuthenticAMD" and family == 0x17 and model < 0x30:
        fp32, why = 16, "AMD Zen/Zen+: two 128-bit FMA pipes"
    elif vendor == "AuthenticAMD" and family in (0x17, 0x19):
        fp32, why = 32, "AMD Zen 2/3/4: two 256-bit FMA pipes (Zen 4 splits AVX-512)"
    elif vendor == "AuthenticAMD" and family == 0x1A and "avx512f" in flags:
        fp32, why = 64, "AMD Zen 5: two 512-bit FMA pipes"
    elif vendor == "GenuineIntel" and family == 6 and model in INTEL_ONE_FMA512_MODELS:
        fp32, why = 32, "Intel client core with one 512-bit FMA unit"
    elif "avx512f" in flags:
        fp32, why = 64, "AVX-512, two 512-bit FMA units assumed"
    elif {"avx2", "fma"} <= flags:
        fp32, why = 32, "AVX2+FMA, two 256-bit FMA units assumed"
    elif "avx" in flags:
        fp32, why = 16, "AVX: a 256-bit multiply and a 256-bit add"
    else:
        fp32, why = 8, "SSE: a 128-bit multiply and a 128-bit add"
    if precision == "bf16" and "amx_bf16" in flags:
        return 1024, "AMX-BF16 tiles"
    if precision == "fp16" and "amx_fp16" in flags:
        return 1024, "AMX-FP16 tiles"
    if precision in ("bf16", "fp16") and f"avx512_{precision}" in flags:
        return 2 * fp32, f"{why}; AVX512-{precision.upper()} at twice the fp32 rate"
    return fp32, why


def _arm_per_cycle(precision: str, fields: dict[str, str]) -> tuple[int, str]:
    features = set(fields["Features"].split())
    core = ARM_CORES.get((_int(fields.get("CPU implementer")), _int(fields.get("CPU part"))))
    fp32, why = core or ((64, "Arm with SVE, 512-bit vectors assumed") if "sve" in features
                         else (32, "Arm, four 128-bit FMA pipes assumed"))
    if precision == "bf16" and "bf16" in features:
        return 4 * fp32, f"{why}; BFMMLA at four times the fp32 rate"
    if precision == "fp16" and "asimdhp" in features:
        return 2 * fp32, f"{why}; fp16 vectors at twice the fp32 rate"
    return fp32, why


def _pairs(cpuinfo: str) -> list[tuple[str, str]]:
    """The key/value lines of /proc/cpuinfo, in order."""
    pairs = []
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            pairs.append((key.strip(), value.strip()))
    return pairs


def _int(value: str | None) -> int:
    """A cpuinfo number: decimal ("25") on x86, hexadecimal ("0x41") on Arm; -1 if none."""
    if not value:
        return -1
    try:
        return int(value, 16) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return -1


def _max_cpu_mhz() -> float | None:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as handle:
            return int(handle.read()) / 1000
    except (OSError, ValueError):
        return None

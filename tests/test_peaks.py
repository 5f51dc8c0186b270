"""Peaks (issue 21, item 5): a GPU's datasheet peak by its exact model, never by a substring
of its name; "no peak" with its reason where there is none; and the CPU's bound from what
its cores execute, not from the instructions they decode."""

from __future__ import annotations

import pytest

from orchestrator.hardware.peaks import (
    DATASHEET_PEAKS,
    GPU_NAMES,
    PRECISIONS,
    TERA,
    cpu_flops_per_cycle,
    cpu_peak_estimate,
    datasheet_peak,
    gpu_memory_gb,
    gpu_model_key,
    peak_gap,
)
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES


def tflops(model: str, precision: str, devices: int = 1) -> float:
    peak = datasheet_peak(model, precision, devices)
    assert peak is not None, peak_gap(model, precision, devices)
    assert peak.source == "datasheet" and peak.reference
    return peak.flops / TERA


def test_the_l40s_has_its_own_figures_not_the_l4s():
    assert [tflops("NVIDIA L40S", p) for p in PRECISIONS] == [91.6, 183, 362.05, 362.05]
    assert [tflops("NVIDIA L4", p) for p in PRECISIONS] == [30.3, 60, 121, 121]
    assert "L40S" in datasheet_peak("NVIDIA L40S", "bf16", 1).reference


@pytest.mark.parametrize("name", ["NVIDIA RTX A1000", "RTX A1000 6GB Laptop GPU",
                                  "NVIDIA L40", "NVIDIA A100X", "NVIDIA H100 SXM5 Ultra",
                                  "Quadro RTX 8000", "NVIDIA T400", ""])
def test_a_name_that_only_contains_a_known_model_has_no_peak_and_says_why(name):
    assert gpu_model_key(name) is None
    for precision in PRECISIONS:
        assert datasheet_peak(name, precision, 1) is None
        assert peak_gap(name, precision) == (f"unknown GPU model {name!r}" if name
                                             else "no GPU model recorded")


def test_no_model_and_no_devices_say_why():
    assert datasheet_peak(None, "fp32", 1) is None
    assert peak_gap(None, "fp32") == "no GPU model recorded"
    assert datasheet_peak("NVIDIA L4", "fp32", 0) is None
    assert peak_gap("NVIDIA L4", "fp32", devices=0) == "no GPUs of 'NVIDIA L4' counted"


def test_a_name_of_several_models_is_no_guess():
    assert datasheet_peak("NVIDIA H100", "bf16", 1) is None
    assert peak_gap("NVIDIA H100", "bf16") == (
        "ambiguous GPU model 'NVIDIA H100': the H100 SXM, PCIe and NVL have different peaks")


def test_the_h100_nvl_pcie_and_sxm_each_have_their_figures():
    assert [tflops("NVIDIA H100 NVL", p) for p in PRECISIONS] == [60, 417.5, 835.5, 835.5]
    assert [tflops("NVIDIA H100 PCIe", p) for p in PRECISIONS] == [51, 378, 756.5, 756.5]
    assert [tflops("NVIDIA H100 80GB HBM3", p) for p in PRECISIONS] == [67, 494.5, 989.5,
                                                                         989.5]
    assert [tflops("NVIDIA H200 NVL", p) for p in PRECISIONS] == [60, 417.5, 835.5, 835.5]


@pytest.mark.parametrize(("name", "model"), [
    ("Tesla P100-SXM2-16GB", "P100-SXM2"), ("Tesla P100-PCIE-16GB", "P100-PCIE"),
    ("Tesla P100-PCIE-12GB", "P100-PCIE"), ("Tesla V100-SXM2-16GB", "V100-SXM2"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2"), ("Tesla V100-PCIE-32GB", "V100-PCIE"),
    ("Tesla V100S-PCIE-32GB", "V100S-PCIE"), ("Tesla T4", "T4"), ("NVIDIA T4", "T4"),
    ("NVIDIA A10", "A10"), ("NVIDIA A10G", "A10G"), ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA A100-SXM4-40GB", "A100-SXM4"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4"), ("NVIDIA A100-SXM-80GB", "A100-SXM4"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIE"), ("NVIDIA A100 80GB PCIe", "A100-PCIE"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIE"),
    ("NVIDIA H100 NVL", "H100-NVL"), ("NVIDIA H200", "H200-SXM"),
    ("NVIDIA H200 NVL", "H200-NVL"), ("NVIDIA B200", "B200"),
    ("NVIDIA GeForce GTX TITAN X", "GTX TITAN X"), ("NVIDIA TITAN RTX", "TITAN RTX"),
    ("NVIDIA GeForce RTX 3090", "RTX 3090"), ("nvidia geforce rtx 3090", "RTX 3090"),
])
def test_names_as_the_driver_writes_them_resolve_to_their_model(name, model):
    assert gpu_model_key(name) == model
    assert tflops(name, "fp32") == DATASHEET_PEAKS[model].tflops["fp32"]


def test_every_model_has_every_precision_or_the_reason_it_has_none():
    assert set(GPU_NAMES.values()) == set(DATASHEET_PEAKS)  # every model is reachable
    for model, sheet in DATASHEET_PEAKS.items():
        assert sheet.reference.startswith("NVIDIA") and sheet.memory_gb > 0, model
        assert set(sheet.tflops) | set(sheet.gaps) == set(PRECISIONS), model
        assert not set(sheet.tflops) & set(sheet.gaps), model
        # a lower precision is never slower than fp32 (a typo, or a sparse figure halved
        # twice, would show here)
        assert all(rate >= sheet.tflops["fp32"] for rate in sheet.tflops.values()), model
        name = next(n for n, m in GPU_NAMES.items() if m == model)
        for precision in PRECISIONS:
            peak, gap = datasheet_peak(name, precision, 1), peak_gap(name, precision)
            assert (peak is None) != (gap is None), (model, precision)
            if gap:
                assert gap.startswith(f"no {precision} peak for NVIDIA {model}: ")
                assert sheet.gaps[precision] in gap


def test_a_gpu_without_bf16_arithmetic_says_so():
    assert datasheet_peak("Tesla P100-SXM2-16GB", "bf16", 1) is None
    assert peak_gap("Tesla P100-SXM2-16GB", "bf16") == (
        "no bf16 peak for NVIDIA P100-SXM2: Pascal has no bf16 arithmetic; its datasheet "
        "gives no bf16 rate")
    assert "Turing" in peak_gap("Tesla T4", "bf16")
    assert peak_gap("NVIDIA H100 NVL", "fp8") == (
        "no fp8 peak for NVIDIA H100-NVL: the peak table holds fp32, tf32, fp16, bf16")


def test_tf32_before_ampere_is_the_fp32_rate_and_says_so():
    peak = datasheet_peak("Tesla V100-SXM2-16GB", "tf32", 1)
    assert peak.flops == 15.7 * TERA and "no TF32 tensor cores" in peak.reference


def test_every_catalogued_ec2_gpu_resolves_to_a_peak_per_device_times_devices():
    for instance in EC2_INSTANCE_TYPES.values():
        if not instance.gpus:
            continue
        model = gpu_model_key(instance.gpu_model)
        assert model in DATASHEET_PEAKS, instance.name
        for precision in PRECISIONS:
            per_device = DATASHEET_PEAKS[model].tflops.get(precision)
            peak = datasheet_peak(instance.gpu_model, precision, instance.gpus)
            if per_device is None:
                assert peak is None and peak_gap(instance.gpu_model, precision), instance.name
            else:
                assert peak.flops == per_device * TERA * instance.gpus, instance.name
        assert gpu_memory_gb(instance.gpu_model) >= instance.gpu_memory_gib


def test_gpu_memory_is_the_largest_variants():
    assert gpu_memory_gb("Tesla V100-SXM2-16GB") == 32
    assert gpu_memory_gb("NVIDIA H200") == 141 and gpu_memory_gb("NVIDIA L40S") == 48
    assert gpu_memory_gb("NVIDIA RTX A1000") is None


def cpuinfo(vendor: str, family: int, model: int, flags: str, processors: int = 2) -> str:
    block = (f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n"
             f"model\t\t: {model}\nmodel name\t: a CPU\ncpu MHz\t\t: 2000.000\n"
             f"flags\t\t: fpu sse sse2 avx avx2 fma {flags}\n\n")
    return "".join(block.format(n=n) for n in range(processors))


ZEN4 = cpuinfo("AuthenticAMD", 0x19, 0x11, "avx512f avx512bw avx512_bf16")  # EPYC Genoa
ZEN5 = cpuinfo("AuthenticAMD", 0x1A, 0x02, "avx512f avx512bw avx512_bf16")  # EPYC Turin
SAPPHIRE_RAPIDS = cpuinfo("GenuineIntel", 6, 0x8F,
                          "avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile")
TIGER_LAKE = cpuinfo("GenuineIntel", 6, 0x8C, "avx512f")
ZEN1 = cpuinfo("AuthenticAMD", 0x17, 0x01, "")  # EPYC Naples
ZEN2 = cpuinfo("AuthenticAMD", 0x17, 0x31, "")  # EPYC Rome


def test_zen4_runs_avx512_as_two_halves_so_32_fp32_flop_per_cycle():
    assert cpu_flops_per_cycle("fp32", ZEN4)[0] == 32
    assert cpu_flops_per_cycle("bf16", ZEN4)[0] == 64  # AVX512-BF16 dot products
    assert cpu_flops_per_cycle("fp16", ZEN4)[0] == 32  # no fp16 arithmetic
    peak = cpu_peak_estimate("fp32", ZEN4, cpus=1, max_mhz=1000)
    assert peak.flops == 1000e6 * 32 and peak.source == "estimate"
    assert "32 fp32 FLOP/cycle" in peak.reference and "Zen" in peak.reference


def test_zen5_and_intel_server_cores_have_two_512_bit_fma_units():
    assert cpu_flops_per_cycle("fp32", ZEN5)[0] == 64
    assert cpu_peak_estimate("fp32", ZEN5, cpus=2, max_mhz=1000).flops == 2 * 1000e6 * 64
    assert cpu_flops_per_cycle("fp32", SAPPHIRE_RAPIDS)[0] == 64
    assert cpu_flops_per_cycle("bf16", SAPPHIRE_RAPIDS)[0] == 1024  # AMX
    assert cpu_flops_per_cycle("fp16", SAPPHIRE_RAPIDS)[0] == 128  # AVX512-FP16, no AMX-FP16


def test_older_and_client_cores_by_their_datapaths():
    assert cpu_flops_per_cycle("fp32", ZEN1)[0] == 16
    assert cpu_flops_per_cycle("fp32", ZEN2)[0] == 32
    assert cpu_flops_per_cycle("fp32", TIGER_LAKE)[0] == 32
    unknown = cpuinfo("SomeVendor", 1, 1, "avx512f")
    assert cpu_flops_per_cycle("fp32", unknown)[0] == 64  # two FMA units assumed


def test_arm_cores_by_implementer_and_part():
    def arm(part: str, features: str) -> str:
        return (f"processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd {features}\n"
                f"CPU implementer\t: 0x41\nCPU part\t: {part}\n")

    assert cpu_flops_per_cycle("fp32", arm("0xd0c", "asimdhp"))[0] == 16  # Graviton2
    assert cpu_flops_per_cycle("fp32", arm("0xd40", "sve bf16"))[0] == 32  # Graviton3
    assert cpu_flops_per_cycle("bf16", arm("0xd40", "sve bf16"))[0] == 128
    assert cpu_flops_per_cycle("fp32", arm("0xfff", "sve"))[0] == 64  # unknown, with SVE
    assert cpu_peak_estimate("fp32", arm("0xd0c", ""), cpus=1) is None  # no clock given


def test_a_given_cpuinfo_is_read_alone():
    # the clock from its "cpu MHz" (with the turbo headroom), not from this machine's cpufreq
    assert cpu_peak_estimate("fp32", ZEN4, cpus=1).flops == 2 * 2000e6 * 32

"""The EC2 part of the hardware catalogue: spec validation by it, and its refresh from
`describe_instance_types` (moto in server mode stands in for AWS)."""

from __future__ import annotations

import boto3

from orchestrator.hardware.peaks import datasheet_peak
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES, described_instance_types
from tests.test_spec import GOOD, error_of

EC2_GOOD = GOOD.replace("{name: box, kind: local}",
                        "{name: box, kind: ec2, instance_type: p3.8xlarge, gpus: 4}")


def test_an_unknown_instance_type_is_a_spec_error(matrix_file):
    err = error_of(matrix_file, EC2_GOOD.replace("p3.8xlarge", "p3.9xlarge"))
    assert err.field == "hardware[0]" and "unknown EC2 instance type 'p3.9xlarge'" in err.problem
    assert "p3.8xlarge" in err.problem  # the known ones are listed


def test_more_gpus_than_the_type_has_is_a_spec_error(matrix_file):
    err = error_of(matrix_file, EC2_GOOD.replace("gpus: 4", "gpus: 8"))
    assert err.problem.endswith("p3.8xlarge has 4 GPUs, the entry asks for gpus: 8")
    err = error_of(matrix_file, EC2_GOOD.replace("p3.8xlarge", "c5.18xlarge"))
    assert "c5.18xlarge has no GPU" in err.problem


def test_every_catalogued_gpu_has_a_datasheet_peak():
    for instance in EC2_INSTANCE_TYPES.values():
        if instance.gpus:
            peak = datasheet_peak(instance.gpu_model, "fp32", instance.gpus)
            assert peak is not None and peak.flops > 0, instance.name


def test_describe_instance_types_refreshes_the_catalogue(moto_server):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    found = described_instance_types(ec2, ["c5.xlarge", "g4dn.12xlarge", "g5.xlarge"])
    assert found["c5.xlarge"].vcpus == 4 and found["c5.xlarge"].gpus == 0
    assert found["c5.xlarge"].memory_gib == EC2_INSTANCE_TYPES["c5.xlarge"].memory_gib
    g4dn = found["g4dn.12xlarge"]
    assert (g4dn.vcpus, g4dn.gpus, g4dn.gpu_memory_gib) == (48, 4, 16)
    assert g4dn.gpu_model == "Tesla T4"  # the driver's name, which the peaks know


def test_the_shipped_network_bandwidths_are_what_ec2_states(moto_server):
    """What a cell across nodes' bus bandwidth is judged against (report/bounds.py): each
    catalogued type's network figure as describe_instance_types states it."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    found = described_instance_types(ec2, list(EC2_INSTANCE_TYPES))
    stated = {name: kind.network_gbps for name, kind in found.items() if kind.network_gbps}
    assert len(stated) >= 10, found
    assert {name: EC2_INSTANCE_TYPES[name].network_gbps for name in stated} == stated
    assert all(kind.network_gbps for kind in EC2_INSTANCE_TYPES.values())

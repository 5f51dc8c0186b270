"""EC2 prices in a real sweep on the session's Ray cluster (its node-a stands in for a
c5.xlarge): the budget check before anything runs, and the cost on every row."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.providers.aws.pricing import SHIPPED_AS_OF, SHIPPED_PRICES
from tests.conftest import PROJECT, cell_records, run_cli, write

MATRIX = """
name: priced
budget_usd: {budget}
aws: {{region: us-east-1, instance_profile: matrix-bench-node}}
hardware: [{{name: node-a, kind: ec2, instance_type: c5.xlarge}}]
stacks: [{{name: here, executor: process}}]
workloads: [{{name: sleep, params: {{seconds: [0.2, 0.3]}}}}]
"""

pytestmark = pytest.mark.ray


def offline(tmp_path) -> dict[str, str]:
    """No AWS credentials and an empty price cache: the shipped table answers."""
    return {"HOME": str(tmp_path), "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"}


def test_a_plan_over_budget_refuses_to_run_and_says_by_how_much(ray_cluster, tmp_path):
    write(tmp_path / "m.yaml", MATRIX.format(budget=0.01))
    done = run_cli("run", "m.yaml", "--ray-address", ray_cluster.address, cwd=tmp_path,
                   env={**offline(tmp_path), "RAY_ADDRESS": ray_cluster.address,
                        "MATRIX_BENCH_DB": f"sqlite:///{tmp_path / 'empty.db'}"})
    assert done.returncode == 2
    # two cells without an estimate (no journal, an empty store): each at its 600 s
    # timeout, at $0.17/h
    assert "the plan costs up to $0.06" in done.stderr and "by $0.05" in done.stderr
    assert not (tmp_path / "reports" / "priced" / "results.jsonl").exists()


def test_every_row_carries_its_price_and_its_cost(ray_cluster, tmp_path):
    write(tmp_path / "m.yaml", MATRIX.format(budget=1))
    done = run_cli("run", "m.yaml", "--ray-address", ray_cluster.address, cwd=tmp_path,
                   env={**offline(tmp_path), "RAY_ADDRESS": ray_cluster.address})
    assert done.returncode == 0, done.stderr
    assert f"price: node-a $0.17/h (shipped-table {SHIPPED_AS_OF})" in done.stdout
    run_dir = tmp_path / "reports" / "priced"
    assert {c["status"] for c in cell_records(run_dir)} == {"ok"}
    rows = pd.read_parquet(run_dir / "results.parquet")
    price = SHIPPED_PRICES["c5.xlarge"]
    assert (rows.price_per_hour_usd == price).all() and (rows.instance_type == "c5.xlarge").all()
    assert (rows.price_source == f"shipped-table {SHIPPED_AS_OF}").all()
    assert rows.cell_cost_usd.tolist() == pytest.approx((rows.wall_s * price / 3600).tolist())
    assert rows.usd_per_million_items.tolist() == pytest.approx(
        (price / 3600 / rows.items_per_s * 1e6).tolist())
    report = (run_dir / "report.md").read_text()
    total = rows.drop_duplicates("cell_id").cell_cost_usd.sum()
    assert "## Cost" in report and f"Total: ${total:.2f} for the cells' own time" in report
    assert f"| node-a | c5.xlarge | {price:g} | shipped-table {SHIPPED_AS_OF} | 2 |" in report


def test_a_plan_says_when_a_price_buys_more_of_the_instance_than_the_cell_uses(tmp_path):
    done = run_cli("plan", str(PROJECT / "matrix" / "aws_p3.yaml"), cwd=tmp_path,
                   env=offline(tmp_path))
    assert done.returncode == 0, done.stderr
    prices = [line for line in done.stdout.splitlines() if line.startswith("price: ")]
    one = next(line for line in prices if line.startswith("price: p3.8xlarge-1gpu "))
    assert one.endswith("; whole instance, 1 of its 4 GPUs used)"), one
    whole = next(line for line in prices if line.startswith("price: p3.8xlarge-4gpu "))
    assert "whole instance" not in whole  # all four of its GPUs used: nothing to say

"""What EC2 cells cost: each hardware entry's price with its source and date, on every
row of its cells, and the derived cost columns (Contracts: provenance, price per hour).

A price is looked up once per sweep: through the AWS APIs where credentials exist, else
from the cache or the shipped table. Local hardware has no price.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orchestrator.cloud.pricing import Price, PriceBook
from orchestrator.records import ProvenanceRecord, Record
from orchestrator.spec import MatrixSpec

COST_COLUMNS = ("cell_cost_usd", "epoch_cost_usd", "usd_per_million_items")

if TYPE_CHECKING:
    import pandas as pd

    from orchestrator.plan import Plan


def hardware_prices(spec: MatrixSpec, book: PriceBook | None = None,
                    warn: Callable[[str], None] = lambda line: None) -> dict[str, Price]:
    """Hardware name -> its price per hour, for the EC2 entries that have one; a failed API
    lookup is passed to `warn` and the cache or the shipped table answers."""
    ec2 = [h for h in spec.hardware if h.kind == "ec2"]
    if not ec2 or spec.aws is None:
        return {}
    book = book or PriceBook()
    clients = _clients(spec.aws.region)
    prices = {}
    for hardware in ec2:
        price = book.price(str(hardware.instance_type), spec.aws.region, hardware.spot, clients)
        if price is not None:
            prices[hardware.name] = price
    for failure in book.failures:
        warn(f"price lookup failed, using the cache or the shipped table: {failure}")
    return prices


def head_price(spec: MatrixSpec, book: PriceBook | None = None) -> Price | None:
    """The head node's on-demand price: it bills for the whole sweep."""
    if spec.aws is None:
        return None
    book = book or PriceBook()
    return book.price(spec.aws.head_instance_type, spec.aws.region, False,
                      _clients(spec.aws.region))


def _clients(region: str) -> tuple[Any, Any] | None:
    """(pricing, ec2) clients where boto3 and credentials exist; never reads the keys out."""
    try:
        import boto3
    except ImportError:
        return None
    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        return None
    return session.client("pricing", region_name="us-east-1"), session.client("ec2")


def with_price(records: list[Record], instance_type: str | None,
               price: Price | None) -> list[Record]:
    """The attempt's records with its hardware's price on the provenance record."""
    if price is None:
        return records
    update = {"price_per_hour_usd": price.usd_per_hour, "price_source": price.describe(),
              "instance_type": instance_type}
    return [r.model_copy(update=update) if isinstance(r, ProvenanceRecord) else r
            for r in records]


def plan_cost_usd(plan: Plan, prices: dict[str, Price]) -> float:
    """The priced cells' estimated time x their price, the repeats a configuration may
    still get included. A cell without an estimate counts at its timeout: a budget is an
    upper bound, so the unknown is taken at its worst."""
    return sum((plan.estimate_s.get(cell.cell_id) or cell.timeout_s) / 3600 *
               prices[cell.hardware.name].usd_per_hour
               for cell in [*plan.to_run, *plan.may_add] if cell.hardware.name in prices)


def add_cost_columns(df: pd.DataFrame) -> pd.DataFrame:
    """cell_cost_usd (the cell's wall time), epoch_cost_usd (the whole epoch, `epoch_s`:
    warm-up and evaluation included, as the user pays for it) and usd_per_million_items
    (at the steady-state training rate), where rows carry a price."""
    if "price_per_hour_usd" not in df.columns:
        return df
    per_s = df["price_per_hour_usd"] / 3600
    df["cell_cost_usd"] = df["wall_s"] * per_s
    if "train_s" in df.columns:
        df["epoch_cost_usd"] = df.get("epoch_s", df["train_s"]) * per_s
        df["usd_per_million_items"] = per_s / df["items_per_s"] * 1e6
    return df

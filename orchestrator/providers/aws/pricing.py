"""What an EC2 instance costs per hour, and since when the tool knows it.

On-demand prices come from the AWS Pricing API, spot prices from
`describe_spot_price_history`; both are cached with their date (`prices.json` beside the
data cache). Without credentials, the shipped table below is the fallback. Every Price
carries its source and date, and whoever shows or uses a price prints both.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from orchestrator.providers import Price

# us-east-1, Linux, shared tenancy, on-demand USD per hour, from the EC2 on-demand pricing
# page as it stood on SHIPPED_AS_OF. AWS cut P4d and P5 prices in June 2025: those two rows
# are list prices from before the cut, so refresh them (the Pricing API) before trusting a
# cost of theirs.
SHIPPED_AS_OF = "2025-05-01"
SHIPPED_REGION = "us-east-1"
SHIPPED_PRICES: dict[str, float] = {
    "c5.xlarge": 0.17, "c5.4xlarge": 0.68, "c5.18xlarge": 3.06,
    "p3.2xlarge": 3.06, "p3.8xlarge": 12.24, "p3.16xlarge": 24.48, "p3dn.24xlarge": 31.212,
    "g4dn.xlarge": 0.526, "g4dn.12xlarge": 3.912, "g5.xlarge": 1.006, "g5.12xlarge": 5.672,
    "g6.xlarge": 0.8048, "g6.12xlarge": 4.6016, "p4d.24xlarge": 32.7726,
    "p5.48xlarge": 98.32, "m5.large": 0.096,
}
ON_DEMAND_TTL = timedelta(days=7)
SPOT_TTL = timedelta(hours=1)
# The Pricing API names regions by their location, not their code.
LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)",
             "us-west-2": "US West (Oregon)", "eu-west-1": "EU (Ireland)",
             "eu-central-1": "EU (Frankfurt)", "ap-northeast-1": "Asia Pacific (Tokyo)"}


def shipped_price(instance_type: str, region: str) -> Price | None:
    """The offline fallback, for the one region the table covers."""
    usd = SHIPPED_PRICES.get(instance_type) if region == SHIPPED_REGION else None
    return None if usd is None else Price(usd, "shipped-table", SHIPPED_AS_OF)


def on_demand_price(pricing: Any, instance_type: str, region: str) -> Price | None:
    """From the Pricing API (a boto3 `pricing` client; the API lives in us-east-1)."""
    location = LOCATIONS.get(region)
    if location is None:
        return None
    filters = {"instanceType": instance_type, "location": location, "operatingSystem": "Linux",
               "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
    answer = pricing.get_products(ServiceCode="AmazonEC2", MaxResults=10, Filters=[
        {"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()])
    for item in answer["PriceList"]:
        product = json.loads(item) if isinstance(item, str) else item
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term["priceDimensions"].values():
                usd = float(dimension["pricePerUnit"].get("USD", 0))
                if usd > 0:
                    return Price(usd, "pricing-api", _now())
    return None


def spot_price(ec2: Any, instance_type: str) -> Price | None:
    """The median over the region's availability zones of each zone's latest spot price."""
    answer = ec2.describe_spot_price_history(
        InstanceTypes=[instance_type], ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.now(UTC) - timedelta(hours=6))
    latest: dict[str, tuple[datetime, float]] = {}
    for entry in answer["SpotPriceHistory"]:
        zone, when = entry["AvailabilityZone"], entry["Timestamp"]
        if zone not in latest or when > latest[zone][0]:
            latest[zone] = (when, float(entry["SpotPrice"]))
    if not latest:
        return None
    newest = max(when for when, _ in latest.values())
    return Price(statistics.median(p for _, p in latest.values()), "spot-price-history",
                 newest.isoformat(timespec="seconds"))


class PriceBook:
    """Prices by (region, instance type, market), cached in a JSON file with their dates."""

    def __init__(self, cache_file: Path | None = None) -> None:
        self.cache_file = cache_file or default_cache_file()
        try:
            self._cache: dict[str, dict[str, Any]] = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            self._cache = {}
        self.failures: list[str] = []  # API lookups that failed; the fallback answered

    def price(self, instance_type: str, region: str, spot: bool,
              clients: tuple[Any, Any] | None = None) -> Price | None:
        """`clients` = (pricing, ec2) boto3 clients where credentials exist, else None:
        then a cached price of any age, then the shipped table."""
        key = f"{region}/{instance_type}/{'spot' if spot else 'on-demand'}"
        cached = self._cache.get(key)
        fresh = cached and _age(cached["fetched"]) < (SPOT_TTL if spot else ON_DEMAND_TTL)
        if clients is not None and not fresh:
            pricing, ec2 = clients
            try:
                found = spot_price(ec2, instance_type) if spot else \
                    on_demand_price(pricing, instance_type, region)
            except Exception as exc:  # no access, no network, no such API (botocore errors)
                self.failures.append(f"{key}: {type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0][:200]}")
                found = None
            if found is not None:
                self._cache[key] = {**asdict(found), "fetched": _now()}
                self._save()
                return found
        if cached:
            return Price(cached["usd_per_hour"], cached["source"], cached["as_of"])
        return None if spot else shipped_price(instance_type, region)

    def _save(self) -> None:
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.cache_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(self._cache, indent=1, sort_keys=True))
        os.replace(temporary, self.cache_file)


def default_cache_file() -> Path:
    return Path.home() / ".cache" / "matrix-bench" / "prices.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _age(stamp: str) -> timedelta:
    return datetime.now(UTC) - datetime.fromisoformat(stamp)

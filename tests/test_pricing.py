"""EC2 prices: the Pricing API (botocore's Stubber: moto has none), spot history (moto in
server mode), the cache with dates, and the shipped fallback."""

from __future__ import annotations

import json

import boto3
from botocore.stub import ANY, Stubber

from orchestrator.providers.aws.pricing import (
    SHIPPED_AS_OF,
    PriceBook,
    on_demand_price,
    shipped_price,
    spot_price,
)


def price_list_item(usd: str) -> str:
    """One PriceList entry in the shape the Pricing API documents (a JSON string)."""
    return json.dumps({
        "product": {"attributes": {"instanceType": "p3.2xlarge", "location":
                                   "US East (N. Virginia)"}},
        "terms": {"OnDemand": {"ABC.JRTCKXETXF": {"priceDimensions": {
            "ABC.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd},
                                          "description": "$3.06 per On Demand Linux"}}}}}})


def stubbed_pricing(*answers: str):
    pricing = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x")
    stub = Stubber(pricing)
    for usd in answers:
        stub.add_response("get_products", {"PriceList": [price_list_item(usd)],
                                           "FormatVersion": "aws_v1"},
                          {"ServiceCode": "AmazonEC2", "MaxResults": 10, "Filters": ANY})
    stub.activate()
    return pricing, stub


def test_on_demand_price_from_the_pricing_api():
    pricing, stub = stubbed_pricing("3.0600000000")
    price = on_demand_price(pricing, "p3.2xlarge", "us-east-1")
    assert price.usd_per_hour == 3.06 and price.source == "pricing-api"
    stub.assert_no_pending_responses()


def test_spot_price_is_the_median_of_the_zones_latest(moto_server):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    price = spot_price(ec2, "c5.xlarge")
    assert price is not None and price.usd_per_hour > 0
    assert price.source == "spot-price-history"


def test_the_book_caches_with_dates_and_falls_back_to_the_shipped_table(tmp_path):
    cache = tmp_path / "prices.json"
    pricing, stub = stubbed_pricing("3.1")
    book = PriceBook(cache)
    fetched = book.price("p3.2xlarge", "us-east-1", spot=False, clients=(pricing, None))
    assert fetched.usd_per_hour == 3.1
    stub.assert_no_pending_responses()
    # A new book without credentials: the cached figure, with its source and date.
    again = PriceBook(cache).price("p3.2xlarge", "us-east-1", spot=False)
    assert again == fetched and again.describe().startswith("pricing-api 20")
    # Never fetched: the shipped table, dated; spot has no offline figure.
    offline = PriceBook(cache).price("c5.xlarge", "us-east-1", spot=False)
    assert offline == shipped_price("c5.xlarge", "us-east-1")
    assert offline.describe() == f"shipped-table {SHIPPED_AS_OF}"
    assert PriceBook(cache).price("c5.xlarge", "us-east-1", spot=True) is None
    assert PriceBook(cache).price("c5.xlarge", "eu-west-1", spot=False) is None

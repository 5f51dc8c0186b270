"""What EC2 hardware costs, for the `aws` provider: each entry's price with its source and
date, and the head node's (orchestrator/run/costs.py puts them on rows and budgets).

A price is looked up once per sweep: through the AWS APIs where credentials exist, else
from the cache or the shipped table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from orchestrator.providers import Price
from orchestrator.providers.aws.catalogue import EC2_INSTANCE_TYPES
from orchestrator.providers.aws.pricing import PriceBook
from orchestrator.providers.aws.settings import aws_section, ec2_settings

if TYPE_CHECKING:
    from orchestrator.spec.model import Hardware, MatrixSpec


def hardware_prices(spec: MatrixSpec, ec2: list[Hardware], book: PriceBook | None = None,
                    warn: Callable[[str], None] = lambda line: None) -> dict[str, Price]:
    """Hardware name -> its price per hour, for the EC2 entries that have one; a failed API
    lookup is passed to `warn` and the cache or the shipped table answers."""
    aws = aws_section(spec)
    if not ec2 or aws is None:
        return {}
    book = book or PriceBook()
    clients = price_clients(aws.region)
    prices = {}
    for hardware in ec2:
        spot = ec2_settings(hardware).spot
        price = book.price(str(hardware.instance_type), aws.region, spot, clients)
        if price is not None:
            prices[hardware.name] = replace(price, share=_share(hardware))
    for failure in book.failures:
        warn(f"price lookup failed, using the cache or the shipped table: {failure}")
    return prices


def _share(hardware: Hardware) -> str:
    """What of the billed instance a cell uses, where that is part of it."""
    instance = EC2_INSTANCE_TYPES.get(str(hardware.instance_type))
    if instance is None or not instance.gpus or hardware.gpus >= instance.gpus:
        return ""
    return (f"whole instance, {hardware.gpus} of its {instance.gpus} GPUs used" if hardware.gpus
            else f"whole instance, none of its {instance.gpus} GPUs used")


def head_price(spec: MatrixSpec, book: PriceBook | None = None) -> Price | None:
    """The head node's on-demand price: it bills for the whole sweep."""
    aws = aws_section(spec)
    if aws is None:
        return None
    book = book or PriceBook()
    return book.price(aws.head_instance_type, aws.region, False,
                      price_clients(aws.region))


def price_clients(region: str) -> tuple[Any, Any] | None:
    """(pricing, ec2) clients where boto3 and credentials exist; never reads the keys out."""
    try:
        import boto3
    except ImportError:
        return None
    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        return None
    return session.client("pricing", region_name="us-east-1"), session.client("ec2")

"""What an EC2 cluster of a run exposes, and to whom: its one security group.

The tool makes the group itself, before Ray's launcher runs, and hands its id to every node
type. Ray's AWS bootstrap then leaves networking alone: when it makes a group, it adds SSH
from 0.0.0.0/0 beside whatever the config asks for. The group `matrix-bench-<run>` holds
exactly two inbound rules, and `ensure_security_group` puts it back to them if it finds
more (a group an older version let Ray fill):

- TCP 22 from `aws.ssh_cidr` (default: this machine's public address), for the launcher's
  SSH and the dashboard tunnel;
- any traffic from members of the group itself, for Ray between the run's nodes.

`ssh_cidr_problem` is the check on that one source, shared by `matrix validate` and
`matrix cluster-config`: a range that opens the port to the internet at large is refused.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from orchestrator.providers.aws.aws import AwsError

NAME_PREFIX = "matrix-bench-"  # the run's key pair and security group: matrix-bench-<run>
RUN_TAG = "matrix-bench-run"
SSH_PORT = 22
# The widest public range SSH may come from: an office or campus network, not a continent.
WIDEST_PUBLIC_PREFIX = {4: 16, 6: 48}
# Ranges that never route on the internet: a VPC, a VPN or a bastion may use any prefix.
PRIVATE_RANGES = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))

Rule = tuple[str, int | None, int | None, str, str]  # protocol, ports, source kind, source


def ssh_cidr_problem(text: str) -> str | None:
    """Why `text` may not be the one source of SSH to the nodes, or None."""
    try:
        network = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError as exc:
        if "host bits set" in str(exc):
            wider = ipaddress.ip_network(text.strip(), strict=False)
            return f"{text!r} has host bits set: write {wider}, or the address alone"
        return f"{text!r} is not an address range (e.g. 203.0.113.7/32)"
    if any(network.version == private.version and network.subnet_of(private)  # type: ignore[arg-type]
           for private in PRIVATE_RANGES):
        return None
    if network.is_loopback or network.is_link_local or (network.is_unspecified and
            network.prefixlen == network.max_prefixlen):
        return (f"{network} is this machine's own (loopback, link-local or unspecified), "
                "which no EC2 node is reached from: give the public address you run matrix "
                "from (/32), or a private range your VPN or VPC uses")
    widest = WIDEST_PUBLIC_PREFIX[network.version]
    if network.prefixlen < widest:
        single = network.max_prefixlen
        return (f"{network} would open SSH to the internet at large: give the address you "
                f"run matrix from (/{single}), or a public range of /{widest} or narrower")
    return None


def ssh_cidr(text: str) -> str:
    """The range in AWS's notation: an address alone becomes its /32 (or /128)."""
    return str(ipaddress.ip_network(text.strip(), strict=True))


def group_name(run_id: str) -> str:
    return NAME_PREFIX + run_id


def wanted_rules(group_id: str, cidr: str) -> set[Rule]:
    kind = "cidr6" if ipaddress.ip_network(cidr).version == 6 else "cidr"
    return {("tcp", SSH_PORT, SSH_PORT, kind, cidr), ("-1", None, None, "group", group_id)}


def ensure_security_group(ec2: Any, run_id: str, cidr: str, subnet_id: str | None) -> str:
    """The id of the run's group in the VPC its nodes launch into, holding exactly
    `wanted_rules`: made if missing, put right if it holds more or less."""
    vpc = _vpc_of(ec2, subnet_id)
    name = group_name(run_id)
    found = ec2.describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc]}]
    )["SecurityGroups"]
    if found:
        group_id, held = found[0]["GroupId"], rules_of(found[0])
    else:
        group_id = ec2.create_security_group(
            GroupName=name, VpcId=vpc,
            Description=f"matrix-bench run {run_id}: SSH from one range, Ray among its nodes",
            TagSpecifications=[{"ResourceType": "security-group",
                                "Tags": [{"Key": RUN_TAG, "Value": run_id}]}])["GroupId"]
        held = set()
    wanted = wanted_rules(group_id, ssh_cidr(cidr))
    if extra := held - wanted:
        ec2.revoke_security_group_ingress(GroupId=group_id,
                                          IpPermissions=[_permission(r) for r in sorted(
                                              extra, key=str)])
    if missing := wanted - held:
        ec2.authorize_security_group_ingress(GroupId=group_id,
                                             IpPermissions=[_permission(r) for r in sorted(
                                                 missing, key=str)])
    return str(group_id)


def rules_of(group: dict[str, Any]) -> set[Rule]:
    """A group's inbound rules as describe_security_groups gives them, one per source."""
    rules: set[Rule] = set()
    for perm in group.get("IpPermissions", []):
        ports = (perm["IpProtocol"], perm.get("FromPort"), perm.get("ToPort"))
        if ports[0] == "-1":
            ports = ("-1", None, None)
        rules |= {(*ports, "cidr", r["CidrIp"]) for r in perm.get("IpRanges", [])}
        rules |= {(*ports, "cidr6", r["CidrIpv6"]) for r in perm.get("Ipv6Ranges", [])}
        rules |= {(*ports, "group", r["GroupId"]) for r in perm.get("UserIdGroupPairs", [])}
        rules |= {(*ports, "prefix", r["PrefixListId"]) for r in perm.get("PrefixListIds", [])}
    return rules


def _permission(rule: Rule) -> dict[str, Any]:
    protocol, low, high, kind, source = rule
    permission: dict[str, Any] = {"IpProtocol": protocol}
    if low is not None:
        permission |= {"FromPort": low, "ToPort": high}
    permission |= {
        "cidr": {"IpRanges": [{"CidrIp": source}]},
        "cidr6": {"Ipv6Ranges": [{"CidrIpv6": source}]},
        "group": {"UserIdGroupPairs": [{"GroupId": source}]},
        "prefix": {"PrefixListIds": [{"PrefixListId": source}]},
    }[kind]
    return permission


def _vpc_of(ec2: Any, subnet_id: str | None) -> str:
    if subnet_id:
        try:
            return str(ec2.describe_subnets(SubnetIds=[subnet_id])["Subnets"][0]["VpcId"])
        except Exception as exc:  # botocore's ClientError: no such subnet here
            raise AwsError(f"aws.subnet_id {subnet_id}: {str(exc).splitlines()[0]}") from None
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    if not vpcs:
        raise AwsError("the region has no default VPC: set aws.subnet_id to a subnet whose "
                         "instances get a public address")
    return str(vpcs[0]["VpcId"])

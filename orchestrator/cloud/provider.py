"""The `aws` provider (orchestrator/providers/__init__.py): what it answers today is the
credentials of its registry, ECR, through the instance's or the user's AWS credentials."""

from __future__ import annotations

from orchestrator.cloud.aws import ecr_auth, is_ecr


class AwsProvider:
    def registry_auth(self, reference: str, for_push: bool) -> dict[str, str] | None:
        """ECR credentials for an ECR reference (a node's instance profile may read its
        run's repository; a push creates the repository if needed), else None."""
        return ecr_auth(reference, for_push=for_push) if is_ecr(reference) else None


PROVIDER = AwsProvider()

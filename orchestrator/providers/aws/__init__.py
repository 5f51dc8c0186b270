"""The `aws` provider (provider.py): EC2 hardware on a Ray cluster launched for the sweep
(ray_cluster, cluster, ec2_group, head_driver, follower), its prices and quotas, ECR, S3
and the cleanup of what runs leave behind. The only package that imports boto3."""

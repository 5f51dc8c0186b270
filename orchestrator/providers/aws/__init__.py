"""The `aws` provider (provider.py): EC2 hardware on a Ray cluster launched for the sweep
(ray_cluster, cluster; the head driver and its follower are providers/ray_head's), its
prices and quotas, ECR, S3 and the cleanup of what runs leave behind. The only package that
imports boto3 (the head driver's teardown comes back here: cleanup.tear_down_run)."""

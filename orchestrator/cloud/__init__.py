"""Cloud back ends: EC2 through Ray's cluster launcher (ray_cluster) and boto3 (aws)."""

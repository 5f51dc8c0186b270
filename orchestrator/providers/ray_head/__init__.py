"""A Ray cluster with a driver on its head, for any provider that brings one up: the head
driver (driver.py) runs the cluster's cells and prints their records, the follower
(follower.py) submits it as a Ray job and reads them back, and the group (group.py) is the
provider's CellGroup around both. The provider brings only its cluster and its teardown."""

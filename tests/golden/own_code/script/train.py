"""A training script as a user brings it: its ids are pinned in tests/golden/identities.json."""

import sys
import time

time.sleep(float(sys.argv[1]))

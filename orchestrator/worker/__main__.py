"""`python -m orchestrator.worker CELL_FILE OUT_FILE`: one cell, in this process."""

import sys

from orchestrator.worker.main import main

sys.exit(main(sys.argv[1:]))

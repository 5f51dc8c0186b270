"""The data files `keras_lstm` reads (orchestrator/worker/datasets.py fetches and checks them): the
Keras text-generation example's corpus (Beyond Good and Evil), seed 002's data, and the
characters of WikiText-2 (the files `lstm_lm` declares)."""

from orchestrator.worker.datasets import DataFile
from workloads.lstm_lm.datasets import WIKITEXT2

DATASETS = {
    "nietzsche": (
        DataFile("nietzsche", "nietzsche.txt",
                 "https://s3.amazonaws.com/text-datasets/nietzsche.txt",
                 "23cf69874ab69d3d256099ab530ea4be24d47d9675b673bcc67cbcd6298ec647"),
    ),
    "wikitext2": WIKITEXT2,
}

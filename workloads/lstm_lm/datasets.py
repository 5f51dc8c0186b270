"""The data files `lstm_lm` reads (orchestrator/worker/datasets.py fetches and checks them):
pytorch/examples' word-level WikiText-2, the wiki.*.tokens files of wikitext-2-v1.zip."""

from orchestrator.worker.datasets import DataFile

_PYTORCH_EXAMPLES = ("https://raw.githubusercontent.com/pytorch/examples/"
                     "77f55b912142e11fcfdf5b530231fb9c52f181e8/word_language_model/data")

WIKITEXT2 = (
    DataFile("wikitext-2", "train.txt", f"{_PYTORCH_EXAMPLES}/wikitext-2/train.txt",
             "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"),
    DataFile("wikitext-2", "valid.txt", f"{_PYTORCH_EXAMPLES}/wikitext-2/valid.txt",
             "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"),
    DataFile("wikitext-2", "test.txt", f"{_PYTORCH_EXAMPLES}/wikitext-2/test.txt",
             "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"),
)

DATASETS = {"wikitext2": WIKITEXT2}

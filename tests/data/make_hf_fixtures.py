"""Writes tests/data/hf/: folders made by Hugging Face `datasets` (5.2.0) `save_to_disk`, which the tests read as a
user's data. `datasets` is not a dependency (pipelines/tasks/files.py reads these folders with pyarrow, and installing
it changes the installed-docs corpus pkgdocs is built from), so the folders are made once, by the real library, and
shipped:

    pip install --target /tmp/dsenv --no-deps datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0
    PYTHONPATH=/tmp/dsenv python tests/data/make_hf_fixtures.py
"""

import shutil
from pathlib import Path

import datasets
import numpy as np

OUT = Path(__file__).resolve().parent / "hf"
POS = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "park": "NOUN", "runs": "VERB", "sleeps": "VERB",
       "in": "ADP", "quickly": "ADV"}


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["neg", "pos"])})
    datasets.Dataset.from_dict({"sentence": ["bad", "good", "unlabeled"], "label": [0, 1, -1]},
                               features=features).save_to_disk(str(OUT / "sentiment"))
    ner = datasets.Dataset.from_dict({"tokens": [["EU", "rejects"], ["x"]], "ner_tags": [[1, 0], [0, 0]]},
                                     features=datasets.Features({
                                         "tokens": datasets.Sequence(datasets.Value("string")),
                                         "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-ORG"]))}))
    datasets.DatasetDict({"train": ner, "validation": ner}).save_to_disk(str(OUT / "ner-dict"))
    rng = np.random.default_rng(4)  # part-of-speech rows for tests/e2e/test_own_data.py: 120 distinct sentences
    tokens = []
    for i in range(120):
        tokens.append([str(rng.choice(["the", "a"])), str(rng.choice(["dog", "cat"])), str(rng.choice(["runs", "sleeps"])),
                       "in", "the", "park", *(["quickly"] if rng.random() < 0.5 else []), f"{i}"])
    tags = [[POS.get(w, "NUM") for w in ws] for ws in tokens]
    datasets.Dataset.from_dict({"tokens": tokens, "tags": tags}).save_to_disk(str(OUT / "pos"))


if __name__ == "__main__":
    main()

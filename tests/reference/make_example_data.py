#!/usr/bin/env python3
"""Data for configs/examples/classification.yaml, from a public dataset scikit-learn ships.

scikit-learn's load_digits (the UCI "Optical Recognition of Handwritten Digits" test set:
1797 8x8 images, 10 classes; shipped in scikit-learn, BSD-3-Clause): a LogisticRegression fitted
on the first 900 samples predicts the remaining 897. Writes to configs/examples/data/:

    preds.npy   float32 [897, 10]  predict_proba of samples 900..1796
    labels.npy  int64   [897]      their true digits

Deterministic: a fixed split, no shuffling, and lbfgs (a deterministic solver). Then run
classification.py to refresh the expected values (section "example" of
tests/reference/expected_classification.json):

    .venv-ref/bin/python tests/reference/make_example_data.py
    .venv-ref/bin/python tests/reference/classification.py
"""

from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "configs" / "examples" / "data"
N_TRAIN = 900
MAX_ITER = 5000


def main():
    digits = load_digits()
    x, y = digits.data, digits.target
    assert x.shape == (1797, 64)
    model = LogisticRegression(max_iter=MAX_ITER)
    model.fit(x[:N_TRAIN], y[:N_TRAIN])
    proba = model.predict_proba(x[N_TRAIN:]).astype(np.float32)
    labels = y[N_TRAIN:].astype(np.int64)
    assert proba.shape == (897, 10) and labels.shape == (897,)

    OUT.mkdir(parents=True, exist_ok=True)
    np.save(OUT / "preds.npy", np.ascontiguousarray(proba), allow_pickle=False)
    np.save(OUT / "labels.npy", labels, allow_pickle=False)
    acc = float(np.mean(proba.argmax(1) == labels))
    print(f"wrote {OUT.relative_to(ROOT)}/preds.npy {proba.dtype}{list(proba.shape)} and "
          f"labels.npy {labels.dtype}{list(labels.shape)}; top-1 accuracy {acc:.4f} "
          f"(scikit-learn {sklearn.__version__}, numpy {np.__version__})")


if __name__ == "__main__":
    main()

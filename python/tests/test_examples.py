"""Every example config gives the same numbers through Python as through the CLI: tally.run()
(the config's own reader) and Evaluator.add() with the arrays loaded by NumPy."""

import json
import math

import numpy as np
import pytest

import tally
from conftest import EXAMPLES, ROOT, cli_results

CONFIGS = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


def same(a, b, path="results"):
    """Equal, bit for bit for floats (NaN equals NaN, and null, which stands for NaN in a results
    file): the same engine computed both."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        if isinstance(a, float) and math.isnan(a):
            assert b is None or (isinstance(b, float) and math.isnan(b)), f"{path}: {a} != {b}"
        else:
            assert float(a) == float(b), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("name", CONFIGS)
def test_run_equals_the_cli(name, tmp_path):
    config = EXAMPLES / name
    expected = cli_results(config, tmp_path)
    out = tmp_path / "py.json"
    got = tally.run(str(config), output=str(out))
    same(got, expected["results"])
    # The results file Python wrote is the CLI's, but for the wall time.
    written = json.loads(out.read_text())
    same(written["results"], expected["results"])
    assert written["run"]["samples"] == expected["run"]["samples"]


def npy_fields(config_path):
    """field -> array for a config whose data section names plain .npy files, else None."""
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the example configs here")
    cfg = yaml.safe_load(config_path.read_text())
    data = cfg.get("data", {})
    if data.get("type") != "npy":
        return None
    fields = {}
    for field, spec in data.get("fields", {}).items():
        if not isinstance(spec, str) or not spec.endswith(".npy"):
            return None
        fields[field] = np.load(config_path.parent / spec)
    return fields


def _npy_configs():
    try:
        import yaml
    except ImportError:
        return CONFIGS  # each then skips with the reason
    out = []
    for name in CONFIGS:
        data = (yaml.safe_load((EXAMPLES / name).read_text()) or {}).get("data", {})
        specs = data.get("fields", {}).values()
        if data.get("type") == "npy" and all(isinstance(s, str) and s.endswith(".npy") for s in specs):
            out.append(name)
    return out


@pytest.mark.parametrize("name", _npy_configs())
@pytest.mark.parametrize("batch", [1, 37, 4096])
def test_add_equals_the_cli(name, batch, tmp_path):
    config = EXAMPLES / name
    fields = npy_fields(config)
    if fields is None:
        pytest.skip(f"{name} does not read plain .npy files (its reader is tested through run())")
    expected = cli_results(config, tmp_path)["results"]
    ev = tally.Evaluator(str(config))
    n = len(next(iter(fields.values())))
    for i in range(0, n, batch):
        ev.add({k: v[i : i + batch] for k, v in fields.items()})
    same(ev.compute(), expected)
    assert ev.last_run["samples"] == n


def test_config_as_dict_text_and_overrides(tmp_path):
    preds = np.load(EXAMPLES / "data" / "preds.npy")
    labels = np.load(EXAMPLES / "data" / "labels.npy")
    expected = cli_results(EXAMPLES / "classification.yaml", tmp_path, "metrics.0.topk=[2,5]")
    by_dict = tally.Evaluator({"metrics": [{"type": "Accuracy", "topk": [2, 5]}]})
    by_text = tally.Evaluator("metrics:\n  - type: Accuracy\n    topk: [1]\n", {"metrics.0.topk": [2, 5]})
    for ev in (by_dict, by_text):
        ev.add(pred_scores=preds, gt_labels=labels)
        assert ev.compute() == {"Accuracy": expected["results"]["Accuracy"]}


def test_to_json_and_table_match_the_cli_format(tmp_path):
    ev = tally.Evaluator(str(EXAMPLES / "classification.yaml"))
    ev.add(
        pred_scores=np.load(EXAMPLES / "data" / "preds.npy"),
        gt_labels=np.load(EXAMPLES / "data" / "labels.npy"),
    )
    results = ev.compute()
    doc = json.loads(ev.to_json())
    assert doc["results"] == results
    assert doc["run"]["backend"] == "nondist" and doc["run"]["world_size"] == 1
    assert "top1" in ev.table() and "897 samples" in ev.table()


def test_plugins_lists_what_the_cli_lists():
    got = tally.plugins()
    expected = json.loads(tally.cli_path() and __import__("conftest").cli("plugins", "--json").stdout)
    assert got == expected
    names = {(c["kind"], c["name"]) for c in got}
    assert ("metric", "Accuracy") in names and ("backend", "mpi") in names


def test_console_script_runs_the_bundled_cli():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "tally", "plugins"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "Accuracy" in p.stdout


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_text_fields_from_python_strings_equal_the_cli(batch, tmp_path):
    """configs/examples/text.yaml through add(): strings (one per sample) and lists of strings
    (references) from Python, against the CLI reading the same JSON lines."""
    config = EXAMPLES / "text.yaml"
    expected = cli_results(config, tmp_path)["results"]
    rows = [json.loads(line) for line in (EXAMPLES / "data" / "text" / "translations.jsonl").read_text().splitlines() if line.strip()]
    ev = tally.Evaluator(str(config))
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        ev.add(
            pred=[r["hypothesis"] for r in part],
            refs=[list(r["references"]) for r in part],
            gt=[r["reference"] for r in part],
            ocr_pred=[r["ocr"]["pred"] for r in part],
            ocr_gt=[r["ocr"]["gt"] for r in part],
        )
    same(ev.compute(), expected)


@pytest.mark.parametrize("batch", [1, 16])
def test_ragged_fields_from_python_arrays_equal_the_cli(batch, tmp_path):
    """configs/examples/detection_voc.yaml through add(): one array of boxes (and scores and
    labels) per image, as lists of NumPy arrays, against the CLI's jsonl reader."""
    config = EXAMPLES / "detection_voc.yaml"
    expected = cli_results(config, tmp_path)["results"]
    path = EXAMPLES / "data" / "detection" / "boxes_val2014_40.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ev = tally.Evaluator(str(config))
    for i in range(0, len(rows), batch):
        part = rows[i : i + batch]
        ev.add(
            pred_bboxes=[np.asarray(r["pred_bboxes"], dtype=np.float64).reshape(-1, 4) for r in part],
            pred_scores=[np.asarray(r["pred_scores"], dtype=np.float64) for r in part],
            pred_labels=[np.asarray(r["pred_labels"], dtype=np.int64) for r in part],
            gt_bboxes=[np.asarray(r["gt_bboxes"], dtype=np.float64).reshape(-1, 4) for r in part],
            gt_labels=[np.asarray(r["gt_labels"], dtype=np.int64) for r in part],
        )
    same(ev.compute(), expected)


def test_run_writes_the_reports_and_raises_on_a_regression(tmp_path):
    """tally.run() with output: and regression: sections does what `tally run` does: every report
    written, and a regression against the baseline raised as RegressionError (exit code 3)."""
    data = EXAMPLES / "data"
    baseline = tmp_path / "baseline.json"
    # A baseline the results fall below: top1 of 0.95 against the real 0.9275.
    cli_doc = cli_results(EXAMPLES / "classification.yaml", tmp_path)
    cli_doc["results"]["Accuracy"]["top1"] = 0.95
    baseline.write_text(json.dumps(cli_doc))
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(
        json.dumps(
            {
                "data": {"type": "npy", "fields": {"pred_scores": str(data / "preds.npy"), "gt_labels": str(data / "labels.npy")}},
                "metrics": [{"type": "Accuracy", "topk": [1, 3]}],
                "regression": {"baseline": "baseline.json", "atol": 0.001},
                "output": {
                    "json": str(tmp_path / "out" / "results.json"),
                    "junit": str(tmp_path / "out" / "junit.xml"),
                    "markdown": str(tmp_path / "out" / "summary.md"),
                    "html": str(tmp_path / "out" / "report.html"),
                },
            }
        )
    )
    (tmp_path / "out").mkdir()
    with pytest.raises(tally.RegressionError) as e:
        tally.run(str(cfg))
    assert e.value.exit_code == 3 and "Accuracy.top1" in str(e.value)
    assert e.value.results["Accuracy"]["top1"] == pytest.approx(0.927536231884058, rel=1e-15)
    for name in ("results.json", "junit.xml", "summary.md", "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 0, name
    assert "<failure" in (tmp_path / "out" / "junit.xml").read_text()
    # The CLI agrees: exit 3.
    from conftest import cli

    assert cli("run", cfg, "-q", check=False).returncode == 3
    # Within the tolerance: no error.
    cli_doc["results"]["Accuracy"]["top1"] = 0.9280
    baseline.write_text(json.dumps(cli_doc))
    assert tally.run(str(cfg))["Accuracy"]["top1"] == pytest.approx(0.927536231884058, rel=1e-15)


def test_validate_is_the_cli_validate(tmp_path):
    config = EXAMPLES / "classification.yaml"
    assert set(tally.validate(str(config))) == {"pred_scores", "gt_labels"}
    assert tally.validate({"metrics": [{"type": "Accuracy"}]}) == []
    with pytest.raises(tally.ConfigError, match="topk"):
        tally.validate(str(config), {"metrics.0.topk": "x"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: {type: npy, fields: {pred_scores: missing.npy}}\nmetrics: [{type: Accuracy}]\n")
    from conftest import cli

    p = cli("validate", bad, check=False)
    assert p.returncode == 2
    with pytest.raises(tally.TallyError) as e:
        tally.validate(str(bad))
    assert str(e.value) in p.stderr


def test_run_checkpoints_and_resumes(tmp_path, capfd):
    data = EXAMPLES / "data"
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(
        json.dumps(
            {
                "data": {
                    "type": "npy",
                    "batch_size": 100,
                    "fields": {"pred_scores": str(data / "preds.npy"), "gt_labels": str(data / "labels.npy")},
                },
                "metrics": [{"type": "Accuracy", "topk": [1, 3]}, {"type": "ConfusionMatrix", "num_classes": 10}],
                "checkpoint": {"dir": "ckpt", "every_n_batches": 2},
            }
        )
    )
    first = tally.run(str(cfg))
    assert any((tmp_path / "ckpt").glob("step-*/metadata.json"))
    again = tally.run(str(cfg), resume=True)
    assert again == first
    assert "resum" in capfd.readouterr().err
    with pytest.raises(tally.ConfigError, match="checkpoint"):
        tally.run(str(EXAMPLES / "classification.yaml"), resume=True)


def test_records_intervals_and_the_paired_gate_as_the_cli(tmp_path):
    """output.records, intervals: and regression.baseline_records through tally.run() and the
    Evaluator, as `tally run` does them (docs/significance.md): the records file is the CLI's byte
    for byte, the intervals are the results JSON's, and the README's gate example (docs/ci/gate.yaml)
    passes the noise candidate and raises RegressionError on the regressed one."""
    digits = EXAMPLES / "data"
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(
        "data:\n  type: npy\n  fields:\n"
        f"    pred_scores: {digits / 'preds.npy'}\n    gt_labels: {digits / 'labels.npy'}\n"
        "metrics:\n  - type: Accuracy\n    topk: [1, 3]\n"
        "output:\n  records: py.rec\n"
        "intervals: {confidence: 0.9, resamples: 200, seed: 3}\n"
    )
    ev = tally.Evaluator(str(cfg), {"output.records": str(tmp_path / "py.rec")})
    ev.run(output=str(tmp_path / "py.json"))
    iv = ev.intervals
    assert iv["settings"] == {"confidence": 0.9, "method": "percentile", "resamples": 200, "seed": 3}
    top1 = iv["metrics"]["Accuracy"]["top1"]
    assert top1["low"] < 0.927536231884058 < top1["high"]
    assert json.loads((tmp_path / "py.json").read_text())["intervals"] == iv
    cli_results(cfg, tmp_path, f"output.records={tmp_path / 'cli.rec'}")
    assert (tmp_path / "py.rec").read_bytes() == (tmp_path / "cli.rec").read_bytes()

    gate = ROOT / "docs" / "ci" / "gate.yaml"
    cand = EXAMPLES / "data" / "gate"
    fast = {"regression.resamples": 200}
    tally.run(str(gate), {**fast, "data.fields.pred_scores": str(cand / "noise.npy")})
    with pytest.raises(tally.RegressionError) as e:
        tally.run(str(gate), {**fast, "data.fields.pred_scores": str(cand / "regressed.npy")})
    assert "McNemar exact: 29 worse, 10 better of 897" in e.value.comparison

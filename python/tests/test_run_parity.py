"""`tally run` and tally.run() are one engine function (tally/reports/run.hpp, engine/reports/run.cpp): a
matrix of options through the command and through Python must write the same files byte for byte,
end with the same exit code (Python: the exception that code means) and print the same messages.

Each case runs in a folder of its own (the config, its baseline, history and checkpoints): once
with the command, then, from the same starting files, with Python, so that every path inside the
files is the same. Normalized, because they differ from run to run whatever runs them: the wall
time (results JSON "wall_seconds", the reports' "N.NNN s" and JUnit's time="N.NNN") and the UTC
time a report was written (JUnit's timestamp, the HTML's "written ... UTC"). Nothing else.
"""

import json
import os
import re
import shutil
import subprocess

import pytest

import tally
from conftest import EXAMPLES, ROOT

DATA = EXAMPLES / "data"
GATE = ROOT / "docs" / "ci" / "gate"

RUN_SPECIFIC = [
    (re.compile(rb'"wall_seconds": ?[0-9.eE+-]+'), b'"wall_seconds": WALL'),
    (re.compile(rb"\d+\.\d{3} s \xc2\xb7"), b"WALL s \xc2\xb7"),
    (re.compile(rb'time="[0-9.]+"'), b'time="WALL"'),
    (re.compile(rb", \d+\.\d{3} s\n"), b", WALL s\n"),
    (re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"), b"UTC-TIME"),
]


def normalized(data: bytes) -> bytes:
    for pattern, replacement in RUN_SPECIFIC:
        data = pattern.sub(replacement, data)
    return data


def config_text(extra="", fields=None, batch=None):
    fields = fields or {"pred_scores": DATA / "preds.npy", "gt_labels": DATA / "labels.npy"}
    text = "data:\n  type: npy\n"
    if batch:
        text += f"  batch_size: {batch}\n"
    text += "  fields:\n" + "".join(f"    {k}: {v}\n" for k, v in fields.items())
    text += "metrics:\n  - type: Accuracy\n    topk: [1, 3]\n  - type: SingleLabelMetric\n"
    text += "    name: prf_macro\nbackend: {type: nondist}\n"
    return text + extra


def true_results():
    """The results of these metrics on the digits predictions (the README gate's baseline, written
    by `tally run docs/ci/gate.yaml --update-baseline`): a baseline that passes."""
    return json.loads((GATE / "baseline.json").read_text())


def write_json(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))


def shifted(doc, top1):
    doc = json.loads(json.dumps(doc))
    doc["results"]["Accuracy"]["top1"] = top1
    return doc


# ---- the cases: (setup(folder), the command's arguments, Python's keyword arguments, env) ---------


def plain(w):
    (w / "eval.yaml").write_text(config_text())


def outputs_in_config(w):
    (w / "out").mkdir()
    (w / "eval.yaml").write_text(
        config_text("output:\n  json: out/config.json\n  records: out/r.rec\n")
    )


def with_baseline(top1, extra=""):
    def setup(w):
        base = true_results()
        write_json(w / "base.json", shifted(base, top1) if top1 is not None else base)
        (w / "out").mkdir()
        (w / "eval.yaml").write_text(
            config_text(
                "regression:\n  baseline: base.json\n  atol: 0.001\n" + extra
                + "output:\n  json: out/r.json\n  junit: out/j.xml\n  markdown: out/s.md\n"
            )
        )

    return setup


def gate(candidate):
    def setup(w):
        shutil.copytree(GATE, w / "gate")
        fields = {"pred_scores": DATA / "gate" / candidate, "gt_labels": DATA / "labels.npy"}
        (w / "eval.yaml").write_text(
            config_text(
                "regression:\n  baseline: gate/baseline.json\n  baseline_records: gate/baseline.rec\n"
                "  atol: 0.0005\n  resamples: 200\n",
                fields,
            )
        )

    return setup


def update_baseline(w):
    (w / "eval.yaml").write_text(
        config_text(
            "output:\n  records: r.rec\n"
            "regression:\n  baseline: new/base.json\n  baseline_records: new/base.rec\n"
        )
    )
    (w / "new").mkdir()


def history(fail_on_drift):
    def setup(w):
        base = true_results()
        top1 = base["results"]["Accuracy"]["top1"]
        # Ten earlier runs falling steadily to this one: a drift beyond the tolerance.
        for i in range(10):
            write_json(w / "runs" / f"run-{i}.json", shifted(base, top1 + 0.003 * (10 - i)))
        write_json(w / "base.json", base)
        (w / "out").mkdir()
        (w / "eval.yaml").write_text(
            config_text(
                "regression:\n  baseline: base.json\n  atol: 0.001\n  history: runs\n"
                f"  fail_on_drift: {'true' if fail_on_drift else 'false'}\n"
                "output:\n  markdown: out/s.md\n  html: out/r.html\n"
            )
        )

    return setup


def checkpointed(written_before):
    def setup(w):
        (w / "eval.yaml").write_text(
            config_text("checkpoint: {dir: ckpt, every_n_batches: 2}\n", batch=100)
        )
        if written_before:
            # The command's own first run; without its last checkpoint, the one before is the
            # last complete one: a run stopped there, 800 of the 897 samples read.
            p = subprocess.run([tally.cli_path(), "run", "eval.yaml", "-q"], cwd=w, capture_output=True)
            assert p.returncode == 0, p.stderr
            steps = sorted((w / "ckpt").glob("step-*"))
            assert len(steps) >= 2, steps
            shutil.rmtree(steps[-1])

    return setup


def bad_config(w):
    (w / "eval.yaml").write_text(config_text().replace("topk: [1, 3]", "topk: three"))


def missing_baseline(w):
    (w / "eval.yaml").write_text(config_text("regression:\n  baseline: nowhere.json\n"))


CASES = {
    "plain run (tables printed)": (plain, [], {"quiet": False}, {}),
    "--output": (plain, ["--output", "r.json", "-q"], {"output": "r.json"}, {}),
    "--junit --markdown --html": (
        plain,
        ["-q", "--junit", "j.xml", "--markdown", "s.md", "--html", "r.html"],
        {"junit": "j.xml", "markdown": "s.md", "html": "r.html"},
        {},
    ),
    "output: section with records, --output over it": (
        outputs_in_config,
        ["-q", "--output", "out/cli.json"],
        {"output": "out/cli.json"},
        {},
    ),
    "regression that passes": (with_baseline(None), [], {"quiet": False}, {}),
    "regression that fails (exit 3)": (with_baseline(0.95), ["-q"], {}, {}),
    "paired gate, within noise": (gate("noise.npy"), [], {"quiet": False}, {}),
    "paired gate, regressed (exit 3)": (gate("regressed.npy"), ["-q"], {}, {}),
    "--update-baseline with records": (
        update_baseline,
        ["-q", "--update-baseline"],
        {"update_baseline": True},
        {},
    ),
    "--update-baseline without regression: (exit 2)": (
        plain,
        ["-q", "--update-baseline"],
        {"update_baseline": True},
        {},
    ),
    "history with a drift": (history(False), [], {"quiet": False}, {}),
    "history with a drift and fail_on_drift (exit 3)": (history(True), ["-q"], {}, {}),
    "--resume from a checkpoint": (checkpointed(True), ["-q", "--resume"], {"resume": True}, {}),
    "--resume with no checkpoint yet": (
        checkpointed(False),
        ["-q", "--resume"],
        {"resume": True},
        {},
    ),
    "--resume without a checkpoint: section (exit 2)": (
        plain,
        ["-q", "--resume"],
        {"resume": True},
        {},
    ),
    "bad config (exit 2)": (bad_config, ["-q"], {}, {}),
    "missing baseline (exit 2)": (missing_baseline, ["-q"], {}, {}),
    "launcher of 2 ranks, backend nondist (exit 2)": (
        plain,
        ["-q", "--output", "r.json"],
        {"output": "r.json"},
        {"RANK": "0", "WORLD_SIZE": "2"},
    ),
}


def files_of(folder):
    return {
        str(p.relative_to(folder)): normalized(p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run_python(entry, kwargs):
    if entry == "tally.run":
        return tally.run("eval.yaml", **kwargs)
    return tally.Evaluator("eval.yaml").run(**kwargs)


@pytest.mark.parametrize("entry", ["tally.run", "Evaluator.run"])
@pytest.mark.parametrize("case", list(CASES))
def test_run_parity(case, entry, tmp_path, monkeypatch, capfd):
    setup, args, kwargs, env = CASES[case]
    start = tmp_path / "start"
    start.mkdir()
    setup(start)
    work = tmp_path / "work"

    # The command.
    shutil.copytree(start, work)
    child_env = {**os.environ, **env}
    cli = subprocess.run(
        [tally.cli_path(), "run", "eval.yaml", *args], cwd=work, env=child_env, capture_output=True
    )
    cli_files = files_of(work)
    shutil.rmtree(work)

    # Python, from the same files.
    shutil.copytree(start, work)
    monkeypatch.chdir(work)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    capfd.readouterr()
    error = None
    try:
        got = run_python(entry, kwargs)
    except tally.TallyError as e:
        error = e
        got = getattr(e, "results", None)
    py = capfd.readouterr()
    py_files = files_of(work)

    # The same exit code (the exception it means), the same messages, the same files.
    assert cli.returncode == (error.exit_code if error else 0), (cli.stderr, error)
    if cli.returncode == 3:
        assert type(error) is tally.RegressionError
        # The line the command prints is the exception's message, and Python prints it too.
        assert f"tally: {error}\n".encode() in cli.stderr
        expected_err = cli.stderr
    elif error is not None:
        assert type(error) in (tally.ConfigError, tally.InputError)
        expected_err = cli.stderr.replace(f"tally: error: {error}\n".encode(), b"")
        assert expected_err != cli.stderr, (cli.stderr, str(error))
    else:
        expected_err = cli.stderr
    assert py.err.encode() == expected_err
    assert normalized(py.out.encode()) == normalized(cli.stdout)
    assert py_files.keys() == cli_files.keys()
    for name in cli_files:
        assert py_files[name] == cli_files[name], name
    # And Python returns (or, on a regression, carries) the results the files hold.
    for name in ("r.json", "out/cli.json"):
        if name in cli_files and got is not None:
            assert json.loads(cli_files[name].replace(b"WALL", b"0"))["results"] == got

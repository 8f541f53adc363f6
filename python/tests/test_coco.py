"""tally.coco: pycocotools' COCO / COCOeval API over tally's engine.

Expected values: tests/reference/expected_coco_api.json, written by tests/reference/coco_api.py
with pycocotools 2.0.11's own COCOeval (evaluate, accumulate, summarize) on the repository's COCO
data (the real val2014 fixture and the synthetic detection data) with several params: its stats
(compared to 1e-12) and a digest of eval['precision'], ['recall'] and ['scores'] (the number of
-1 entries and 64 sampled values exactly, the sum of the others to 1e-12). Where pycocotools is
installed the whole arrays are compared too.
"""

import contextlib
import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, have
import tally
from tally.coco import COCO, COCOeval

EXPECTED = json.loads((ROOT / "tests/reference/expected_coco_api.json").read_text())
CASES = EXPECTED["cases"]
WHOLE = [c for c in CASES if c["name"] in ("val2014_bbox", "val2014_segm", "val2014_bbox_rec_thrs")]


def run(case, coco=COCO, cocoeval=COCOeval):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        gt = coco(str(ROOT / case["gt"]))
        dt = gt.loadRes(str(ROOT / case["dt"]))
        ev = cocoeval(gt, dt, case["iouType"])
        for k, v in case["params"].items():
            if k == "imgIds" and v == "first_half":
                ids = sorted(gt.getImgIds())
                v = ids[: len(ids) // 2]
            setattr(ev.params, k, np.array(v) if k in ("iouThrs", "recThrs") else v)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev, out.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cocoeval_equals_pycocotools(case):
    ev, printed = run(case)
    np.testing.assert_allclose(ev.stats, case["stats"], rtol=1e-12, atol=1e-15)
    assert list(ev.eval["counts"]) == case["counts"]
    for name, d in case["digest"].items():
        flat = ev.eval[name].ravel()
        assert int(np.sum(flat == -1)) == d["minus_one"], name
        assert math.fsum(flat[flat != -1].tolist()) == pytest.approx(d["fsum"], rel=1e-12), name
        assert [float(flat[i]) for i in d["indices"]] == d["values"], name
    # pycocotools' table: one line a stat, its format.
    lines = [line for line in printed.splitlines() if line.startswith(" Average")]
    assert len(lines) == len(case["stats"])
    assert lines[0].startswith(" Average Precision  (AP) @[ IoU=")
    assert lines[0].endswith(f"= {case['stats'][0]:0.3f}")


@pytest.mark.skipif(not have("pycocotools"), reason="pycocotools is not installed in this venv "
                    "(tests/reference/setup_venv.sh makes .venv-ref with pycocotools 2.0.11)")
@pytest.mark.parametrize("case", WHOLE, ids=[c["name"] for c in WHOLE])
def test_whole_arrays_equal_pycocotools(case):
    from pycocotools.coco import COCO as PC
    from pycocotools.cocoeval import COCOeval as PE

    ours, _ = run(case)
    theirs, _ = run(case, PC, PE)
    for name in ("precision", "recall", "scores"):
        np.testing.assert_array_equal(ours.eval[name], theirs.eval[name])


def test_the_index_is_pycocotools():
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ROOT / CASES[0]["gt"]))
    data = json.loads((ROOT / CASES[0]["gt"]).read_text())
    cars = [c["id"] for c in data["categories"] if c["name"] == "car"]
    assert gt.getCatIds(catNms=["car"]) == cars
    with_cars = {a["image_id"] for a in data["annotations"] if a["category_id"] in cars}
    assert sorted(gt.getImgIds(catIds=cars)) == sorted(with_cars)
    img = sorted(with_cars)[0]
    want = [a["id"] for a in data["annotations"] if a["image_id"] == img and a["iscrowd"] == 0]
    assert gt.getAnnIds(imgIds=[img], iscrowd=False) == want
    assert gt.loadImgs(img)[0]["id"] == img
    with pytest.raises(ValueError, match="do not correspond"):
        with contextlib.redirect_stdout(io.StringIO()):
            gt.loadRes([{"image_id": -5, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 1.0}])


def test_a_results_file_is_indexed_when_first_used_and_checked_by_the_engine(tmp_path):
    """loadRes(file) hands the file to the engine as it is; its Python index (pycocotools'
    loadRes) is made when first used, with pycocotools' checks; a result of an unknown image is
    the engine's InputError naming the file, the entry and the id."""
    import tally

    case = CASES[0]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ROOT / case["gt"]))
        dt = gt.loadRes(str(ROOT / case["dt"]))
        assert "anns" not in dt.__dict__
        results = json.loads((ROOT / case["dt"]).read_text())
        assert len(dt.anns) == len(results) and dt.loadAnns(1)[0]["image_id"] == results[0]["image_id"]
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps([{"image_id": 999999, "category_id": 1, "bbox": [0, 0, 1, 1],
                                    "score": 1.0}]))
        ev = COCOeval(gt, gt.loadRes(str(bad)), "bbox")
        with pytest.raises(tally.InputError, match="entry 0: image_id 999999 is not in the annotations"):
            ev.evaluate()


def test_results_given_as_a_list_equal_the_file(tmp_path):
    case = CASES[0]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ROOT / case["gt"]))
        dt = gt.loadRes(json.loads((ROOT / case["dt"]).read_text()))
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    np.testing.assert_allclose(ev.stats, case["stats"], rtol=1e-12)


def test_init_as_pycocotools_runs_pycocotools_code_unchanged(tmp_path):
    case = CASES[1]
    code = (
        "import tally.coco; tally.coco.init_as_pycocotools()\n"
        "from pycocotools.coco import COCO\n"
        "from pycocotools.cocoeval import COCOeval\n"
        f"gt = COCO({str(ROOT / case['gt'])!r})\n"
        f"dt = gt.loadRes({str(ROOT / case['dt'])!r})\n"
        "ev = COCOeval(gt, dt, 'segm')\n"
        "ev.evaluate(); ev.accumulate(); ev.summarize()\n"
        "print(repr(list(map(float, ev.stats))))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    stats = eval(p.stdout.strip().splitlines()[-1])  # noqa: S307 - our own child's repr
    np.testing.assert_allclose(stats, case["stats"], rtol=1e-12)


def test_bad_params_are_clear_errors():
    case = CASES[0]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ROOT / case["gt"]))
        dt = gt.loadRes(str(ROOT / case["dt"]))
    ev = COCOeval(gt, dt, "bbox")
    ev.params.recThrs = np.array([0.5, 1.5])
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(tally.ConfigError, match="rec_thrs"):
        ev.evaluate()
    with pytest.raises(ValueError, match="iouType"):
        COCOeval(gt, dt, "boxes")


@pytest.mark.parametrize("world", [2, 3])
def test_cocoeval_under_mpirun_gives_pycocotools_stats_on_every_rank(world, tmp_path):
    """Under mpirun each rank's COCOeval (backend auto -> mpi) reads its block of images; every
    rank's stats and arrays are pycocotools' (the single-process ones, bit for bit)."""
    from conftest import child_env, mpirun

    case = CASES[1]  # val2014 segm
    script = tmp_path / "rank.py"
    script.write_text(
        "import contextlib, io, json, os, sys\n"
        "from tally.coco import COCO, COCOeval\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    gt = COCO({str(ROOT / case['gt'])!r})\n"
        f"    dt = gt.loadRes({str(ROOT / case['dt'])!r})\n"
        "    ev = COCOeval(gt, dt, 'segm')\n"
        "    ev.evaluate(); ev.accumulate(); ev.summarize()\n"
        "rank = os.environ['OMPI_COMM_WORLD_RANK']\n"
        "out = {'stats': list(map(float, ev.stats)), 'psum': float(ev.eval['precision'].sum())}\n"
        "open(os.path.join(sys.argv[1], f'rank{rank}.json'), 'w').write(json.dumps(out))\n"
    )
    p = subprocess.run(mpirun() + ["-np", str(world), sys.executable, str(script), str(tmp_path)],
                       env=child_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    one, _ = run(case)
    for r in range(world):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert got["stats"] == list(map(float, one.stats)), f"rank {r}"
        assert got["psum"] == float(one.eval["precision"].sum()), f"rank {r}"


def test_a_ground_truth_changed_and_reindexed_in_memory_is_what_is_evaluated(tmp_path):
    """As with pycocotools, whose COCOeval reads the index: after dataset is changed and
    createIndex() called, the evaluation is that of the changed ground truth (here written to a
    file and evaluated from there), not of the file it was loaded from."""
    case = CASES[0]

    def stats(gt):
        with contextlib.redirect_stdout(io.StringIO()):
            ev = COCOeval(gt, gt.loadRes(str(ROOT / case["dt"])), "bbox")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        return list(ev.stats)

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(ROOT / case["gt"]))
        gt.dataset["annotations"] = [a for a in gt.dataset["annotations"] if a["category_id"] != 1]
        gt.createIndex()
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(gt.dataset))
    with contextlib.redirect_stdout(io.StringIO()):
        from_file = COCO(str(changed))
    assert stats(gt) == stats(from_file) != case["stats"]

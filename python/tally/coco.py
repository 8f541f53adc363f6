"""pycocotools' API over tally's COCO evaluation: ``COCO``, ``COCO.loadRes``, ``COCOeval``.

    from tally.coco import COCO, COCOeval      # instead of pycocotools.coco / .cocoeval

    gt = COCO("instances_val2017.json")
    dt = gt.loadRes("detections.json")
    ev = COCOeval(gt, dt, "bbox")
    ev.params.catIds = [1, 3]                   # any of pycocotools' params
    ev.evaluate(); ev.accumulate(); ev.summarize()   # prints pycocotools' table
    ev.stats                                    # the 12 numbers, as pycocotools gives them
    ev.eval["precision"]                        # [T, R, K, A, M], equal to pycocotools'

or, for code that imports pycocotools itself::

    import tally.coco
    tally.coco.init_as_pycocotools()            # pycocotools.coco, pycocotools.cocoeval -> tally

``evaluate()`` runs tally's engine once: the coco_json reader (C++, simdjson) reads the ground
truth and the results, and the COCODetection plugin matches, accumulates and summarizes them, as
pycocotools 2.0.11's COCOeval does, bit for bit (docs/coco.md). ``accumulate()`` takes its arrays
(``eval_arrays``), and ``summarize()`` prints pycocotools' table from them with pycocotools'
means. Under mpirun or torchrun (backend ``auto``) each rank reads its block of images and every
rank gets the same numbers. The COCO index (``getAnnIds``, ``loadAnns``, ...) is pycocotools'
Python. Not there: ``evalImgs`` and ``ious`` (the engine keeps per-detection bits, not
pycocotools' per-image dicts) and the mask helpers (``annToRLE``, ``annToMask``).
"""

from __future__ import annotations

import copy as _copy
import datetime as _datetime
import itertools as _itertools
import json as _json
import os as _os
import sys as _sys
import tempfile as _tempfile
import time as _time
from collections import defaultdict as _defaultdict
from typing import Any, Dict, List, Optional, Union

import numpy as _np

__all__ = ["COCO", "COCOeval", "Params", "init_as_pycocotools"]

_DEFAULT_SIGMAS = _np.array(
    [.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87, .89, .89]
) / 10.0


def _ids(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple, _np.ndarray, set)) else [x]


class COCO:
    """pycocotools' ``COCO``: the annotations of a COCO JSON file, indexed.

    >>> gt = COCO()
    >>> gt.dataset = {"images": [{"id": 1, "height": 10, "width": 10}],
    ...               "annotations": [{"id": 1, "image_id": 1, "category_id": 3,
    ...                                "bbox": [0, 0, 4, 4], "area": 16, "iscrowd": 0}],
    ...               "categories": [{"id": 3, "name": "car"}]}
    >>> gt.createIndex()
    creating index...
    index created!
    >>> gt.getAnnIds(imgIds=[1]), gt.getCatIds(catNms=["car"])
    ([1], [3])
    """

    def __init__(self, annotation_file: Optional[Union[str, "_os.PathLike[str]"]] = None) -> None:
        self.dataset: dict = {}
        self.anns: Dict[int, dict] = {}
        self.cats: Dict[int, dict] = {}
        self.imgs: Dict[int, dict] = {}
        self.imgToAnns: Dict[int, list] = _defaultdict(list)
        self.catToImgs: Dict[int, list] = _defaultdict(list)
        self._file: Optional[str] = None  # the file the annotations came from, as they were
        self._results: Optional[list] = None  # loadRes's results, in the file's order
        self._is_results = False  # made by loadRes
        if annotation_file is not None:
            print("loading annotations into memory...")
            tic = _time.time()
            with open(annotation_file, encoding="utf-8") as f:
                dataset = _json.load(f)
            if not isinstance(dataset, dict):
                raise TypeError(
                    f"{annotation_file}: annotation file format {type(dataset).__name__} not "
                    "supported (expected a JSON object with images, annotations, categories)"
                )
            print(f"Done (t={_time.time() - tic:0.2f}s)")
            self.dataset = dataset
            self.createIndex()
            self._file = _os.fspath(annotation_file)

    def createIndex(self) -> None:
        """Builds the indexes (anns, imgs, cats, imgToAnns, catToImgs), as pycocotools. The
        engine then reads ``dataset`` as it is now (written out), no longer the file it came
        from, which may differ from it."""
        self._file = None
        print("creating index...")
        anns, cats, imgs = {}, {}, {}
        img_to_anns, cat_to_imgs = _defaultdict(list), _defaultdict(list)
        for ann in self.dataset.get("annotations", []):
            img_to_anns[ann["image_id"]].append(ann)
            anns[ann["id"]] = ann
        for img in self.dataset.get("images", []):
            imgs[img["id"]] = img
        for cat in self.dataset.get("categories", []):
            cats[cat["id"]] = cat
        if "annotations" in self.dataset and "categories" in self.dataset:
            for ann in self.dataset["annotations"]:
                cat_to_imgs[ann["category_id"]].append(ann["image_id"])
        print("index created!")
        self.anns, self.imgs, self.cats = anns, imgs, cats
        self.imgToAnns, self.catToImgs = img_to_anns, cat_to_imgs

    def info(self) -> None:
        for key, value in self.dataset.get("info", {}).items():
            print(f"{key}: {value}")

    def getAnnIds(self, imgIds: Any = [], catIds: Any = [], areaRng: Any = [],  # noqa: B006
                  iscrowd: Optional[bool] = None) -> List[int]:
        """The ids of the annotations of those images and categories, in that area range."""
        imgIds, catIds = _ids(imgIds), _ids(catIds)
        if len(imgIds) == len(catIds) == len(areaRng) == 0:
            anns = self.dataset.get("annotations", [])
        else:
            if len(imgIds) != 0:
                lists = [self.imgToAnns[i] for i in imgIds if i in self.imgToAnns]
                anns = list(_itertools.chain.from_iterable(lists))
            else:
                anns = self.dataset.get("annotations", [])
            if len(catIds) != 0:
                anns = [a for a in anns if a["category_id"] in catIds]
            if len(areaRng) != 0:
                anns = [a for a in anns if areaRng[0] < a["area"] < areaRng[1]]
        if iscrowd is not None:
            return [a["id"] for a in anns if a["iscrowd"] == iscrowd]
        return [a["id"] for a in anns]

    def getCatIds(self, catNms: Any = [], supNms: Any = [], catIds: Any = []) -> List[int]:  # noqa: B006
        """The ids of the categories of those names, supercategories and ids."""
        catNms, supNms, catIds = _ids(catNms), _ids(supNms), _ids(catIds)
        cats = self.dataset.get("categories", [])
        if len(catNms) != 0:
            cats = [c for c in cats if c["name"] in catNms]
        if len(supNms) != 0:
            cats = [c for c in cats if c["supercategory"] in supNms]
        if len(catIds) != 0:
            cats = [c for c in cats if c["id"] in catIds]
        return [c["id"] for c in cats]

    def getImgIds(self, imgIds: Any = [], catIds: Any = []) -> List[int]:  # noqa: B006
        """The ids of the images of those ids that hold every one of those categories."""
        imgIds, catIds = _ids(imgIds), _ids(catIds)
        if len(imgIds) == len(catIds) == 0:
            return list(self.imgs.keys())
        ids = set(imgIds)
        for i, cat in enumerate(catIds):
            ids = set(self.catToImgs[cat]) if i == 0 and len(ids) == 0 else ids & set(self.catToImgs[cat])
        return list(ids)

    def loadAnns(self, ids: Any = []) -> List[dict]:  # noqa: B006
        return [self.anns[i] for i in _ids(ids)]

    def loadCats(self, ids: Any = []) -> List[dict]:  # noqa: B006
        return [self.cats[i] for i in _ids(ids)]

    def loadImgs(self, ids: Any = []) -> List[dict]:  # noqa: B006
        return [self.imgs[i] for i in _ids(ids)]

    _LAZY = ("dataset", "anns", "cats", "imgs", "imgToAnns", "catToImgs")

    def __getattr__(self, name: str) -> Any:
        # A results file of loadRes is indexed in Python only when its index is first used:
        # COCOeval hands the file to the engine as it is.
        pending = self.__dict__.get("_pending")
        if name in COCO._LAZY and pending is not None:
            del self.__dict__["_pending"]
            try:
                pending()
            except BaseException:
                self.__dict__["_pending"] = pending  # the next access says it again
                raise
            return getattr(self, name)
        raise AttributeError(f"'COCO' object has no attribute '{name}'")

    def loadRes(self, resFile: Any) -> "COCO":
        """The results (a results JSON file, a list of result dicts, or pycocotools' [N, 7]
        array) as a COCO object over this one's images, as pycocotools. A file is read by the
        engine when evaluated, and here only when the returned object's index is first used."""
        print("Loading and preparing results...")
        if isinstance(resFile, (str, _os.PathLike)):
            res = COCO()
            res._file = _os.fspath(resFile)
            res._is_results = True
            for name in COCO._LAZY:
                del res.__dict__[name]

            def load() -> None:
                with open(res._file, encoding="utf-8") as f:
                    anns = _json.load(f)
                res.__dict__.update(self._results_index(anns).__dict__)
                res._file = _os.fspath(resFile)

            res._pending = load
            print("DONE (the file is read when evaluated)")
            return res
        anns = self.loadNumpyAnnotations(resFile) if isinstance(resFile, _np.ndarray) else resFile
        return self._results_index(anns)

    def _results_index(self, anns: Any) -> "COCO":
        """pycocotools' loadRes of results already in memory."""
        res = COCO()
        res.dataset["images"] = list(self.dataset.get("images", []))
        tic = _time.time()
        if not isinstance(anns, list):
            raise TypeError("results in not an array of objects")
        ann_img_ids = [a["image_id"] for a in anns]
        if set(ann_img_ids) != (set(ann_img_ids) & set(self.getImgIds())):
            raise ValueError("Results do not correspond to current coco set")
        res._results = anns
        res._is_results = True
        res.dataset["categories"] = _copy.deepcopy(self.dataset.get("categories", []))
        prepared = []
        for i, a in enumerate(anns):
            a = dict(a)
            a["id"] = i + 1
            if "bbox" in a and a["bbox"] and "segmentation" not in a:
                x, y, w, h = a["bbox"]
                a["area"] = w * h
                if "keypoints" not in a:
                    a["segmentation"] = [[x, y, x, y + h, x + w, y + h, x + w, y]]
            a.setdefault("iscrowd", 0)
            prepared.append(a)
        res.dataset["annotations"] = prepared
        print(f"DONE (t={_time.time() - tic:0.2f}s)")
        res.createIndex()
        return res

    @staticmethod
    def loadNumpyAnnotations(data: Any) -> List[dict]:
        """pycocotools' [N, 7] array (image_id, x, y, w, h, score, category_id) as results."""
        data = _np.asarray(data)
        if data.ndim != 2 or data.shape[1] != 7:
            raise ValueError(f"loadNumpyAnnotations: expected an [N, 7] array, found {data.shape}")
        return [{"image_id": int(r[0]), "bbox": [float(r[1]), float(r[2]), float(r[3]), float(r[4])],
                 "score": float(r[5]), "category_id": int(r[6])} for r in data]

    # ---- what the engine reads ----------------------------------------------------------------
    def _annotations_file(self, folder: str) -> str:
        if self._file is not None and not self._is_results:
            return self._file
        path = _os.path.join(folder, "annotations.json")
        with open(path, "w", encoding="utf-8") as f:
            _json.dump(self.dataset, f)
        return path

    def _results_file(self, folder: str) -> str:
        if not self._is_results:
            raise ValueError("COCOeval: cocoDt must come from cocoGt.loadRes(...)")
        if self._file is not None:
            return self._file
        path = _os.path.join(folder, "results.json")
        with open(path, "w", encoding="utf-8") as f:
            _json.dump(self._results, f)
        return path


class Params:
    """pycocotools' ``Params(iouType)``: imgIds, catIds, iouThrs, recThrs, maxDets, areaRng,
    areaRngLbl, useCats, kpt_oks_sigmas, with pycocotools' defaults."""

    def __init__(self, iouType: str = "segm") -> None:
        if iouType not in ("segm", "bbox", "keypoints"):
            raise ValueError(f"iouType {iouType!r} not supported (segm, bbox, keypoints)")
        self.imgIds: list = []
        self.catIds: list = []
        self.iouThrs = _np.linspace(.5, 0.95, int(_np.round((0.95 - .5) / .05)) + 1, endpoint=True)
        self.recThrs = _np.linspace(.0, 1.00, int(_np.round((1.00 - .0) / .01)) + 1, endpoint=True)
        if iouType == "keypoints":
            self.maxDets = [20]
            self.areaRng = [[0 ** 2, 1e5 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]]
            self.areaRngLbl = ["all", "medium", "large"]
        else:
            self.maxDets = [1, 10, 100]
            self.areaRng = [[0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2],
                            [96 ** 2, 1e5 ** 2]]
            self.areaRngLbl = ["all", "small", "medium", "large"]
        self.useCats = 1
        self.kpt_oks_sigmas = _DEFAULT_SIGMAS.copy()
        self.iouType = iouType
        self.useSegm = None


class COCOeval:
    """pycocotools' ``COCOeval(cocoGt, cocoDt, iouType)``: ``evaluate()``, ``accumulate()``,
    ``summarize()``, ``stats``, ``eval`` and ``params``, by tally's engine."""

    def __init__(self, cocoGt: Optional[COCO] = None, cocoDt: Optional[COCO] = None,
                 iouType: str = "segm") -> None:
        if not iouType:
            print("iouType not specified. use default iouType segm")
            iouType = "segm"
        self.cocoGt, self.cocoDt = cocoGt, cocoDt
        self.evalImgs: list = []
        self.eval: dict = {}
        self.params = Params(iouType=iouType)
        self._paramsEval: Optional[Params] = None
        self.stats: Any = []
        self.ious: dict = {}
        self._arrays: Optional[dict] = None
        if cocoGt is not None:
            self.params.imgIds = sorted(cocoGt.getImgIds())
            self.params.catIds = sorted(cocoGt.getCatIds())

    def _config(self, folder: str) -> dict:
        p = self.params
        if len(p.areaRng) != len(p.areaRngLbl) or "all" not in p.areaRngLbl:
            raise ValueError("params.areaRng and params.areaRngLbl: one label a range, one 'all'")
        metric = {
            "type": "COCODetection", "metric": [p.iouType], "eval_arrays": True,
            "iou_thrs": [float(t) for t in p.iouThrs], "rec_thrs": [float(r) for r in p.recThrs],
            "max_dets": [int(m) for m in p.maxDets],
            "area_ranges": {lbl: [float(r[0]), float(r[1])] for lbl, r in zip(p.areaRngLbl, p.areaRng)},
            "use_cats": bool(p.useCats),
            "img_ids": sorted(int(i) for i in _np.unique(p.imgIds)),
        }
        if p.useCats:
            metric["cat_ids"] = sorted(int(c) for c in _np.unique(p.catIds))
        if p.iouType == "keypoints":
            metric["kpt_oks_sigmas"] = [float(s) for s in p.kpt_oks_sigmas]
        data = {
            "type": "coco_json", "annotations": self.cocoGt._annotations_file(folder),
            "results": self.cocoDt._results_file(folder),
            "masks": p.iouType == "segm", "keypoints": p.iouType == "keypoints",
        }
        from . import _launcher_world_size

        # Under a launcher every rank reads its block of images (backend auto); alone, no notice.
        alone = _launcher_world_size() == 1
        return {"data": data, "metrics": [metric], "backend": {"type": "nondist" if alone else "auto"}}

    def evaluate(self) -> None:
        """Matches every image's detections with its ground truth and accumulates, in one run of
        tally's engine (the arrays accumulate() returns)."""
        from . import run

        if self.cocoGt is None or self.cocoDt is None:
            raise ValueError("COCOeval.evaluate: needs cocoGt and cocoDt")
        tic = _time.time()
        print("Running per image evaluation...")
        p = self.params
        if p.useSegm is not None:
            p.iouType = "segm" if p.useSegm == 1 else "bbox"
            print(f"useSegm (deprecated) is not None. Running {p.iouType} evaluation")
        p.imgIds = list(_np.unique(p.imgIds))  # as pycocotools' evaluate()
        if p.useCats:
            p.catIds = list(_np.unique(p.catIds))
        p.maxDets = sorted(p.maxDets)
        if len(p.imgIds) == 0:
            raise ValueError("COCOeval.evaluate: params.imgIds is empty")
        print(f"Evaluate annotation type *{p.iouType}*")
        with _tempfile.TemporaryDirectory(prefix="tally-coco-") as folder:
            results = run(self._config(folder))
        keys = results["COCODetection"]
        self._arrays = keys[f"{self.params.iouType}_eval"]
        self._paramsEval = _copy.deepcopy(self.params)
        print(f"DONE (t={_time.time() - tic:0.2f}s).")

    def accumulate(self, p: Optional[Params] = None) -> None:
        """``eval``: precision [T, R, K, A, M], recall [T, K, A, M], scores [T, R, K, A, M] and
        counts, as pycocotools' accumulate() lays them out (-1 where undefined)."""
        print("Accumulating evaluation results...")
        tic = _time.time()
        if self._arrays is None:
            print("Please run evaluate() first")
            return
        a = self._arrays
        T, R, K, A, M = a["shape"]
        self.eval = {
            "params": p or self._paramsEval,
            "counts": [T, R, K, A, M],
            "date": _datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
            "precision": _np.asarray(a["precision"], dtype=float).reshape(T, R, K, A, M),
            "recall": _np.asarray(a["recall"], dtype=float).reshape(T, K, A, M),
            "scores": _np.asarray(a["scores"], dtype=float).reshape(T, R, K, A, M),
        }
        print(f"DONE (t={_time.time() - tic:0.2f}s).")

    def summarize(self) -> None:
        """Prints pycocotools' table and sets ``stats`` (the means of eval's entries > -1)."""
        if not self.eval:
            raise Exception("Please run accumulate() first")
        p = self.params
        if p.iouType in ("segm", "bbox"):
            self.stats = self._summarize_dets()
        else:
            self.stats = self._summarize_kps()

    def _summarize(self, ap: int = 1, iouThr: Optional[float] = None, areaRng: str = "all",
                   maxDets: int = 100) -> float:
        p = self.params
        i_str = " {:<18} {} @[ IoU={:<9} | area={:>6s} | maxDets={:>3d} ] = {:0.3f}"
        title = "Average Precision" if ap == 1 else "Average Recall"
        type_str = "(AP)" if ap == 1 else "(AR)"
        iou = (f"{p.iouThrs[0]:0.2f}:{p.iouThrs[-1]:0.2f}" if iouThr is None else f"{iouThr:0.2f}")
        aind = [i for i, a in enumerate(p.areaRngLbl) if a == areaRng]
        mind = [i for i, m in enumerate(p.maxDets) if m == maxDets]
        s = self.eval["precision"] if ap == 1 else self.eval["recall"]
        if iouThr is not None:
            t = _np.where(iouThr == p.iouThrs)[0]
            s = s[t]
        s = s[:, :, :, aind, mind] if ap == 1 else s[:, :, aind, mind]
        mean_s = -1 if len(s[s > -1]) == 0 else _np.mean(s[s > -1])
        print(i_str.format(title, type_str, iou, areaRng, maxDets, mean_s))
        return mean_s

    def _summarize_dets(self) -> Any:
        m = self.params.maxDets  # pycocotools reads maxDets[0..2] (sorted by evaluate())
        stats = _np.zeros((12,))
        stats[0] = self._summarize(1)  # pycocotools: maxDets 100 whatever params.maxDets holds
        stats[1] = self._summarize(1, iouThr=.5, maxDets=m[2])
        stats[2] = self._summarize(1, iouThr=.75, maxDets=m[2])
        stats[3] = self._summarize(1, areaRng="small", maxDets=m[2])
        stats[4] = self._summarize(1, areaRng="medium", maxDets=m[2])
        stats[5] = self._summarize(1, areaRng="large", maxDets=m[2])
        stats[6] = self._summarize(0, maxDets=m[0])
        stats[7] = self._summarize(0, maxDets=m[1])
        stats[8] = self._summarize(0, maxDets=m[2])
        stats[9] = self._summarize(0, areaRng="small", maxDets=m[2])
        stats[10] = self._summarize(0, areaRng="medium", maxDets=m[2])
        stats[11] = self._summarize(0, areaRng="large", maxDets=m[2])
        return stats

    def _summarize_kps(self) -> Any:
        stats = _np.zeros((10,))
        stats[0] = self._summarize(1, maxDets=20)
        stats[1] = self._summarize(1, maxDets=20, iouThr=.5)
        stats[2] = self._summarize(1, maxDets=20, iouThr=.75)
        stats[3] = self._summarize(1, maxDets=20, areaRng="medium")
        stats[4] = self._summarize(1, maxDets=20, areaRng="large")
        stats[5] = self._summarize(0, maxDets=20)
        stats[6] = self._summarize(0, maxDets=20, iouThr=.5)
        stats[7] = self._summarize(0, maxDets=20, iouThr=.75)
        stats[8] = self._summarize(0, maxDets=20, areaRng="medium")
        stats[9] = self._summarize(0, maxDets=20, areaRng="large")
        return stats

    def __str__(self) -> str:
        self.summarize()
        return ""


def init_as_pycocotools() -> None:
    """Makes ``import pycocotools.coco`` and ``import pycocotools.cocoeval`` give tally's
    ``COCO`` and ``COCOeval`` (as faster-coco-eval's and hotcoco's functions of that name do),
    so code written for pycocotools runs unchanged. Call it before that code imports them."""
    import types

    this = _sys.modules[__name__]
    pkg = types.ModuleType("pycocotools")
    pkg.__path__ = []  # a package
    coco_mod = types.ModuleType("pycocotools.coco")
    coco_mod.COCO = COCO
    eval_mod = types.ModuleType("pycocotools.cocoeval")
    eval_mod.COCOeval = COCOeval
    eval_mod.Params = Params
    pkg.coco, pkg.cocoeval = coco_mod, eval_mod
    pkg.__doc__ = f"tally's pycocotools API ({this.__name__})"
    _sys.modules["pycocotools"] = pkg
    _sys.modules["pycocotools.coco"] = coco_mod
    _sys.modules["pycocotools.cocoeval"] = eval_mod

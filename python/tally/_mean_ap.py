"""torchmetrics' ``MeanAveragePrecision`` over tally's COCODetection plugin (pycocotools' COCOeval,
bit for bit): lists of dicts of boxes, scores, labels (and masks) per image in, torchmetrics'
result dict out. Exported by :mod:`tally.torchmetrics`."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import torchmetrics as _tm

_BOX_FORMATS = ("xyxy", "xywh", "cxcywh")
_STAT_KEYS = ("mAP", "mAP_50", "mAP_75", "mAP_s", "mAP_m", "mAP_l")
_TM_STATS = ("map", "map_50", "map_75", "map_small", "map_medium", "map_large")
_AR_AREAS = (("s", "small"), ("m", "medium"), ("l", "large"))


def _iou_types(iou_type: Any) -> Tuple[str, ...]:
    types = (iou_type,) if isinstance(iou_type, str) else tuple(iou_type)
    if not types or any(t not in ("bbox", "segm") for t in types):
        raise ValueError(f"Expected argument `iou_type` to be one of ('bbox', 'segm') or a tuple of, but got {iou_type}")
    return types


def _to_xywh(boxes: Any, box_format: str) -> Any:
    """torchvision's box_convert(boxes, box_format, 'xywh'), in the boxes' own dtype and library
    (cxcywh goes through xyxy, as there), so the values are torchmetrics' to the last bit."""
    if box_format == "xywh" or boxes.shape[0] == 0:
        return boxes
    a, b, c, d = (boxes[:, i] for i in range(4))
    if box_format == "cxcywh":
        a, b, c, d = a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d
    torch = _tm._torch()
    if torch is not None and isinstance(boxes, torch.Tensor):
        return torch.stack((a, b, c - a, d - b), dim=-1)
    import numpy as np

    return np.stack((a, b, c - a, d - b), axis=-1)


def _as_array(v: Any, dtype: str) -> Any:
    if hasattr(v, "shape"):
        return v
    import numpy as np

    return np.asarray(v, dtype=dtype)


class MeanAveragePrecision(_tm.Metric):
    """torchmetrics' ``MeanAveragePrecision`` (``torchmetrics.detection``): COCO mAP / mAR of boxes
    (``iou_type="bbox"``) or masks (``"segm"``), computed by tally's COCODetection plugin exactly
    as pycocotools' COCOeval (which torchmetrics calls), synced across ranks by tally's backend.

    >>> import numpy as np
    >>> from tally.torchmetrics import MeanAveragePrecision
    >>> preds = [dict(boxes=np.array([[258.0, 41.0, 606.0, 285.0]], np.float32),
    ...               scores=np.array([0.536], np.float32), labels=np.array([0]))]
    >>> target = [dict(boxes=np.array([[214.0, 41.0, 562.0, 285.0]], np.float32),
    ...                labels=np.array([0]))]
    >>> metric = MeanAveragePrecision(iou_type="bbox")
    >>> metric.update(preds, target)
    >>> round(float(metric.compute()["map"]), 4)
    0.6

    ``backend`` is accepted for torchmetrics' signature: tally's engine computes either way. With
    ``extended_summary`` the result has ``precision``, ``recall`` and ``scores`` (pycocotools'
    eval arrays over every class seen); torchmetrics' ``ious`` (per image and class) is not
    returned.
    """

    higher_is_better = True
    full_state_update = True

    def __init__(
        self,
        box_format: str = "xyxy",
        iou_type: Union[str, Tuple[str, ...]] = "bbox",
        iou_thresholds: Optional[List[float]] = None,
        rec_thresholds: Optional[List[float]] = None,
        max_detection_thresholds: Optional[List[int]] = None,
        class_metrics: bool = False,
        extended_summary: bool = False,
        average: str = "macro",
        backend: str = "pycocotools",
        **kwargs: Any,
    ) -> None:
        if box_format not in _BOX_FORMATS:
            raise ValueError(f"Expected argument `box_format` to be one of {_BOX_FORMATS} but got {box_format}")
        types = _iou_types(iou_type)
        for name, v in (("iou_thresholds", iou_thresholds), ("rec_thresholds", rec_thresholds)):
            if v is not None and not isinstance(v, list):
                raise ValueError(f"Expected argument `{name}` to either be `None` or a list of floats but got {v}")
        if max_detection_thresholds is not None and (
            not isinstance(max_detection_thresholds, list) or len(max_detection_thresholds) != 3
        ):
            raise ValueError("When providing a list of max detection thresholds it should have length 3."
                             f" Got value {max_detection_thresholds}")
        for name, v in (("class_metrics", class_metrics), ("extended_summary", extended_summary)):
            if not isinstance(v, bool):
                raise ValueError(f"Expected argument `{name}` to be a boolean")
        if average not in ("macro", "micro"):
            raise ValueError(f"Expected argument `average` to be one of ('macro', 'micro') but got {average}")
        if backend not in ("pycocotools", "faster_coco_eval"):
            raise ValueError(f"Expected argument `backend` to be one of ('pycocotools', 'faster_coco_eval') but got {backend}")
        unknown = set(kwargs) - set(_tm._METRIC_KWARGS)
        if unknown:
            raise ValueError(f"MeanAveragePrecision: unexpected keyword argument '{sorted(unknown)[0]}'")
        self.box_format, self.iou_type, self.average = box_format, types, average
        self.class_metrics, self.extended_summary = class_metrics, extended_summary
        self.max_detection_thresholds = sorted(int(m) for m in (max_detection_thresholds or [1, 10, 100]))
        self._tm_args = {"box_format": box_format, "iou_type": iou_type, "class_metrics": class_metrics,
                         "extended_summary": extended_summary, "average": average}
        entry: Dict[str, Any] = {"type": "COCODetection", "metric": list(types), "eval_arrays": True,
                                 "max_dets": self.max_detection_thresholds}
        if iou_thresholds is not None:
            entry["iou_thrs"] = [float(t) for t in iou_thresholds]
        if rec_thresholds is not None:
            entry["rec_thrs"] = [float(r) for r in rec_thresholds]
        # Macro: one entry, per class with class_metrics. Micro (every label 0, as torchmetrics)
        # beside a macro entry for the classes and the per-class values, in the same pass.
        metrics = [{**entry, "name": "macro", "classwise": class_metrics}]
        if average == "micro":
            metrics.append({**entry, "name": "micro",
                            "inputs": {"pred_labels": "micro_pred_labels", "gt_labels": "micro_gt_labels"}})
        backend_type = "nondist" if not kwargs.get("sync_on_compute", True) or _tm._launcher_world_size() == 1 else "auto"
        config = {"metrics": metrics, "backend": {"type": backend_type}}
        super().__init__(config, inputs=("preds", "target"))
        self._images = 0  # this rank's images so far: ids rank, rank + world, ...

    # ---- inputs -------------------------------------------------------------------------------
    def _batch(self, args: tuple, kwargs: dict) -> dict:
        names = ("preds", "target")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in values:
                raise TypeError(f"MeanAveragePrecision.update() got an unexpected keyword argument '{k}'")
            values[k] = v
        if len(args) > 2 or set(values) != set(names):
            raise TypeError("MeanAveragePrecision.update() takes preds and target (lists of dicts)")
        preds, target = values["preds"], values["target"]
        if not isinstance(preds, Sequence) or not all(isinstance(p, dict) for p in preds):
            raise ValueError("Expected argument `preds` to be of type Sequence[dict]")
        if not isinstance(target, Sequence) or not all(isinstance(t, dict) for t in target):
            raise ValueError("Expected argument `target` to be of type Sequence[dict]")
        if len(preds) != len(target):
            raise ValueError(f"Expected argument `preds` and `target` to have the same length, but got {len(preds)} and {len(target)}")
        batch = self._fields_of(preds, target)
        self._note_inputs({"pred_scores": batch["pred_scores"][0] if preds else None})
        return batch

    def _image_ids(self, n: int) -> list:
        ev = self.evaluator._ev
        rank, world = ev.rank, ev.world_size
        ids = [(self._images + i) * world + rank for i in range(n)]
        self._images += n
        return ids

    def _fields_of(self, preds: Sequence[dict], target: Sequence[dict]) -> dict:
        import numpy as np

        f: Dict[str, list] = {k: [] for k in ("pred_scores", "pred_labels", "gt_labels", "gt_iscrowd")}
        segm, bbox = "segm" in self.iou_type, "bbox" in self.iou_type
        for i, (p, t) in enumerate(zip(preds, target)):
            for key in ("scores", "labels") + (("boxes",) if bbox else ()) + (("masks",) if segm else ()):
                if key not in p:
                    raise ValueError(f"Expected all dicts in `preds` to contain the `{key}` key (image {i})")
            for key in ("labels",) + (("boxes",) if bbox else ()) + (("masks",) if segm else ()):
                if key not in t:
                    raise ValueError(f"Expected all dicts in `target` to contain the `{key}` key (image {i})")
            labels = _as_array(t["labels"], "int64")
            f["pred_scores"].append(_as_array(p["scores"], "float32"))
            f["pred_labels"].append(_as_array(p["labels"], "int64"))
            f["gt_labels"].append(labels)
            crowd = t.get("iscrowd")
            f["gt_iscrowd"].append(np.zeros(len(labels), np.int64) if crowd is None else crowd)
            xywh = None
            if bbox:
                for side, d in (("pred", p), ("gt", t)):
                    boxes = _as_array(d["boxes"], "float32")
                    boxes = boxes.reshape(-1, 4) if boxes.shape[0] == 0 else boxes
                    xywh = _to_xywh(boxes, self.box_format)
                    f.setdefault(f"{side}_bboxes_xywh", []).append(xywh)
            if segm:
                f.setdefault("pred_masks", []).append(p["masks"])
                f.setdefault("gt_masks", []).append(t["masks"])
            f.setdefault("gt_areas", []).append(self._gt_area(t, t.get("area"), xywh, segm))
        f["img_id"] = np.asarray(self._image_ids(len(preds)), dtype=np.int64)
        if self.average == "micro":
            f["micro_pred_labels"] = [np.zeros(len(x), np.int64) for x in f["pred_labels"]]
            f["micro_gt_labels"] = [np.zeros(len(x), np.int64) for x in f["gt_labels"]]
        return f

    @staticmethod
    def _gt_area(t: dict, area: Any, xywh: Any, segm: bool) -> Any:
        """torchmetrics' ground truth area: the given one where > 0, else the mask's pixel count
        (for bbox and segm together the mask's for both: torchmetrics only switches the
        detections' areas) or the box's w * h (of its xywh box, in float64)."""
        import numpy as np

        n = len(t["labels"])
        given = np.zeros(n) if area is None else np.asarray(_tm._plain(area), dtype=np.float64).reshape(n)
        if segm:
            masks = t["masks"]
            masks = masks.cpu().numpy() if hasattr(masks, "cpu") else np.asarray(masks)
            fallback = masks.reshape(n, int(np.prod(masks.shape[1:]))).astype(bool).sum(axis=1).astype(np.float64)
        else:
            b = xywh.cpu().numpy() if hasattr(xywh, "cpu") else np.asarray(xywh)
            fallback = b[:, 2].astype(np.float64) * b[:, 3].astype(np.float64)
        return np.where(given > 0, given, fallback)

    # ---- values -------------------------------------------------------------------------------
    def _result(self, results: dict) -> dict:
        return self._value(results)

    def _value(self, results: dict) -> dict:
        out: Dict[str, Any] = {}
        main = results["micro" if self.average == "micro" else "macro"]
        macro = results["macro"]
        many = len(self.iou_type) > 1
        m = self.max_detection_thresholds
        for kind in self.iou_type:
            pre = f"{kind}_" if many else ""
            for ours, theirs in zip(_STAT_KEYS, _TM_STATS):
                out[pre + theirs] = self._out(main[f"{kind}_{ours}"])
            for n in m:
                out[f"{pre}mar_{n}"] = self._out(main[f"{kind}_AR@{n}"])
            for ours, theirs in _AR_AREAS:
                out[f"{pre}mar_{theirs}"] = self._out(main[f"{kind}_AR_{ours}@{m[-1]}"])
            arrays = main[f"{kind}_eval"]
            seen = macro[f"{kind}_eval"]["seen_cat_ids"]
            if self.extended_summary:
                out.update(self._extended(pre, arrays, seen if self.average == "macro" else None))
            if self.class_metrics:
                per_ap, per_ar = [], []
                for c in seen:
                    ap = macro.get(f"{kind}_{c}_precision")
                    ar = macro.get(f"{kind}_{c}_recall")
                    # stats[0] reads maxDets 100 (pycocotools): -1 without it; NaN: no ground truth
                    per_ap.append(-1.0 if ap is None or ap != ap or 100 not in m else ap)
                    per_ar.append(-1.0 if ar is None or ar != ar else ar)
                out[f"{pre}map_per_class"] = self._squeezed(per_ap)
                out[f"{pre}mar_{m[-1]}_per_class"] = self._squeezed(per_ar)
            else:
                out[f"{pre}map_per_class"] = self._out(-1.0)
                out[f"{pre}mar_{m[-1]}_per_class"] = self._out(-1.0)
        seen = macro[f"{self.iou_type[0]}_eval"]["seen_cat_ids"]
        if not seen:  # nothing updated: torchmetrics returns the -1 stats and the classes only
            for kind in self.iou_type:
                pre = f"{kind}_" if many else ""
                for k in ("map_per_class", f"mar_{m[-1]}_per_class", "precision", "recall", "scores"):
                    out.pop(pre + k, None)
        out["classes"] = self._classes(seen)
        return out

    def _squeezed(self, values: list) -> Any:
        return self._out(values[0] if len(values) == 1 else values)

    def _classes(self, seen: list) -> Any:
        torch = _tm._torch() if self._torch_out else None
        if torch is not None:
            v = torch.tensor(seen, dtype=torch.int32, device=self._device)
            return v.squeeze() if v.numel() == 1 else v
        import numpy as np

        v = np.asarray(seen, dtype=np.int32)
        return v.reshape(()) if v.size == 1 else v

    def _extended(self, pre: str, a: dict, seen: Optional[list]) -> dict:
        """pycocotools' eval arrays over the classes torchmetrics passes as catIds (every class
        seen, those without ground truth -1), float64 as torchmetrics gives them."""
        import numpy as np

        T, R, K, A, M = a["shape"]
        prec = np.asarray(a["precision"], dtype=np.float64).reshape(T, R, K, A, M)
        rec = np.asarray(a["recall"], dtype=np.float64).reshape(T, K, A, M)
        scores = np.asarray(a["scores"], dtype=np.float64).reshape(T, R, K, A, M)
        if seen is not None and list(seen) != list(a["cat_ids"]):
            index = {c: k for k, c in enumerate(a["cat_ids"])}
            cols = [index.get(c, -1) for c in seen]
            prec, rec, scores = _columns(prec, 2, cols), _columns(rec, 1, cols), _columns(scores, 2, cols)
        torch = _tm._torch() if self._torch_out else None
        conv = (lambda x: torch.tensor(x, dtype=torch.float64, device=self._device)) if torch is not None else (lambda x: x)
        return {f"{pre}precision": conv(prec), f"{pre}recall": conv(rec), f"{pre}scores": conv(scores)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._tm_args.items())
        return f"MeanAveragePrecision({args})"



def _columns(x: Any, axis: int, cols: list) -> Any:
    """``x``'s entries along ``axis`` at ``cols`` (-1: a new entry of -1s)."""
    import numpy as np

    shape = list(x.shape)
    shape[axis] = 1
    ext = np.concatenate([x, -np.ones(shape)], axis=axis)
    return np.take(ext, [c if c >= 0 else x.shape[axis] for c in cols], axis=axis)

// Every metric's documented example, run through the real plugin: each metric plugin's header
// comment has an `// Example:` line (inputs, parameters -> result), and the table below
// transcribes it. The table must cover every metric whose source has such a line (read from the
// source tree), so a new metric's example cannot be left out, and every documented result must
// come out of the plugin loaded through the registry.
//
// Expected values as the comments write them: a JSON number must match to 1e-15 relative (an
// integer exactly, as an integer); "~0.6667" is rounded (within half a unit of its last digit);
// "0.708333..." is cut short (within one unit of its last digit). Only the keys a comment names
// are checked (comments elide the rest with "...").
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metric_harness.hpp"

namespace tally::test {
namespace {

// Inputs: a field is {"dtype", "data": nested arrays} (the shape is the nesting's),
// {"dtype", "shape", "fill": v, "zero_prefix": k} (every element v but the first k, which are 0),
// {"ragged": [tensor, ...]} (one tensor per sample), {"text": [s, ...]} (one string per sample) or
// {"text_lists": [[s, ...], ...]}, or {"npy": path} (a dense field read from a .npy file of the
// source tree, for examples too large to write here). dtype: f64, f32, i64, bool.
constexpr const char* kExamples = R"json(
[
  {"metric": "PSNR", "params": {},
   "inputs": {"pred_img": {"dtype": "f64", "shape": [1, 32, 32], "fill": 2}, "gt_img": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1}},
   "expected": {"psnr": "~48.1308"}},
  {"metric": "MAE", "params": {},
   "inputs": {"pred_img": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 1}, "gt_img": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 2}, "mask": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 2, "zero_prefix": 1536}},
   "expected": {"mae": 0.00392156862745098}},
  {"metric": "MSE", "params": {},
   "inputs": {"pred_img": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 1}, "gt_img": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 2}, "mask": {"dtype": "f64", "shape": [1, 32, 32, 3], "fill": 2, "zero_prefix": 1536}},
   "expected": {"mse": 1.5378700499807768e-05}},
  {"metric": "SAD", "params": {},
   "inputs": {"pred_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 0}, "gt_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1}},
   "expected": {"sad": 1.024}},
  {"metric": "MattingMSE", "params": {},
   "inputs": {"pred_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 0}, "gt_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1}, "trimap": {"dtype": "f64", "shape": [1, 32, 32], "fill": 128, "zero_prefix": 768}},
   "expected": {"matting_mse": 4.0}},
  {"metric": "GradientError", "params": {},
   "inputs": {"pred_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 0}, "gt_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1, "zero_prefix": 512}, "trimap": {"dtype": "f64", "shape": [1, 32, 32], "fill": 128}},
   "expected": {"gradient_error": 0.6269029122053189}},
  {"metric": "ConnectivityError", "params": {},
   "inputs": {"pred_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 0}, "gt_alpha": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1}, "trimap": {"dtype": "f64", "shape": [1, 32, 32], "fill": 128, "zero_prefix": 768}},
   "expected": {"connectivity_error": 0.256}},
  {"metric": "HmeanIoU", "params": {"pred_score_thrs": {"start": 0.5, "stop": 0.7, "step": 0.1}},
   "inputs": {"pred_polygons": {"ragged": [{"dtype": "f64", "data": [[0, 0, 1, 0, 1, 1, 0, 1], [0, 0, 1, 0, 1, 1, 0, 1]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [1, 0.5]}]}, "gt_polygons": {"ragged": [{"dtype": "f64", "data": [[0, 0, 1, 0, 1, 1, 0, 1]]}]}},
   "expected": {"hmean": 1.0, "hmean_per_thr": [0.6666666666666666, 1.0]}},
  {"metric": "AVAMeanAP", "params": {"ann_file": "tests/data/ava/doc_gt.csv", "label_file": "tests/data/ava/doc_label_map.pbtxt"},
   "inputs": {"video_id": {"text": ["vid"]}, "timestamp": {"dtype": "i64", "data": [902]}, "pred_bboxes": {"ragged": [{"dtype": "f64", "data": [[0.1, 0.2, 0.5, 0.9]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9]}]}, "pred_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}},
   "expected": {"mAP@0.5IOU": 1.0}},
  {"metric": "SNR", "params": {"input_order": "CHW"},
   "inputs": {"pred_img": {"dtype": "f64", "shape": [1, 3, 32, 32], "fill": 1}, "gt_img": {"dtype": "f64", "shape": [1, 3, 32, 32], "fill": 2}},
   "expected": {"snr": "~6.0206"}},
  {"metric": "SSIM", "params": {},
   "inputs": {"pred_img": {"dtype": "f64", "shape": [1, 32, 32], "fill": 2}, "gt_img": {"dtype": "f64", "shape": [1, 32, 32], "fill": 1}},
   "expected": {"ssim": 0.913062377743969}},
  {"metric": "NIQE", "params": {},
   "inputs": {"pred_img": {"npy": "tests/data/niqe/coffee_jpeg15.npy"}},
   "expected": {"niqe": "~11.8055"}},
  {"metric": "EndPointError", "params": {},
   "inputs": {"pred_flow": {"dtype": "f64", "data": [[[[10, 5], [0.1, 3]], [[3, 15.2], [2.4, 4.5]]]]}, "gt_flow": {"dtype": "f64", "data": [[[[10.1, 4.8], [10, 3]], [[6, 10.2], [2, 4.1]]]]}, "valid_mask": {"dtype": "f64", "data": [[[1, 1], [1, 0]]]}},
   "expected": {"EPE": 5.318186230865093}},
  {"metric": "MeanIoU", "params": {"num_classes": 4},
   "inputs": {"pred_sem_seg": {"dtype": "i64", "data": [[[0, 2, 1], [1, 3, 2]]]}, "gt_sem_seg": {"dtype": "i64", "data": [[[0, 1, 1], [2, 3, 2]]]}},
   "expected": {"aAcc": "~0.6667", "mIoU": "~0.6667", "mAcc": 0.75, "mDice": 0.75, "kappa": "~0.53846"}},
  {"metric": "BLEU", "params": {},
   "inputs": {"pred": {"text": ["the cat is on the mat", "There is a big tree near the park here"]}, "refs": {"text_lists": [["a cat is on the mat"], ["A big tree is growing near the park here"]]}},
   "expected": {"bleu": 0.5226045319355426}},
  {"metric": "BLEU", "params": {"smooth": true},
   "inputs": {"pred": {"text": ["the cat is on the mat", "There is a big tree near the park here"]}, "refs": {"text_lists": [["a cat is on the mat"], ["A big tree is growing near the park here"]]}},
   "expected": {"bleu": 0.566315716093867}},
  {"metric": "CharRecallPrecision", "params": {},
   "inputs": {"pred": {"text": ["helL", "HEL"]}, "gt": {"text": ["hello", "HELLO"]}},
   "expected": {"recall": 0.6, "precision": 0.8571428571428571}},
  {"metric": "CharRecallPrecision", "params": {"letter_case": "upper"},
   "inputs": {"pred": {"text": ["helL", "HEL"]}, "gt": {"text": ["hello", "HELLO"]}},
   "expected": {"recall": 0.7, "precision": 1.0}},
  {"metric": "ROUGE", "params": {"rouge_keys": "L"},
   "inputs": {"pred": {"text": ["the cat is on the mat"]}, "refs": {"text_lists": [["a cat is on the mat"]]}},
   "expected": {"rougeL_fmeasure": "~0.8333", "rougeL_precision": "~0.8333", "rougeL_recall": "~0.8333"}},
  {"metric": "WER", "params": {},
   "inputs": {"gt": {"text": ["hello world", "the cat sat"]}, "pred": {"text": ["hello there world", "the cat"]}},
   "expected": {"wer": 0.4}},
  {"metric": "WordAccuracy", "params": {"mode": ["exact", "ignore_case", "ignore_case_symbol"]},
   "inputs": {"pred": {"text": ["hello", "hello", "hello"]}, "gt": {"text": ["hello", "HELLO", "$HELLO$"]}},
   "expected": {"accuracy": "~0.3333", "ignore_case_accuracy": "~0.6667", "ignore_case_symbol_accuracy": 1.0}},
  {"metric": "CER", "params": {},
   "inputs": {"gt": {"text": ["héllo"]}, "pred": {"text": ["hallo"]}},
   "expected": {"cer": 0.2}},
  {"metric": "KeypointNME", "params": {"norm_mode": "use_norm_item", "norm_item": "box_size"},
   "inputs": {"pred_coords": {"dtype": "f64", "shape": [2, 19, 2], "fill": 0}, "gt_coords": {"dtype": "f64", "shape": [2, 19, 2], "fill": 0.5}, "mask": {"dtype": "bool", "shape": [2, 19], "fill": 1}, "box_size": {"dtype": "f64", "data": [[0], [20]]}},
   "expected": {"NME": 0.0353553406894207}},
  {"metric": "JhmdbPCKAccuracy", "params": {"thr": 0.2, "norm_item": "torso"},
   "inputs": {"pred_coords": {"dtype": "f64", "data": [[[0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25]]]}, "gt_coords": {"dtype": "f64", "data": [[[0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25]]]}, "mask": {"dtype": "bool", "shape": [1, 15], "fill": 1}, "torso_size": {"dtype": "f64", "data": [[3.5, 7.25]]}},
   "expected": {"Head tPCK": 1.0, "Sho tPCK": 1.0, "Mean tPCK": 1.0}},
  {"metric": "PCKAccuracy", "params": {"thr": 0.5, "norm_item": "bbox"},
   "inputs": {"pred_coords": {"dtype": "f64", "data": [[[0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25]]]}, "gt_coords": {"dtype": "f64", "data": [[[0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25]]]}, "mask": {"dtype": "bool", "shape": [1, 15], "fill": 1}, "bbox_size": {"dtype": "f64", "data": [[3.5, 7.25]]}},
   "expected": {"PCK@0.5": 1.0}},
  {"metric": "KeypointAUC", "params": {"norm_factor": 20.0, "num_thrs": 4},
   "inputs": {"pred_coords": {"dtype": "f64", "data": [[[10, 4], [10, 18], [0, 0], [40, 40], [20, 10]]]}, "gt_coords": {"dtype": "f64", "data": [[[10, 0], [10, 10], [0, -1], [30, 30], [0, 10]]]}, "mask": {"dtype": "bool", "data": [[true, true, false, true, true]]}},
   "expected": {"AUC@4": 0.375}},
  {"metric": "MpiiPCKAccuracy", "params": {"thr": 0.3, "norm_item": "head"},
   "inputs": {"pred_coords": {"dtype": "f64", "data": [[[0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 0.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [0.25, 1.25], [2.25, 3.25]]]}, "gt_coords": {"dtype": "f64", "data": [[[1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [7.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 7.25], [1.25, 2.25], [3.25, 4.25], [5.25, 6.25], [7.25, 1.25], [2.25, 3.25], [4.25, 5.25], [6.25, 7.25], [1.25, 2.25], [3.25, 4.25]]]}, "mask": {"dtype": "bool", "shape": [1, 16], "fill": 1}, "head_size": {"dtype": "f64", "data": [[3.5, 7.25]]}},
   "expected": {"Head": 100.0, "Shoulder": 100.0, "PCKh": 100.0, "PCKh@0.1": 100.0}},
  {"metric": "KeypointEndPointError", "params": {},
   "inputs": {"pred_coords": {"dtype": "f64", "data": [[[10, 4], [10, 18], [0, 0], [40, 40], [20, 10]]]}, "gt_coords": {"dtype": "f64", "data": [[[10, 0], [10, 10], [0, -1], [30, 30], [0, 10]]]}, "mask": {"dtype": "bool", "data": [[true, true, false, true, true]]}},
   "expected": {"EPE": 11.535533905029297}},
  {"metric": "RegressionMAE", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "pred": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"mae": 0.5}},
  {"metric": "RegressionMSE", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "pred": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"mse": 0.375}},
  {"metric": "R2", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "pred": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"r2": 0.9486081370449679}},
  {"metric": "RMSE", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "pred": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"rmse": 0.6123724356957945}},
  {"metric": "VOCMeanAP", "params": {"num_classes": 1},
   "inputs": {"pred_bboxes": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9]}]}, "pred_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}, "gt_bboxes": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10]]}]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}},
   "expected": {"AP50": 1.0, "mAP": 1.0}},
  {"metric": "DOTAMeanAP", "params": {"num_classes": 1},
   "inputs": {"pred_bboxes": {"ragged": [{"dtype": "f64", "data": [[50, 50, 20, 10, 0.3]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9]}]}, "pred_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}, "gt_bboxes": {"ragged": [{"dtype": "f64", "data": [[50, 50, 20, 10, 0.3]]}]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}},
   "expected": {"AP50": 1.0, "mAP": 1.0}},
  {"metric": "OIDMeanAP", "params": {"num_classes": 1},
   "inputs": {"pred_bboxes": {"ragged": [{"dtype": "f64", "data": [[10, 10, 20, 20], [30, 30, 40, 40]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9, 0.8]}]}, "pred_labels": {"ragged": [{"dtype": "i64", "data": [0, 0]}]}, "gt_bboxes": {"ragged": [{"dtype": "f64", "data": [[0, 0, 100, 100]]}]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0]}]}, "gt_is_group_of": {"ragged": [{"dtype": "i64", "data": [1]}]}},
   "expected": {"AP50": 1.0, "mAP": 1.0}},
  {"metric": "ProposalRecall", "params": {},
   "inputs": {"pred_bboxes": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10], [50, 50, 60, 60]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9, 0.8]}]}, "gt_bboxes": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10]]}]}},
   "expected": {"AR@1": 1.0, "AR@10": 1.0}},
  {"metric": "COCODetection", "params": {},
   "inputs": {"img_id": {"dtype": "i64", "data": [7]}, "pred_bboxes_xywh": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10]]}]}, "pred_scores": {"ragged": [{"dtype": "f64", "data": [0.9]}]}, "pred_labels": {"ragged": [{"dtype": "i64", "data": [1]}]}, "gt_bboxes_xywh": {"ragged": [{"dtype": "f64", "data": [[0, 0, 10, 10]]}]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [1]}]}},
   "expected": {"bbox_mAP": 0.9999999999999998, "bbox_AR@100": 1.0, "bbox_mAP_s": 0.9999999999999998, "bbox_mAP_m": -1.0, "bbox_mAP_l": -1.0}},
  {"metric": "Perplexity", "params": {},
   "inputs": {"pred_logits": {"dtype": "f32", "data": [[[0, 0], [0, 0]]]}, "gt_tokens": {"dtype": "i64", "data": [[0, 1]]}},
   "expected": {"perplexity": 2.0}},
  {"metric": "ConfusionMatrix", "params": {"num_classes": 3},
   "inputs": {"pred_labels": {"dtype": "i64", "data": [0, 2, 1, 2]}, "gt_labels": {"dtype": "i64", "data": [0, 1, 1, 2]}},
   "expected": {"matrix": [[1, 0, 0], [0, 1, 1], [0, 0, 1]]}},
  {"metric": "AveragePrecision", "params": {},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.9, 0.8, 0.3, 0.2], [0.1, 0.2, 0.2, 0.1], [0.7, 0.5, 0.9, 0.3], [0.8, 0.1, 0.1, 0.2]]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0, 1]}, {"dtype": "i64", "data": [1]}, {"dtype": "i64", "data": [2]}, {"dtype": "i64", "data": [0]}]}},
   "expected": {"mAP": "0.708333..."}},
  {"metric": "AveragePrecision", "params": {"average": "none"},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.9, 0.8, 0.3, 0.2], [0.1, 0.2, 0.2, 0.1], [0.7, 0.5, 0.9, 0.3], [0.8, 0.1, 0.1, 0.2]]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0, 1]}, {"dtype": "i64", "data": [1]}, {"dtype": "i64", "data": [2]}, {"dtype": "i64", "data": [0]}]}},
   "expected": {"AP_classwise": [1.0, "0.8333...", 1.0, 0.0]}},
  {"metric": "MultiLabelMetric", "params": {"topk": 2, "average": "micro"},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]]}, "gt_labels": {"ragged": [{"dtype": "i64", "data": [0]}, {"dtype": "i64", "data": [1]}, {"dtype": "i64", "data": [2]}, {"dtype": "i64", "data": [3]}]}},
   "expected": {"precision_top2_micro": 0.375, "recall_top2_micro": 0.75, "f1-score_top2_micro": 0.5}},
  {"metric": "SingleLabelMetric", "params": {"average": "micro"},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]]}, "gt_labels": {"dtype": "i64", "data": [0, 1, 2, 3]}},
   "expected": {"precision_micro": 0.5, "recall_micro": 0.5, "f1-score_micro": 0.5}},
  {"metric": "ROCAUC", "params": {},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "gt_labels": {"dtype": "i64", "data": [0, 0, 1, 1]}},
   "expected": {"AUC": 0.75}},
  {"metric": "Accuracy", "params": {"topk": [1, 2, 3]},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]]}, "gt_labels": {"dtype": "i64", "data": [0, 1, 2, 3]}},
   "expected": {"top1": 0.5, "top2": 0.75, "top3": 1.0}},
  {"metric": "Accuracy", "params": {"topk": 2, "thrs": [0.1, 0.5]},
   "inputs": {"pred_scores": {"dtype": "f64", "data": [[0.7, 0.1, 0.1, 0.1], [0.1, 0.3, 0.4, 0.2], [0.3, 0.4, 0.2, 0.1], [0.0, 0.0, 0.1, 0.9]]}, "gt_labels": {"dtype": "i64", "data": [0, 1, 2, 3]}},
   "expected": {"top2_thr-0.10": 0.75, "top2_thr-0.50": 0.5}},
  {"metric": "F1Score", "params": {"num_classes": 5, "mode": ["macro", "micro"]},
   "inputs": {"pred_labels": {"dtype": "i64", "data": [0, 1, 2]}, "gt_labels": {"dtype": "i64", "data": [0, 1, 4]}},
   "expected": {"macro_f1": 0.4, "micro_f1": "0.666..."}},
  {"metric": "PanopticQuality", "params": {"things": [0, 1], "stuffs": [6, 7], "return_sq_and_rq": true},
   "inputs": {"pred_panoptic": {"dtype": "i64", "data": [[[[6, 0], [0, 0], [6, 0], [6, 0]], [[0, 0], [0, 0], [6, 0], [0, 1]], [[0, 0], [0, 0], [6, 0], [0, 1]], [[0, 0], [7, 0], [6, 0], [1, 0]], [[0, 0], [7, 0], [7, 0], [7, 0]]]]}, "gt_panoptic": {"dtype": "i64", "data": [[[[6, 0], [0, 1], [6, 0], [0, 1]], [[0, 1], [0, 1], [6, 0], [0, 1]], [[0, 1], [0, 1], [6, 0], [1, 0]], [[0, 1], [7, 0], [1, 0], [1, 0]], [[0, 1], [7, 0], [7, 0], [7, 0]]]]}},
   "expected": {"pq": "~0.5463", "sq": "~0.6111", "rq": "~0.6667"}},
  {"metric": "ModifiedPanopticQuality", "params": {"things": [0, 1], "stuffs": [6, 7]},
   "inputs": {"pred_panoptic": {"dtype": "i64", "data": [[[0, 0], [0, 1], [6, 0], [7, 0], [0, 2], [1, 0]]]}, "gt_panoptic": {"dtype": "i64", "data": [[[0, 1], [0, 0], [6, 0], [7, 0], [6, 0], [255, 0]]]}},
   "expected": {"pq": "~0.7667"}},
  {"metric": "CramersV", "params": {"num_classes": 2, "bias_correction": false},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 1, 1, 0]}, "target": {"dtype": "i64", "data": [0, 1, 1, 1]}},
   "expected": {"cramers_v": 0.5773502691896258}},
  {"metric": "TschuprowsT", "params": {"num_classes": 3, "bias_correction": false},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 1, 2, 0, 1, 2]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0, 1, 1]}},
   "expected": {"tschuprows_t": 0.8408964152537146}},
  {"metric": "PearsonsContingencyCoefficient", "params": {"num_classes": 2},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 1, 1, 0]}, "target": {"dtype": "i64", "data": [0, 1, 1, 1]}},
   "expected": {"pearsons_contingency_coefficient": 0.5}},
  {"metric": "TheilsU", "params": {"num_classes": 3},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 1, 2, 0, 1, 2]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0, 1, 1]}},
   "expected": {"theils_u": 0.579380164285695}},
  {"metric": "FleissKappa", "params": {"mode": "counts"},
   "inputs": {"ratings": {"dtype": "i64", "data": [[2, 0], [0, 2], [1, 1]]}},
   "expected": {"fleiss_kappa": 0.3333266667999973}},
  {"metric": "DiceScore", "params": {"num_classes": 2, "input_format": "index"},
   "inputs": {"preds": {"dtype": "i64", "data": [[[0, 1], [1, 1]]]}, "target": {"dtype": "i64", "data": [[[0, 1], [0, 1]]]}},
   "expected": {"dice_score": 0.7333333333333334}},
  {"metric": "GeneralizedDiceScore", "params": {"num_classes": 2, "input_format": "index"},
   "inputs": {"preds": {"dtype": "i64", "data": [[[0, 1], [1, 1]]]}, "target": {"dtype": "i64", "data": [[[0, 1], [0, 1]]]}},
   "expected": {"generalized_dice_score": 0.75}},
  {"metric": "HausdorffDistance", "params": {"num_classes": 2, "input_format": "index"},
   "inputs": {"preds": {"dtype": "i64", "data": [[[0, 0, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]]]}, "target": {"dtype": "i64", "data": [[[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 1, 1]]]}},
   "expected": {"hausdorff_distance": 1.4142135623730951}},
  {"metric": "AdjustedRandScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"adjusted_rand_score": 0.24242424242424243}},
  {"metric": "RandScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"rand_score": 0.6666666666666666}},
  {"metric": "MutualInfoScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"mutual_info_score": 0.4620981203732969}},
  {"metric": "NormalizedMutualInfoScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"normalized_mutual_info_score": 0.5158037429793889}},
  {"metric": "AdjustedMutualInfoScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"adjusted_mutual_info_score": 0.2987924581708901}},
  {"metric": "HomogeneityScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"homogeneity_score": 0.6666666666666669}},
  {"metric": "CompletenessScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"completeness_score": 0.420619835714305}},
  {"metric": "VMeasureScore", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"v_measure_score": 0.5158037429793889}},
  {"metric": "FowlkesMallowsIndex", "params": {},
   "inputs": {"target": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1]}, "preds": {"dtype": "i64", "data": [0, 0, 1, 1, 2, 2]}},
   "expected": {"fowlkes_mallows_index": 0.4714045207910317}},
  {"metric": "CalinskiHarabaszScore", "params": {},
   "inputs": {"data": {"dtype": "f64", "data": [[0, 0], [0.5, 0], [1, 0], [0.5, 1]]}, "labels": {"dtype": "i64", "data": [0, 0, 0, 1]}},
   "expected": {"calinski_harabasz_score": 3.0}},
  {"metric": "DaviesBouldinScore", "params": {},
   "inputs": {"data": {"dtype": "f64", "data": [[0, 0], [0.5, 0], [1, 0], [0.5, 1]]}, "labels": {"dtype": "i64", "data": [0, 0, 0, 1]}},
   "expected": {"davies_bouldin_score": 0.3333333333333333}},
  {"metric": "DunnIndex", "params": {},
   "inputs": {"data": {"dtype": "f64", "data": [[0, 0], [0.5, 0], [1, 0], [0.5, 1]]}, "labels": {"dtype": "i64", "data": [0, 0, 0, 1]}},
   "expected": {"dunn_index": 2.0}},
  {"metric": "ScaleInvariantSignalDistortionRatio", "params": {},
   "inputs": {"preds": {"dtype": "f64", "data": [[2.5, 0, 2, 8]]}, "target": {"dtype": "f64", "data": [[3, -0.5, 2, 7]]}},
   "expected": {"scale_invariant_signal_distortion_ratio": "~18.4030"}},
  {"metric": "ScaleInvariantSignalNoiseRatio", "params": {},
   "inputs": {"preds": {"dtype": "f64", "data": [[2.5, 0, 2, 8]]}, "target": {"dtype": "f64", "data": [[3, -0.5, 2, 7]]}},
   "expected": {"scale_invariant_signal_noise_ratio": "~15.0918"}},
  {"metric": "SignalDistortionRatio", "params": {"filter_length": 2},
   "inputs": {"preds": {"dtype": "f64", "data": [[1, 2, 3, 5]]}, "target": {"dtype": "f64", "data": [[1, 2, 3, 4]]}},
   "expected": {"signal_distortion_ratio": "~19.2315"}},
  {"metric": "PermutationInvariantTraining", "params": {"metric_func": "scale_invariant_signal_distortion_ratio"},
   "inputs": {"preds": {"dtype": "f64", "data": [[[-0.0579, 0.3560, -0.9604], [-0.1719, 0.3205, 0.2951]]]}, "target": {"dtype": "f64", "data": [[[1.0958, -0.1648, 0.5228], [-0.4100, 1.1942, -0.5103]]]}},
   "expected": {"permutation_invariant_training": "~-5.1091"}},
  {"metric": "ShortTimeObjectiveIntelligibility", "params": {"fs": 8000},
   "inputs": {"preds": {"npy": "tests/data/audio/stoi_doc_preds.npy"}, "target": {"npy": "tests/data/audio/stoi_doc_target.npy"}},
   "expected": {"short_time_objective_intelligibility": "~0.989025"}},
  {"metric": "ShortTimeObjectiveIntelligibility", "params": {"fs": 8000, "extended": true},
   "inputs": {"preds": {"npy": "tests/data/audio/stoi_doc_preds.npy"}, "target": {"npy": "tests/data/audio/stoi_doc_target.npy"}},
   "expected": {"short_time_objective_intelligibility": "~0.859504"}},
  {"metric": "CHRFScore", "params": {},
   "inputs": {"preds": {"text": ["the cat is on the mat"]}, "target": {"text_lists": [["there is a cat on the mat", "a cat is on the mat"]]}},
   "expected": {"chrf_score": 0.8640464626240438}},
  {"metric": "TranslationEditRate", "params": {},
   "inputs": {"preds": {"text": ["the cat is on the mat"]}, "target": {"text_lists": [["there is a cat on the mat", "a cat is on the mat"]]}},
   "expected": {"translation_edit_rate": 0.15384615384615385}},
  {"metric": "EditDistance", "params": {},
   "inputs": {"preds": {"text": ["rain"]}, "target": {"text": ["shine"]}},
   "expected": {"edit_distance": 3.0}},
  {"metric": "EditDistance", "params": {"substitution_cost": 2},
   "inputs": {"preds": {"text": ["rain"]}, "target": {"text": ["shine"]}},
   "expected": {"edit_distance": 5.0}},
  {"metric": "ExtendedEditDistance", "params": {},
   "inputs": {"preds": {"text": ["this is the prediction", "here is an other sample"]}, "target": {"text_lists": [["this is the reference"], ["here is another one"]]}},
   "expected": {"extended_edit_distance": 0.30776307858253227}},
  {"metric": "MatchErrorRate", "params": {},
   "inputs": {"target": {"text": ["hello world", "the cat sat"]}, "preds": {"text": ["hello there world", "the cat"]}},
   "expected": {"match_error_rate": 0.3333333333333333}},
  {"metric": "WordInfoLost", "params": {},
   "inputs": {"target": {"text": ["hello world", "the cat sat"]}, "preds": {"text": ["hello there world", "the cat"]}},
   "expected": {"word_information_lost": 0.3599999999999999}},
  {"metric": "WordInfoPreserved", "params": {},
   "inputs": {"target": {"text": ["hello world", "the cat sat"]}, "preds": {"text": ["hello there world", "the cat"]}},
   "expected": {"word_information_preserved": 0.6400000000000001}},
  {"metric": "SQuAD", "params": {},
   "inputs": {"preds": {"text": ["the Big  cat!", "a dog"]}, "target": {"text_lists": [["big cat"], ["a black dog", "cat"]]}},
   "expected": {"exact_match": 0.5, "f1": "~0.8333333333"}},
  {"metric": "MultiScaleStructuralSimilarityIndexMeasure", "params": {"betas": [0.5, 0.5], "sigma": 0.5, "kernel_size": 3, "data_range": 1.0},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 0.75, "zero_prefix": 100}, "target": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 1, "zero_prefix": 128}},
   "expected": {"multiscale_structural_similarity_index_measure": "0.6285602198477..."}},
  {"metric": "UniversalImageQualityIndex", "params": {"kernel_size": 3, "sigma": 1.0},
   "inputs": {"preds": {"dtype": "f64", "data": [[[[0.2,0.5,0.8,0.0,0.3,0.6],[0.9,0.1,0.4,0.7,1.0,0.2],[0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5],[0.8,0.0,0.3,0.6,0.9,0.1],[0.4,0.7,1.0,0.2,0.5,0.8]]]]}, "target": {"dtype": "f64", "data": [[[[0.1,0.4,0.7,1.0,0.2,0.5],[0.8,0.0,0.3,0.6,0.9,0.1],[0.4,0.7,1.0,0.2,0.5,0.8],[0.0,0.3,0.6,0.9,0.1,0.4],[0.7,1.0,0.2,0.5,0.8,0.0],[0.3,0.6,0.9,0.1,0.4,0.7]]]]}},
   "expected": {"universal_image_quality_index": 0.42468579926080735}},
  {"metric": "SpectralAngleMapper", "params": {},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 3, 16, 16], "fill": 0.5, "zero_prefix": 100}, "target": {"dtype": "f64", "shape": [1, 3, 16, 16], "fill": 1, "zero_prefix": 0}},
   "expected": {"spectral_angle_mapper": 0.24042176119937012}},
  {"metric": "ErrorRelativeGlobalDimensionlessSynthesis", "params": {},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 0.75, "zero_prefix": 100}, "target": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 1, "zero_prefix": 0}},
   "expected": {"error_relative_global_dimensionless_synthesis": 16.36900534356013}},
  {"metric": "RelativeAverageSpectralError", "params": {},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 0.75, "zero_prefix": 100}, "target": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 1, "zero_prefix": 0}},
   "expected": {"relative_average_spectral_error": 3710.0596909023234}},
  {"metric": "TotalVariation", "params": {},
   "inputs": {"img": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 1, "zero_prefix": 128}},
   "expected": {"total_variation": 16.0}},
  {"metric": "SpatialCorrelationCoefficient", "params": {},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 0.75, "zero_prefix": 100}, "target": {"dtype": "f64", "shape": [1, 1, 16, 16], "fill": 1, "zero_prefix": 128}},
   "expected": {"spatial_correlation_coefficient": -0.07966722253304472}},
  {"metric": "SpectralDistortionIndex", "params": {},
   "inputs": {"preds": {"dtype": "f64", "data": [[[[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9]],[[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0],[0.4,0.9,0.3,0.8,0.2,0.7,0.1,0.6,0.0,0.5,1.0]],[[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9]]]]}, "target": {"dtype": "f64", "data": [[[[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9]],[[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9]],[[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9],[0.1,0.4,0.7,1.0,0.2,0.5,0.8,0.0,0.3,0.6,0.9]]]]}},
   "expected": {"spectral_distortion_index": "0.617402314129184..."}},
  {"metric": "VisualInformationFidelity", "params": {},
   "inputs": {"preds": {"dtype": "f64", "shape": [1, 1, 41, 41], "fill": 0.75, "zero_prefix": 900}, "target": {"dtype": "f64", "shape": [1, 1, 41, 41], "fill": 1, "zero_prefix": 800}},
   "expected": {"visual_information_fidelity": "0.1831221448989..."}},
  {"metric": "RetrievalMAP", "params": {},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_average_precision": "~0.7917"}},
  {"metric": "RetrievalMRR", "params": {},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_reciprocal_rank": 0.75}},
  {"metric": "RetrievalNormalizedDCG", "params": {},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_normalized_dcg": "~0.8467"}},
  {"metric": "RetrievalPrecision", "params": {"top_k": 2},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_precision": 0.5}},
  {"metric": "RetrievalRecall", "params": {"top_k": 2},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_recall": 0.75}},
  {"metric": "RetrievalHitRate", "params": {"top_k": 2},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [true, false, false, false, true, false, true]}},
   "expected": {"retrieval_hit_rate": 0.5}},
  {"metric": "RetrievalFallOut", "params": {"top_k": 2},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_fall_out": 0.5}},
  {"metric": "RetrievalRPrecision", "params": {},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_r_precision": 0.75}},
  {"metric": "RetrievalAUROC", "params": {},
   "inputs": {"indexes": {"dtype": "i64", "data": [0, 0, 0, 1, 1, 1, 1]}, "preds": {"dtype": "f64", "data": [0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2]}, "target": {"dtype": "bool", "data": [false, false, true, false, true, false, true]}},
   "expected": {"retrieval_auroc": 0.75}},
  {"metric": "StatScores", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.9, 0.6, 0.4]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1]}},
   "expected": {"tp": 1, "fp": 1, "tn": 1, "fn": 1, "support": 2}},
  {"metric": "Specificity", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.9, 0.6, 0.4, 0.2]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1, 0]}},
   "expected": {"specificity": 0.6666666666666666}},
  {"metric": "Precision", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.9, 0.6, 0.4]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1]}},
   "expected": {"precision": 0.5}},
  {"metric": "FBetaScore", "params": {"task": "binary", "beta": 2.0},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.9, 0.6, 0.4]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1]}},
   "expected": {"fbeta_score": 0.5}},
  {"metric": "HammingDistance", "params": {"task": "multilabel", "num_labels": 3},
   "inputs": {"preds": {"dtype": "i64", "data": [[0, 1, 1], [1, 0, 1]]}, "target": {"dtype": "i64", "data": [[0, 1, 0], [1, 0, 1]]}},
   "expected": {"hamming_distance": 0.16666666666666663}},
  {"metric": "JaccardIndex", "params": {"task": "multiclass", "num_classes": 3},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 2, 1, 2]}, "target": {"dtype": "i64", "data": [0, 1, 1, 2]}},
   "expected": {"jaccard_index": 0.6666666666666666}},
  {"metric": "ExactMatch", "params": {"task": "multilabel", "num_labels": 3},
   "inputs": {"preds": {"dtype": "i64", "data": [[0, 1, 1], [1, 0, 1]]}, "target": {"dtype": "i64", "data": [[0, 1, 0], [1, 0, 1]]}},
   "expected": {"exact_match": 0.5}},
  {"metric": "MatthewsCorrCoef", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.9, 0.6, 0.4, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1, 1]}},
   "expected": {"matthews_corrcoef": 0.16666666666666666}},
  {"metric": "CohenKappa", "params": {"task": "multiclass", "num_classes": 3},
   "inputs": {"preds": {"dtype": "i64", "data": [0, 2, 1, 2]}, "target": {"dtype": "i64", "data": [0, 1, 1, 2]}},
   "expected": {"cohen_kappa": 0.6363636363636364}},
  {"metric": "CalibrationError", "params": {"task": "binary", "n_bins": 2},
   "inputs": {"preds": {"dtype": "f64", "data": [0.25, 0.75, 0.75, 0.25]}, "target": {"dtype": "i64", "data": [0, 1, 0, 1]}},
   "expected": {"calibration_error": 0.25}},
  {"metric": "PearsonCorrCoef", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"pearson_corrcoef": 0.9848696184482703}},
  {"metric": "SpearmanCorrCoef", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [1, 0, 2, 8]}},
   "expected": {"spearman_corrcoef": 0.8}},
  {"metric": "KendallRankCorrCoef", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"kendall_rank_corrcoef": 1.0}},
  {"metric": "ConcordanceCorrCoef", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"concordance_corrcoef": 0.9777347531461761}},
  {"metric": "ExplainedVariance", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"explained_variance": 0.9571734475374732}},
  {"metric": "RelativeSquaredError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [3, -0.5, 2, 7]}, "preds": {"dtype": "f64", "data": [2.5, 0, 2, 8]}},
   "expected": {"relative_squared_error": 0.05139186295503212}},
  {"metric": "MeanAbsolutePercentageError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [1, 10, 1e6]}, "preds": {"dtype": "f64", "data": [0.9, 15, 1.2e6]}},
   "expected": {"mean_absolute_percentage_error": 0.26666666666666666}},
  {"metric": "SymmetricMeanAbsolutePercentageError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [1, 10, 1e6]}, "preds": {"dtype": "f64", "data": [0.9, 15, 1.2e6]}},
   "expected": {"symmetric_mean_absolute_percentage_error": 0.22902711323763958}},
  {"metric": "WeightedMeanAbsolutePercentageError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [1, 10, 1e6]}, "preds": {"dtype": "f64", "data": [0.9, 15, 1.2e6]}},
   "expected": {"weighted_mean_absolute_percentage_error": 0.20000289996810036}},
  {"metric": "MeanSquaredLogError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [2.5, 5, 4, 8]}, "preds": {"dtype": "f64", "data": [3, 5, 2.5, 7]}},
   "expected": {"mean_squared_log_error": 0.03973012298459379}},
  {"metric": "LogCoshError", "params": {},
   "inputs": {"target": {"dtype": "f64", "data": [2.5, 5, 4, 8]}, "preds": {"dtype": "f64", "data": [3, 5, 2.5, 7]}},
   "expected": {"log_cosh_error": 0.3523338771137753}},
  {"metric": "TweedieDevianceScore", "params": {},
   "inputs": {"targets": {"dtype": "f64", "data": [1, 2, 3, 4]}, "preds": {"dtype": "f64", "data": [4, 3, 2, 1]}},
   "expected": {"tweedie_deviance_score": 5.0}},
  {"metric": "MinkowskiDistance", "params": {"p": 3},
   "inputs": {"targets": {"dtype": "f64", "data": [1, 2, 3, 4]}, "preds": {"dtype": "f64", "data": [4, 3, 2, 1]}},
   "expected": {"minkowski_distance": 3.825862365544778}},
  {"metric": "CosineSimilarity", "params": {"reduction": "mean"},
   "inputs": {"target": {"dtype": "f64", "data": [[1, 2, 3, 4], [1, 2, 3, 4]]}, "preds": {"dtype": "f64", "data": [[1, 2, 3, 4], [-1, -2, -3, -4]]}},
   "expected": {"cosine_similarity": 0.0}},
  {"metric": "KLDivergence", "params": {},
   "inputs": {"p": {"dtype": "f64", "data": [[0.36, 0.48, 0.16]]}, "q": {"dtype": "f64", "data": [[0.3333333333333333, 0.3333333333333333, 0.3333333333333333]]}},
   "expected": {"kl_divergence": 0.0852996013183706}},
  {"metric": "PrecisionRecallCurve", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"precision": [0.5, 0.6666666666666666, 0.5, 0.0, 1.0], "recall": [1.0, 1.0, 0.5, 0.0, 0.0], "thresholds": [0.1, 0.35, 0.4, 0.8]}},
  {"metric": "ROC", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"fpr": [0.0, 0.5, 0.5, 0.5, 1.0], "tpr": [0.0, 0.0, 0.5, 1.0, 1.0], "thresholds": [1.0, 0.8, 0.4, 0.35, 0.1]}},
  {"metric": "AUROC", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"auroc": 0.5}},
  {"metric": "PrecisionAtFixedRecall", "params": {"task": "binary", "min_recall": 0.5},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"precision": 0.6666666666666666, "threshold": 0.35}},
  {"metric": "RecallAtFixedPrecision", "params": {"task": "binary", "min_precision": 0.5},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"recall": 1.0, "threshold": 0.35}},
  {"metric": "SensitivityAtSpecificity", "params": {"task": "binary", "min_specificity": 0.5},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"sensitivity": 1.0, "threshold": 0.35}},
  {"metric": "SpecificityAtSensitivity", "params": {"task": "binary", "min_sensitivity": 0.5},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"specificity": 0.5, "threshold": 0.4}},
  {"metric": "LogAUC", "params": {"task": "binary", "fpr_range": [0.1, 0.9]},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"logauc": 0.2675132396410364}},
  {"metric": "AveragePrecision", "params": {"task": "binary"},
   "inputs": {"preds": {"dtype": "f64", "data": [0.1, 0.4, 0.35, 0.8]}, "target": {"dtype": "i64", "data": [0, 1, 1, 0]}},
   "expected": {"average_precision": 0.5833333333333333}}
])json";

const Json& examples() {
  static const Json j = Json::parse(kExamples);
  return j;
}

std::vector<std::int64_t> shape_of(const Json& nested) {
  std::vector<std::int64_t> shape;
  for (const Json* j = &nested; j->is_array(); j = &j->at(0)) {
    shape.push_back(static_cast<std::int64_t>(j->size()));
    if (j->empty()) break;
  }
  return shape;
}

void flatten(const Json& j, std::vector<double>& out) {
  if (!j.is_array()) {
    out.push_back(j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>());
    return;
  }
  for (const auto& e : j) flatten(e, out);
}

template <class T>
Tensor typed(const std::vector<double>& values, const std::vector<std::int64_t>& shape) {
  std::vector<T> v;
  for (const double x : values) v.push_back(static_cast<T>(x));
  return Tensor::from_vector<T>(std::move(v), shape);
}

Tensor make_tensor(const Json& spec) {
  std::vector<double> values;
  std::vector<std::int64_t> shape;
  if (spec.contains("data")) {
    flatten(spec.at("data"), values);
    shape = shape_of(spec.at("data"));
  } else {
    shape = spec.at("shape").get<std::vector<std::int64_t>>();
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    values.assign(static_cast<std::size_t>(n), spec.at("fill").get<double>());
    const auto zeros = spec.value("zero_prefix", std::int64_t{0});
    for (std::int64_t i = 0; i < zeros; ++i) values[static_cast<std::size_t>(i)] = 0.0;
  }
  const std::string dtype = spec.at("dtype").get<std::string>();
  if (dtype == "f64") return typed<double>(values, shape);
  if (dtype == "f32") return typed<float>(values, shape);
  if (dtype == "i64") return typed<std::int64_t>(values, shape);
  if (dtype == "bool") {
    std::vector<bool> v;
    for (const double x : values) v.push_back(x != 0.0);
    return Tensor::from_vector<bool>(v, shape);
  }
  throw std::runtime_error("unknown dtype " + dtype);
}

Batch make_batch(const Json& inputs) {
  Batch b;
  for (const auto& [field, spec] : inputs.items()) {
    if (spec.contains("ragged")) {
      Batch::Ragged r;
      for (const auto& t : spec.at("ragged")) r.push_back(make_tensor(t));
      b.set_ragged(field, std::move(r));
    } else if (spec.contains("npy")) {
      b.set(field, load_npy(source_path(spec.at("npy").get<std::string>())));
    } else if (spec.contains("text")) {
      b.set_text(field, Text::from_strings(spec.at("text").get<std::vector<std::string>>()));
    } else if (spec.contains("text_lists")) {
      b.set_text(field, Text::from_lists(
                            spec.at("text_lists").get<std::vector<std::vector<std::string>>>()));
    } else {
      b.set(field, make_tensor(spec));
    }
  }
  return b;
}

/// The number of digits after the point in a decimal written as text ("0.6667" -> 4).
int decimals(const std::string& text) {
  const auto dot = text.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
}

/// Expects `got` to match the documented `want` (see the top of this file).
void expect_documented(const Value& got, const Json& want, const std::string& where) {
  if (want.is_object()) {
    ASSERT_TRUE(got.is_map()) << where << ": expected a map, got " << got.to_json();
    for (const auto& [key, v] : want.items()) {
      const Value* g = nullptr;
      for (const auto& [k, x] : got.as_map())
        if (k == key) g = &x;
      ASSERT_NE(g, nullptr) << where << ": no key '" << key << "' in " << got.to_json();
      expect_documented(*g, v, where + "." + key);
    }
  } else if (want.is_array()) {
    ASSERT_TRUE(got.is_array()) << where << ": expected an array, got " << got.to_json();
    ASSERT_EQ(got.size(), want.size()) << where << ": " << got.to_json();
    for (std::size_t i = 0; i < want.size(); ++i)
      expect_documented(got.as_array()[i], want[i], where + "[" + std::to_string(i) + "]");
  } else if (want.is_number_integer()) {
    ASSERT_TRUE(got.is_int()) << where << ": expected the integer " << want.dump() << ", got "
                              << got.to_json();
    EXPECT_EQ(got.as_int(), want.get<std::int64_t>()) << where;
  } else if (want.is_number()) {
    ASSERT_TRUE(got.is_number()) << where << ": expected a number, got " << got.to_json();
    const double w = want.get<double>();
    EXPECT_LE(std::abs(got.as_double() - w), 1e-15 * std::abs(w))
        << where << ": documented " << want.dump() << ", got " << got.to_json();
  } else {
    // "~x": rounded to its last digit; "x...": cut short after its last digit.
    std::string text = want.get<std::string>();
    const bool rounded = text.starts_with("~");
    const bool cut = text.ends_with("...");
    ASSERT_TRUE(rounded != cut) << where << ": bad expected value '" << text << "'";
    text = rounded ? text.substr(1) : text.substr(0, text.size() - 3);
    ASSERT_TRUE(got.is_number()) << where << ": expected a number, got " << got.to_json();
    const double unit = std::pow(10.0, -decimals(text));
    EXPECT_LE(std::abs(got.as_double() - std::stod(text)), (rounded ? 0.5 : 1.0) * unit * 1.0000001)
        << where << ": documented " << want.get<std::string>() << ", got " << got.to_json();
  }
}

/// The metrics whose plugin source has an `// Example` line in its comments: the name is the
/// first word of the source's first line ("// ConfusionMatrix: the K x K counts ...").
std::set<std::string> documented_metrics() {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(source_path("plugins"))) {
    if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    std::string first, line;
    std::getline(in, first);
    bool has_example = false;
    while (std::getline(in, line)) has_example = has_example || line.starts_with("// Example");
    if (!has_example) continue;
    EXPECT_TRUE(first.starts_with("// ")) << e.path() << ": the first line names no metric";
    const std::string rest = first.substr(3);
    names.insert(rest.substr(0, rest.find_first_of(" :")));
  }
  return names;
}

// Expected: the table names exactly the metrics whose sources document an example (34 when this
// test was written), and each is a metric the plugins register.
TEST(DocExamples, TableCoversEveryDocumentedMetric) {
  const std::set<std::string> documented = documented_metrics();
  std::set<std::string> tabled;
  for (const auto& c : examples()) tabled.insert(c.at("metric").get<std::string>());
  for (const auto& name : documented)
    EXPECT_TRUE(tabled.count(name)) << name << " documents an `// Example:` that this table lacks";
  for (const auto& name : tabled) {
    EXPECT_TRUE(documented.count(name)) << name << " is in the table but documents no example";
    EXPECT_NE(registry().find(ComponentKind::Metric, name), nullptr) << name;
  }
  EXPECT_GE(documented.size(), 34u);
}

class DocExample : public ::testing::TestWithParam<std::size_t> {};

// Expected: the result each metric's `// Example:` comment documents.
TEST_P(DocExample, GivesTheDocumentedResult) {
  const Json& c = examples().at(GetParam());
  const std::string type = c.at("metric").get<std::string>();
  // A parameter naming a file (`*_file`) is a path in the source tree.
  Value::Map params = to_map(c.at("params"));
  for (auto& [k, v] : params)
    if (k.ends_with("_file") && v.is_string()) v = Value(source_path(v.as_string()).string());
  const Value got = run_single(type, params, make_batch(c.at("inputs")));
  expect_documented(got, c.at("expected"), type + " " + c.at("params").dump());
}

std::vector<std::size_t> example_indices() {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < examples().size(); ++i) out.push_back(i);
  return out;
}

std::string example_name(const ::testing::TestParamInfo<std::size_t>& info) {
  // The metric and the example's number among the metric's examples: Accuracy_0, Accuracy_1.
  const std::string type = examples().at(info.param).at("metric").get<std::string>();
  std::size_t nth = 0;
  for (std::size_t i = 0; i < info.param; ++i)
    nth += examples().at(i).at("metric").get<std::string>() == type;
  return type + "_" + std::to_string(nth);
}

INSTANTIATE_TEST_SUITE_P(Metrics, DocExample, ::testing::ValuesIn(example_indices()), example_name);

}  // namespace
}  // namespace tally::test

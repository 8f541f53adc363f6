// COCO evaluation on rank 0 (accumulate): every rank's records checked and ordered by image id,
// the categories chosen, each category's detections gathered, then pycocotools 2.0.11's
// COCOeval.accumulate per category, operation for operation where the floating-point result
// depends on it (recall and precision divisions). See coco_stages.hpp.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "coco_stages.hpp"
#include "tally/sdk/error.hpp"

namespace tally::detection::coco {

std::vector<double> rec_thrs() {
  std::vector<double> r(101);
  const double step = (1.0 - 0.0) / 100;
  for (int i = 0; i < 101; ++i) r[i] = static_cast<double>(i) * step + 0.0;
  r[100] = 1.0;
  return r;
}

namespace {

/// The records arrive from other ranks: every count and size is checked before it is used.
/// Sets det_offsets (per group its first detection, then the total).
void check_records(const EvalConfig& cfg, const std::vector<std::int64_t>& ids, const Records& rec,
                   std::vector<std::size_t>& det_offsets) {
  const std::size_t W = cfg.words(), A = cfg.num_areas();
  if (rec.img_groups.size() != ids.size())
    throw RuntimeError("COCO records hold " + std::to_string(rec.img_groups.size()) +
                       " images, expected " + std::to_string(ids.size()));
  if (rec.group_cat.size() != rec.group_ndets.size() ||
      rec.group_gts.size() != rec.group_ndets.size() * (A + 1) ||
      rec.group_freq.size() != (cfg.federated ? rec.group_ndets.size() : 0))
    throw RuntimeError("COCO records are inconsistent");
  det_offsets.assign(rec.group_ndets.size() + 1, 0);
  for (std::size_t g = 0; g < rec.group_ndets.size(); ++g) {
    if (rec.group_ndets[g] < 0) throw RuntimeError("COCO records are inconsistent");
    det_offsets[g + 1] = det_offsets[g] + static_cast<std::size_t>(rec.group_ndets[g]);
  }
  if (det_offsets.back() != rec.score.size() || rec.bits.size() != rec.score.size() * W)
    throw RuntimeError("COCO records are inconsistent");
  const bool confusion = cfg.confusion_iou >= 0;
  if (rec.img_conf.size() != (confusion ? ids.size() : 0) || rec.conf_pairs.size() % 2 != 0)
    throw RuntimeError("COCO records are inconsistent");
  const std::size_t n_tide = rec.tide_cls.size();
  if (rec.img_tide.size() != (cfg.tide ? ids.size() : 0) || rec.tide_code.size() != n_tide ||
      rec.tide_fix.size() != n_tide || rec.tide_score.size() != n_tide)
    throw RuntimeError("COCO records are inconsistent");
}

}  // namespace

std::vector<ImageRef> image_refs(const EvalConfig& cfg, const std::vector<std::int64_t>& ids,
                                 const Records& rec, std::vector<std::size_t>& det_offsets) {
  check_records(cfg, ids, rec, det_offsets);
  const bool confusion = cfg.confusion_iou >= 0;
  const std::size_t n_tide = rec.tide_cls.size();
  std::vector<ImageRef> images;
  images.reserve(ids.size());
  std::size_t groups = 0, events = 0, tide_events = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (rec.img_groups[i] < 0 ||
        static_cast<std::size_t>(rec.img_groups[i]) > rec.group_ndets.size() - groups)
      throw RuntimeError("COCO records are inconsistent");
    const auto n = static_cast<std::size_t>(rec.img_groups[i]);
    images.push_back({ids[i], groups, groups + n});
    groups += n;
    if (confusion) {
      if (rec.img_conf[i] < 0 ||
          static_cast<std::size_t>(rec.img_conf[i]) > rec.conf_pairs.size() / 2 - events)
        throw RuntimeError("COCO records are inconsistent");
      images.back().conf_begin = events;
      events += static_cast<std::size_t>(rec.img_conf[i]);
      images.back().conf_end = events;
    }
    if (cfg.tide) {
      if (rec.img_tide[i] < 0 || static_cast<std::size_t>(rec.img_tide[i]) > n_tide - tide_events)
        throw RuntimeError("COCO records are inconsistent");
      images.back().tide_begin = tide_events;
      tide_events += static_cast<std::size_t>(rec.img_tide[i]);
      images.back().tide_end = tide_events;
    }
  }
  if (groups != rec.group_ndets.size() || events != rec.conf_pairs.size() / 2 ||
      tide_events != n_tide)
    throw RuntimeError("COCO records are inconsistent");
  // Images in ascending id order, the first occurrence of an id kept.
  std::stable_sort(images.begin(), images.end(),
                   [](const ImageRef& a, const ImageRef& b) { return a.id < b.id; });
  images.erase(std::unique(images.begin(), images.end(),
                           [](const ImageRef& a, const ImageRef& b) { return a.id == b.id; }),
               images.end());
  if (!cfg.img_filter.empty())
    std::erase_if(images, [&](const ImageRef& im) {
      return !std::binary_search(cfg.img_filter.begin(), cfg.img_filter.end(), im.id);
    });
  return images;
}

void choose_categories(const EvalConfig& cfg, const std::vector<ImageRef>& images,
                       const Records& rec, const std::vector<std::int64_t>& cat_ids_param,
                       Summary& out) {
  const std::size_t A = cfg.num_areas();
  if (cfg.use_cats) {
    // Every category with a detection or a ground truth that takes part (eval_arrays'
    // seen_cat_ids: torchmetrics' MeanAveragePrecision lays out its classes over them).
    std::unordered_set<std::int64_t> seen;
    for (const auto& im : images)
      for (std::size_t g = im.group_begin; g < im.group_end; ++g)
        if (seen.insert(rec.group_cat[g]).second) out.seen_cat_ids.push_back(rec.group_cat[g]);
    std::sort(out.seen_cat_ids.begin(), out.seen_cat_ids.end());
  }
  if (!cfg.use_cats) {
    out.cat_ids = {-1};
  } else if (!cat_ids_param.empty()) {
    out.cat_ids = cat_ids_param;
    std::sort(out.cat_ids.begin(), out.cat_ids.end());
    out.cat_ids.erase(std::unique(out.cat_ids.begin(), out.cat_ids.end()), out.cat_ids.end());
  } else {
    // The distinct categories first (a group per category and image: sorting them all would
    // sort a million entries at Objects365's size), then sorted.
    std::unordered_set<std::int64_t> seen;
    for (const auto& im : images) {
      for (std::size_t g = im.group_begin; g < im.group_end; ++g)
        if (rec.group_gts[g * (A + 1)] > 0 && seen.insert(rec.group_cat[g]).second)
          out.cat_ids.push_back(rec.group_cat[g]);
    }
    std::sort(out.cat_ids.begin(), out.cat_ids.end());
    out.cat_ids.erase(std::unique(out.cat_ids.begin(), out.cat_ids.end()), out.cat_ids.end());
  }
  if (!cfg.federated) return;
  // Each category's frequency, as its ground truth gives it.
  const std::size_t K = out.cat_ids.size();
  std::unordered_map<std::int64_t, std::size_t> cat_index;
  for (std::size_t k = 0; k < K; ++k) cat_index.emplace(out.cat_ids[k], k);
  out.cat_freq.assign(K, -1);
  for (const auto& im : images)
    for (std::size_t g = im.group_begin; g < im.group_end; ++g) {
      const auto it = cat_index.find(rec.group_cat[g]);
      const int f = rec.group_freq[g];
      if (it == cat_index.end() || f < 0) continue;
      int& have = out.cat_freq[it->second];
      if (have >= 0 && have != f)
        throw InputError("gt_frequency: category " + std::to_string(rec.group_cat[g]) +
                         " is given two frequencies (" + std::string(1, "rcf"[have]) + " and " +
                         std::string(1, "rcf"[f > 2 ? 2 : f]) + ")");
      have = f;
    }
}

FlatDets flatten(const EvalConfig& cfg, const std::vector<ImageRef>& images, const Records& rec,
                 const std::vector<std::size_t>& det_offsets, const Summary& out) {
  // Two passes over the records front to back (count, then fill); reading each category's
  // groups where they lie would jump through all the records once per category.
  const std::size_t T = cfg.iou_thrs.size(), W = cfg.words(), A = cfg.num_areas();
  const std::size_t K = out.cat_ids.size();
  std::unordered_map<std::int64_t, std::size_t> cat_index;
  for (std::size_t k = 0; k < K; ++k) cat_index.emplace(out.cat_ids[k], k);
  const std::uint32_t tmask = T >= 32 ? ~std::uint32_t{0} : ((std::uint32_t{1} << T) - 1);
  const auto field = [&](const std::uint64_t* w, std::size_t bit) {
    std::uint64_t v = w[bit / 64] >> (bit % 64);
    if (bit % 64 != 0 && bit / 64 + 1 < W) v |= w[bit / 64 + 1] << (64 - bit % 64);
    return static_cast<std::uint32_t>(v) & tmask;
  };
  FlatDets flat;
  std::vector<std::int32_t> group_k;  // per group of `images`, in order: its category index
  std::vector<std::size_t>& cat_begin = flat.cat_begin;
  cat_begin.assign(K + 1, 0);
  flat.npig_all.assign(K * A, 0);
  for (const auto& im : images) {
    for (std::size_t g = im.group_begin; g < im.group_end; ++g) {
      const auto it = cat_index.find(cfg.use_cats ? rec.group_cat[g] : -1);
      group_k.push_back(it == cat_index.end() ? -1 : static_cast<std::int32_t>(it->second));
      if (it == cat_index.end()) continue;
      cat_begin[it->second + 1] += static_cast<std::size_t>(rec.group_ndets[g]);
      for (std::size_t a = 0; a < A; ++a)
        flat.npig_all[it->second * A + a] += rec.group_gts[g * (A + 1) + 1 + a];
    }
  }
  for (std::size_t k = 0; k < K; ++k) cat_begin[k + 1] += cat_begin[k];
  const std::size_t n_dets = cat_begin[K];
  flat.score.resize(n_dets);
  flat.rank.resize(n_dets);
  flat.masks.resize(n_dets * 2 * A);
  std::vector<std::size_t> at(cat_begin.begin(), cat_begin.end() - 1);
  std::size_t gi = 0;
  for (const auto& im : images) {
    for (std::size_t g = im.group_begin; g < im.group_end; ++g, ++gi) {
      if (group_k[gi] < 0) continue;
      std::size_t& j = at[static_cast<std::size_t>(group_k[gi])];
      const auto n = static_cast<std::size_t>(rec.group_ndets[g]);
      for (std::size_t i = 0; i < n; ++i, ++j) {
        const std::size_t d = det_offsets[g] + i;
        const std::uint64_t* w = &rec.bits[d * W];
        flat.score[j] = rec.score[d];
        flat.rank[j] = static_cast<std::uint32_t>(i);
        for (std::size_t a = 0; a < A; ++a) {
          flat.masks[j * 2 * A + 2 * a] = field(w, a * T);
          flat.masks[j * 2 * A + 2 * a + 1] = field(w, A * T + a * T);
        }
      }
    }
  }
  return flat;
}

void init_arrays(const EvalConfig& cfg, const std::vector<double>& recs, Summary& out) {
  // precision[t][r][k][a][m], recall[t][k][a][m] as pycocotools lays them out.
  const std::size_t T = cfg.iou_thrs.size(), M = cfg.max_dets.size(), A = cfg.num_areas();
  const std::size_t R = recs.size(), K = out.cat_ids.size();
  out.T = T;
  out.R = R;
  out.K = K;
  out.A = A;
  out.M = M;
  out.iou_thrs = cfg.iou_thrs;
  out.rec_thrs = recs;
  out.max_dets = cfg.max_dets;
  out.precision.assign(T * R * K * A * M, -1.0);
  if (cfg.keep_scores) out.scores.assign(T * R * K * A * M, -1.0);
  out.recall.assign(T * K * A * M, -1.0);
}

namespace {

/// A category's detections sorted by score (np.argsort(-dtScores, kind='mergesort') over the
/// detections concatenated in image order: stable, so equal scores keep that order), with the
/// rank of each in its image and its masks per area range (tpm, igm: [a * n_all + i]).
struct SortedDets {
  struct Key {
    double score;
    std::uint32_t index;
  };
  std::size_t n_all = 0;
  std::vector<Key> keys;
  std::vector<std::uint32_t> det_rank, tpm, igm;
};

SortedDets sort_category(const EvalConfig& cfg, const FlatDets& flat, std::size_t k) {
  using Key = SortedDets::Key;
  const std::size_t A = cfg.num_areas();
  const std::size_t base = flat.cat_begin[k], n_all = flat.cat_begin[k + 1] - base;
  SortedDets s;
  s.n_all = n_all;
  std::vector<Key>& keys = s.keys;
  keys.resize(n_all);
  for (std::size_t j = 0; j < n_all; ++j)
    keys[j] = {flat.score[base + j], static_cast<std::uint32_t>(j)};
  std::stable_sort(keys.begin(), keys.end(),
                   [](const Key& x, const Key& y) { return x.score > y.score; });
  s.det_rank.resize(n_all);
  s.tpm.resize(A * n_all);
  s.igm.resize(A * n_all);
  for (std::size_t i = 0; i < n_all; ++i) {
    const std::size_t src = base + keys[i].index;
    s.det_rank[i] = flat.rank[src];
    for (std::size_t a = 0; a < A; ++a) {
      s.tpm[a * n_all + i] = flat.masks[src * 2 * A + 2 * a];
      s.igm[a * n_all + i] = flat.masks[src * 2 * A + 2 * a + 1];
    }
  }
  return s;
}

/// The values at maxDet index m are those at m_all (a maxDet that already keeps every one of
/// the category's detections).
void copy_max_det(const EvalConfig& cfg, std::size_t k, std::size_t m, std::size_t m_all,
                  Summary& out) {
  const std::size_t T = cfg.iou_thrs.size(), A = cfg.num_areas(), R = out.R;
  for (std::size_t a = 0; a < A; ++a)
    for (std::size_t t = 0; t < T; ++t) {
      out.rec(t, k, a, m) = out.rec(t, k, a, m_all);
      for (std::size_t r = 0; r < R; ++r) out.prec(t, r, k, a, m) = out.prec(t, r, k, a, m_all);
      if (cfg.keep_scores)
        for (std::size_t r = 0; r < R; ++r)
          out.score_at(t, r, k, a, m) = out.score_at(t, r, k, a, m_all);
    }
}

/// One pass over a category's detections at one (maxDet, area range): per threshold t, at each
/// true positive the false positives before it (ev[t]) and its score (ev_score[t]); `pos` the
/// detections kept, `first_score` the first one's.
struct Events {
  std::vector<std::vector<std::int64_t>> ev;
  std::vector<std::vector<double>> ev_score;  // keep_scores only
  std::vector<double> ev_pr;                  // precision at each event
  std::int64_t pos = 0;
  double first_score = 0;
};

void count_events(const EvalConfig& cfg, const SortedDets& s, std::size_t a, std::uint64_t max_det,
                  Events& evs) {
  const std::size_t T = cfg.iou_thrs.size(), n_all = s.n_all;
  const std::uint32_t tmask = T >= 32 ? ~std::uint32_t{0} : ((std::uint32_t{1} << T) - 1);
  const auto& keys = s.keys;
  const auto& det_rank = s.det_rank;
  auto& ev = evs.ev;
  auto& ev_score = evs.ev_score;
  // data() + offset, not &v[offset]: v is empty when the category has no detections.
  const std::uint32_t* tps = s.tpm.data() + a * n_all;
  const std::uint32_t* igs = s.igm.data() + a * n_all;
  std::array<std::int64_t, 32> tp_cnt{}, ig_cnt{};
  std::int64_t pos = 0, full_ig = 0;
  double first_score = 0;  // the first detection's (true positive, false or ignored)
  for (auto& e : ev) e.clear();
  for (auto& e : ev_score) e.clear();
  for (std::size_t i = 0; i < n_all; ++i) {
    if (det_rank[i] >= max_det) continue;
    if (pos == 0) first_score = keys[i].score;
    const std::uint32_t tm = tps[i], im = igs[i];
    if ((tm | im) != 0) {
      if (tm == 0 && im == tmask) {
        ++full_ig;
      } else {
        for (std::uint32_t b = im & ~tm; b != 0; b &= b - 1) ++ig_cnt[std::countr_zero(b)];
        for (std::uint32_t b = tm; b != 0; b &= b - 1) {
          const int t = std::countr_zero(b);
          ev[static_cast<std::size_t>(t)].push_back(pos - tp_cnt[t] - ig_cnt[t] - full_ig);
          if (cfg.keep_scores) ev_score[static_cast<std::size_t>(t)].push_back(keys[i].score);
          ++tp_cnt[t];
        }
      }
    }
    ++pos;
  }
  evs.pos = pos;
  evs.first_score = first_score;
}

/// Recall, precision (and scores) at (k, a, m) from the events, for every threshold.
void precision_recall(const EvalConfig& cfg, Events& evs, double np, std::size_t k, std::size_t a,
                      std::size_t m, Summary& out) {
  const std::size_t T = cfg.iou_thrs.size(), R = out.R;
  const std::vector<double>& recs = out.rec_thrs;
  const double eps = std::nextafter(1.0, 2.0) - 1.0;  // np.spacing(1)
  std::vector<double>& ev_pr = evs.ev_pr;
  const auto nd = static_cast<std::size_t>(evs.pos);
  const double first_score = evs.first_score;
  for (std::size_t t = 0; t < T; ++t) {
    const std::vector<std::int64_t>& ev_fp = evs.ev[t];
    const std::size_t ntp_count = ev_fp.size();
    const std::size_t ntp = ntp_count;
    out.rec(t, k, a, m) = nd ? static_cast<double>(ntp) / np : 0.0;
    ev_pr.resize(ntp);
    for (std::size_t e = 0; e < ntp; ++e) {
      const auto tpf = static_cast<double>(e + 1), fpf = static_cast<double>(ev_fp[e]);
      ev_pr[e] = tpf / (fpf + tpf + eps);
    }
    for (std::size_t e = ntp; e > 1; --e)
      if (ev_pr[e - 1] > ev_pr[e - 2]) ev_pr[e - 2] = ev_pr[e - 1];
    std::size_t e = 0;  // events before the first with (e + 1) / np >= threshold
    for (std::size_t r = 0; r < R; ++r) {
      while (e < ntp && static_cast<double>(e + 1) / np < recs[r]) ++e;
      out.prec(t, r, k, a, m) = e < ntp ? ev_pr[e] : 0.0;
      // eval['scores']: the score of the detection the precision is read at, 0 past the
      // last true positive (pycocotools leaves its zeros there).
      // Recall 0 is read at the first detection whatever it is (searchsorted finds rc >= 0
      // there), the others at a true positive.
      if (cfg.keep_scores)
        out.score_at(t, r, k, a, m) = recs[r] <= 0 && nd > 0 ? first_score
                                      : e < ntp              ? evs.ev_score[t][e]
                                                             : 0.0;
    }
  }
}

}  // namespace

void accumulate_category(const EvalConfig& cfg, const FlatDets& flat, std::size_t k, Summary& out) {
  const std::size_t T = cfg.iou_thrs.size(), M = cfg.max_dets.size(), A = cfg.num_areas();
  // The category's detections in image order (reading the records front to back): score,
  // rank in its image, and per area range a T-bit true-positive mask and a T-bit ignore mask.
  const std::int64_t* npig = flat.npig_all.data() + k * A;
  const SortedDets s = sort_category(cfg, flat, k);
  // pycocotools builds rc and pr at every detection, makes pr monotone from the right and reads
  // it at the first index where rc >= each recall threshold. That index is always a true
  // positive (the m-th, for the least m with m / npig >= threshold; the first detection for
  // threshold 0 holds pr 0 or is the first true positive), and between true positives pr only
  // falls, so the monotone pr there is the running maximum over later true positives. The same
  // doubles, computed at the true positives alone.
  // Per (maxDet, area range) one pass over the detections, every threshold at once: the false
  // positives before a detection at threshold t are the detections before it less its true
  // positives and ignored ones at t, so only true positives and ignored detections are counted
  // (a detection ignored at every threshold, the common case outside the area range, once).
  Events evs;
  evs.ev.resize(T);
  evs.ev_score.resize(cfg.keep_scores ? T : 0);
  // Every maxDet above the category's largest rank in a group keeps every detection: those
  // give the same values, computed once (maxDets ascend).
  std::uint64_t ranks = 0;
  for (const std::uint32_t r : s.det_rank) ranks = std::max<std::uint64_t>(ranks, r + 1ULL);
  std::size_t m_all = M;  // the first maxDet that keeps every detection
  for (std::size_t m = 0; m < M; ++m) {
    const auto max_det = static_cast<std::uint64_t>(cfg.max_dets[m]);
    if (max_det >= ranks && m_all < m) {
      copy_max_det(cfg, k, m, m_all, out);
      continue;
    }
    if (max_det >= ranks) m_all = m;
    for (std::size_t a = 0; a < A; ++a) {
      if (npig[a] == 0) continue;
      const auto np = static_cast<double>(npig[a]);
      count_events(cfg, s, a, max_det, evs);
      precision_recall(cfg, evs, np, k, a, m, out);
    }
  }
}

}  // namespace tally::detection::coco

// F1Score: micro and/or macro F1 over element-wise integer labels (token labels, per-sample label
// sequences), restricted to cared classes or excluding ignored ones, as mmeval's F1Score.
//
// Formula. Every element pairs a prediction p with a ground truth g (both integers < num_classes;
// negative values are no class). For each cared class c:
//   TP_c = #{p == c and g == c},  FP_c = #{p == c and g != c},  FN_c = #{g == c and p != c}
//   precision = TP / max(TP + FP, 1e-8),  recall = TP / max(TP + FN, 1e-8)
//   F1 = 2 precision recall / max(precision + recall, 1e-8)
//   macro_f1: the mean of F1_c over the cared classes;
//   micro_f1: F1 of the counts summed over the cared classes.
// Cared classes: cared_classes, or all of [0, num_classes) but ignored_classes, or all.
//
// Reference: mmeval.metrics.F1Score(num_classes, mode, cared_classes, ignored_classes) on the
// per-sample arrays (same formula, same keys macro_f1 / micro_f1, fractions in both), and
// sklearn.metrics.f1_score(g, p, labels=cared, average='macro' | 'micro', zero_division=0) on
// the flattened arrays.
//
// Example (mmeval's docstring): pred_labels [0, 1, 2], gt_labels [0, 1, 4], num_classes 5,
// mode [macro, micro] -> {macro_f1: 0.4, micro_f1: 0.666...}
//
// State: int64 TP, FP, FN per class and the sample count, all summed across ranks (exact on any
// number of ranks).
#include <algorithm>
#include <string>
#include <vector>

#include "common.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/state.hpp"
#include "tm_core.hpp"
#include "tm_rates.hpp"

namespace tally::classification {
namespace {

struct F1State {
  PackedVector<std::int64_t> tp, fp, fn;  // [num_classes]
  std::int64_t n = 0;
  TALLY_STATE(sum(tp), sum(fp), sum(fn), sum(n))
};

class F1Score final : public TypedMetric<F1State> {
 public:
  explicit F1Score(const Params& p) : check_(p.owner_or("F1Score")) {
    if (p.has("num_labels")) tm::check_class_counts(p);  // bounded whenever given
    if (!p.has("num_classes")) p.fail("num_classes", "is required (without task)");
    num_classes_ = p.get_size("num_classes");
    for (const char* name : {"num_labels", "ignore_index"})
      if (p.has(name)) p.fail(name, "is a parameter of torchmetrics' F1Score: give task too");
    for (const auto& m : p.get_string_list("mode")) {
      if (m == "macro")
        macro_ = true;
      else if (m == "micro")
        micro_ = true;
      else
        p.fail("mode", "must be micro, macro or a list of them; got '" + m + "'");
    }
    if (!macro_ && !micro_) p.fail("mode", "must name micro or macro");
    const auto cared = p.get_int_list("cared_classes");
    const auto ignored = p.get_int_list("ignored_classes");
    if (!cared.empty() && !ignored.empty())
      p.fail("ignored_classes", "cannot be given together with cared_classes");
    for (const auto* list : {&cared, &ignored})
      for (const std::int64_t c : *list)
        if (c < 0 || c >= num_classes_)
          p.fail(
              list == &cared ? "cared_classes" : "ignored_classes",
              "holds " + std::to_string(c) + ", outside [0, " + std::to_string(num_classes_) + ")");
    cared_.assign(static_cast<std::size_t>(num_classes_), cared.empty());
    for (const std::int64_t c : cared) cared_[static_cast<std::size_t>(c)] = true;
    for (const std::int64_t c : ignored) cared_[static_cast<std::size_t>(c)] = false;
    if (std::none_of(cared_.begin(), cared_.end(), [](bool b) { return b; }))
      p.fail("ignored_classes", "leaves no class to evaluate");
  }

 protected:
  F1State initial_state() const override {
    F1State s;
    s.tp.assign(static_cast<std::size_t>(num_classes_), 0);
    s.fp.assign(static_cast<std::size_t>(num_classes_), 0);
    s.fn.assign(static_cast<std::size_t>(num_classes_), 0);
    return s;
  }

  void update(F1State& state, const Batch& batch) override {
    if (batch.fields().empty()) return;
    const bool ragged = batch.has(kPredLabels) && batch.is_ragged(kPredLabels);
    if (ragged != (batch.has(kGtLabels) && batch.is_ragged(kGtLabels)) && batch.has(kGtLabels) &&
        batch.has(kPredLabels))
      check_.fail(kPredLabels, std::string("is ") + (ragged ? "ragged" : "dense") + " but '" +
                                   kGtLabels + "' is " + (ragged ? "dense" : "ragged") +
                                   ": give both as dense [N] / [N, L] or both as per-sample lists");
    if (ragged) {
      const auto& pred = batch.ragged(kPredLabels);
      const auto& gt = check_ragged(batch);
      for (std::size_t i = 0; i < pred.size(); ++i) {
        const std::int64_t sample = state.n + static_cast<std::int64_t>(i);
        const Tensor& p = element_tensor(pred[i], kPredLabels, sample);
        const Tensor& g = element_tensor(gt[i], kGtLabels, sample);
        if (p.numel() != g.numel())
          check_.fail(kPredLabels, "sample " + std::to_string(sample) + ": has " +
                                       std::to_string(p.numel()) + " labels, '" + kGtLabels +
                                       "' has " + std::to_string(g.numel()));
        accumulate(state, p, g, sample, 1);
      }
      state.n += static_cast<std::int64_t>(pred.size());
      return;
    }
    const Tensor& p = check_.tensor(batch, kPredLabels);
    const Tensor& g = check_.tensor(batch, kGtLabels);
    for (const auto& [t, f] : {std::pair{&p, kPredLabels}, std::pair{&g, kGtLabels}}) {
      if (!is_integral(t->dtype()) || t->dim() < 1 || t->dim() > 2)
        check_.fail(f, "must hold integer labels [N] or [N, L], got " + t->describe());
    }
    if (p.shape() != g.shape())
      check_.fail(kPredLabels, "has shape " + p.describe() + ", '" + kGtLabels + "' has " +
                                   g.describe() + ": expected the same shape");
    const std::int64_t n = p.size(0);
    accumulate(state, p, g, state.n, n == 0 ? 1 : p.numel() / n);
    state.n += n;
  }

  Value compute(const F1State& all) const override {
    const auto c = static_cast<std::size_t>(num_classes_);
    if (all.tp.size() != c || all.fp.size() != c || all.fn.size() != c)
      check_.fail_runtime(std::string("the state is inconsistent"));  // another config's
    if (all.n == 0) check_.fail("no samples");
    const auto &tp = all.tp, &fp = all.fp, &fn = all.fn;
    Value out = Value::map();
    if (macro_) {
      std::vector<double> f1;
      for (std::size_t k = 0; k < c; ++k)
        if (cared_[k]) f1.push_back(f1_of(tp[k], fp[k], fn[k]));
      double sum = 0;
      for (double v : f1) sum += v;
      out.set("macro_f1", sum / static_cast<double>(f1.size()));
    }
    if (micro_) {
      std::int64_t t = 0, f = 0, m = 0;
      for (std::size_t k = 0; k < c; ++k) {
        if (!cared_[k]) continue;
        t += tp[k];
        f += fp[k];
        m += fn[k];
      }
      out.set("micro_f1", f1_of(t, f, m));
    }
    return out;
  }

 private:
  // mmeval's _compute_f1, on counts.
  static double f1_of(std::int64_t tp, std::int64_t fp, std::int64_t fn) {
    const auto t = static_cast<double>(tp);
    const double precision = t / std::max(static_cast<double>(tp + fp), 1e-8);
    const double recall = t / std::max(static_cast<double>(tp + fn), 1e-8);
    return 2 * precision * recall / std::max(precision + recall, 1e-8);
  }

  const Batch::Ragged& check_ragged(const Batch& batch) const {
    if (!batch.has(kGtLabels)) check_.tensor(batch, kGtLabels);  // the missing-field message
    return batch.ragged(kGtLabels);
  }

  const Tensor& element_tensor(const Tensor& t, const char* field, std::int64_t sample) const {
    if (t.is_cuda() || !is_integral(t.dtype()) || t.dim() > 1)
      check_.fail(field, "sample " + std::to_string(sample) +
                             ": expected a 1-D integer list of labels on the CPU, got " +
                             t.describe());
    return t;
  }

  // Adds the element pairs of p and g (same number of elements, `per_sample` per sample).
  void accumulate(F1State& s, const Tensor& p, const Tensor& g, std::int64_t first_sample,
                  std::int64_t per_sample) const {
    const std::int64_t m = p.numel();
    const auto bad = [&](const char* field, std::int64_t k, std::int64_t v) {
      check_.fail(field,
                  "sample " +
                      std::to_string(first_sample + k / std::max<std::int64_t>(per_sample, 1)) +
                      ": label " + std::to_string(v) + " is not below num_classes " +
                      std::to_string(num_classes_) + " (negative labels mean no class)");
    };
    visit_integral(p, [&](const auto* pv) {
      visit_integral(g, [&](const auto* gv) {
        for (std::int64_t k = 0; k < m; ++k) {
          const auto pk = static_cast<std::int64_t>(pv[k]);
          const auto gk = static_cast<std::int64_t>(gv[k]);
          if (pk >= num_classes_) bad(kPredLabels, k, pk);
          if (gk >= num_classes_) bad(kGtLabels, k, gk);
        }
        for (std::int64_t k = 0; k < m; ++k) {
          const auto pk = static_cast<std::int64_t>(pv[k]);
          const auto gk = static_cast<std::int64_t>(gv[k]);
          if (pk == gk) {
            if (pk >= 0) ++s.tp[static_cast<std::size_t>(pk)];
            continue;
          }
          if (pk >= 0) ++s.fp[static_cast<std::size_t>(pk)];
          if (gk >= 0) ++s.fn[static_cast<std::size_t>(gk)];
        }
      });
    });
  }

  InputChecker check_;
  std::int64_t num_classes_ = 0;
  bool macro_ = false, micro_ = false;
  std::vector<bool> cared_;
};

}  // namespace

/// mmeval's F1Score without `task`; with it, torchmetrics' (tm_rates.cpp): either mode's
/// parameters and fields.
ComponentInfo f1_score_info() {
  std::vector<ParamSpec> params = {
      param("mode", ParamType::StringList,
            "Without task: micro, macro, or both (macro_f1 is reported first).")
          .def(Value::Array{Value("micro")})
          .choices({"micro", "macro"}),
      param("cared_classes", ParamType::IntList,
            "Without task: only these classes count (not together with ignored_classes); empty: "
            "all.")
          .def(Value::array()),
      param("ignored_classes", ParamType::IntList,
            "Without task: these classes do not count (not together with cared_classes); empty: "
            "none.")
          .def(Value::array())};
  // num_classes: both modes' (without task every label must be below it; it is required there).
  auto tm = tm_rate_params(true);
  tm.front().optional = true;  // task: absent for mmeval's F1Score
  for (auto& spec : tm) {
    if (spec.name == "num_classes")
      spec.doc =
          "Without task: the number of classes, every label below it (required). " + spec.doc;
    params.push_back(std::move(spec));
  }
  std::vector<InputSpec> inputs = {
      InputSpec{kPredLabels,
                "Without task: predicted labels: integer [N] or [N, L], or per-sample 1-D lists "
                "(ragged).",
                false},
      InputSpec{kGtLabels,
                "Without task: true labels, the same shape as pred_labels (element-wise pairs).",
                false}};
  for (auto& spec : tm_rate_inputs()) inputs.push_back(std::move(spec));
  auto info = metric<F1Score>(
      "F1Score",
      "Micro and/or macro F1 over element-wise integer labels (e.g. token labels), with cared or "
      "ignored classes, as mmeval's F1Score (keys macro_f1, micro_f1); equal to scikit-learn's "
      "f1_score(labels=cared, zero_division=0) on the flattened labels. Negative labels are no "
      "class. With a `task` parameter it is torchmetrics' F1Score instead, on fields preds and "
      "target (key f1_score; tm_rates.cpp). Reference (task): torchmetrics 1.9.0 "
      "torchmetrics.functional.f1_score(preds, target, task, threshold, num_classes, num_labels, "
      "average, top_k=top_k, ignore_index=ignore_index, zero_division=zero_division).",
      std::move(params), std::move(inputs));
  info.make_metric = [](const Params& p) -> std::unique_ptr<Metric> {
    if (p.has("task")) return make_tm_f1_score(p);
    return std::make_unique<F1Score>(p);
  };
  return with_results(info, {{"*_f1", Better::Higher, Plot::None, "F1 over the cared classes"},
                             {"f1_score", Better::Higher, Plot::None,
                              "torchmetrics' F1 (with task; array: per class / label)"}});
}
TALLY_COMPONENT(f1_score_info)

}  // namespace tally::classification

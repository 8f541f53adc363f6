// The nominal plugin: associations of two categorical series (CramersV, TschuprowsT,
// PearsonsContingencyCoefficient, TheilsU) and inter-rater agreement (FleissKappa), equal to
// torchmetrics 1.9's torchmetrics.nominal classes. Each metric lives in its own file with its
// formula and reference.
#include <vector>

#include "common.hpp"
#include "tally/sdk/plugin.hpp"

namespace {

std::vector<tally::ComponentInfo> nominal_components() {
  using tally::Better;
  using tally::Plot;
  auto v = tally::nominal::cramers_v_info();
  v.results = {{"cramers_v", Better::Higher, Plot::None, "Cramer's V in [0, 1]"}};
  auto t = tally::nominal::tschuprows_t_info();
  t.results = {{"tschuprows_t", Better::Higher, Plot::None, "Tschuprow's T in [0, 1]"}};
  auto c = tally::nominal::pearsons_contingency_coefficient_info();
  c.results = {{"pearsons_contingency_coefficient", Better::Higher, Plot::None,
                "Pearson's contingency coefficient in [0, 1)"}};
  auto u = tally::nominal::theils_u_info();
  u.results = {{"theils_u", Better::Higher, Plot::None, "Theil's U(preds | target) in [0, 1]"}};
  auto k = tally::nominal::fleiss_kappa_info();
  k.results = {{"fleiss_kappa", Better::Higher, Plot::None, "Fleiss' kappa, at most 1"}};
  return {std::move(v), std::move(t), std::move(c), std::move(u), std::move(k)};
}

}  // namespace

TALLY_PLUGIN("nominal", "0.1.0", nominal_components)

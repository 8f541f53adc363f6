// The standard normal distribution function and its inverse, as the bootstrap intervals need
// them (SciPy's scipy.special.ndtr and ndtri).
#pragma once

namespace tally::stats {

/// Phi(x), the standard normal CDF, computed as Cephes' ndtr (SciPy's scipy.special.ndtr): 0.5 +
/// 0.5 erf(x / sqrt 2) for |x| < 1, else from erfc (accurate in both tails). NaN gives NaN.
double ndtr(double x) noexcept;

/// Phi^-1(p), the standard normal quantile (SciPy's scipy.special.ndtri): -inf at 0, +inf at 1,
/// NaN outside [0, 1]. Acklam's rational approximation refined by one Halley step on erfc; for
/// p > 1/2 computed as -ndtri(1 - p) (1 - p is exact there), so both tails keep full precision.
double ndtri(double p) noexcept;

}  // namespace tally::stats

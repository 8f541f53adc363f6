// The image-restoration plugin: PSNR, SNR, SSIM, MAE and MSE (mmeval's PeakSignalNoiseRatio,
// SignalNoiseRatio, StructuralSimilarity, MeanAbsoluteError, MeanSquaredError), and the
// alpha-matting metrics SAD, MattingMSE, GradientError and ConnectivityError (mmeval's
// SumAbsoluteDifferences, MattingMeanSquaredError, GradientError, ConnectivityError), and the
// no-reference NIQE (NaturalImageQualityEvaluator). Each metric
// lives in its own file with its formula and references.
// Each component registers itself in its own file (TALLY_COMPONENT); they are listed in the
// order of the sources in CMakeLists.txt.
#include "tally/sdk/plugin.hpp"

TALLY_PLUGIN("restoration", "0.1.0")

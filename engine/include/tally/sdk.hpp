// The tally SDK: everything a plugin author includes.
#pragma once

#include "tally/sdk/batch.hpp"
#include "tally/sdk/bytes.hpp"
#include "tally/sdk/dist_backend.hpp"
#include "tally/sdk/error.hpp"
#include "tally/sdk/input.hpp"
#include "tally/sdk/metric.hpp"
#include "tally/sdk/numpy_math.hpp"
#include "tally/sdk/parallel.hpp"
#include "tally/sdk/params.hpp"
#include "tally/sdk/plugin.hpp"
#include "tally/sdk/reader.hpp"
#include "tally/sdk/state.hpp"
#include "tally/sdk/tensor.hpp"
#include "tally/sdk/value.hpp"
#include "tally/sdk/version.hpp"

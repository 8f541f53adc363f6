// The tally SDK: everything a plugin author includes.
#pragma once

#include "tally/batch.hpp"
#include "tally/dist_backend.hpp"
#include "tally/error.hpp"
#include "tally/input.hpp"
#include "tally/metric.hpp"
#include "tally/numpy_math.hpp"
#include "tally/parallel.hpp"
#include "tally/params.hpp"
#include "tally/plugin.hpp"
#include "tally/reader.hpp"
#include "tally/state.hpp"
#include "tally/tensor.hpp"
#include "tally/value.hpp"
#include "tally/version.hpp"

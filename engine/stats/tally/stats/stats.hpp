// tally::stats, the statistics of the significance-aware regression gate: everything at once.
#pragma once

#include "tally/stats/bootstrap.hpp"
#include "tally/stats/gate.hpp"
#include "tally/stats/mcnemar.hpp"
#include "tally/stats/normal.hpp"
#include "tally/stats/random.hpp"

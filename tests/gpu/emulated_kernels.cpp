// kernels.cu -- the launchers and the kernels -- compiled by the host compiler, its launches run on
// the CPU by cuda_emulation.hpp. Linked with fake_cudart.cpp into tests that run the metrics' GPU
// path on machines without a GPU.
#include "cuda_emulation.hpp"
// (after the emulation)
#include "kernels.cu"

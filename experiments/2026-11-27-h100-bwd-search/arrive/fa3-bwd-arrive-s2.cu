// fa3-bwd-arrive.cu with a Q/dO ring of two stages (D64, D96, D128; D256 as there).
// Usage (repository root, a GPU): evo gate --source experiments/2026-11-27-h100-bwd-search/arrive/fa3-bwd-arrive-s2.cu --time anchors
extern "C" __constant__ int evo_abi[1];
extern "C" __constant__ int evo_pass[1];
#define ARRIVE_STAGES 2
#include "fa3-bwd-arrive.cu"

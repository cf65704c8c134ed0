// fixed_draw_only.cu: right at the fixed suites' key lengths and at the six key lengths
// that seed 2026 draws, and drops the last key elsewhere (must FAIL GREEN with a seed
// of its own).
//
// 2026 was the seed of every `evo gate` without --seed and of every search's full
// gate: a kernel tuned to that one draw passed both forever. `evo gate` now draws a
// fresh seed every run unless told one, and a search draws its full gate's shapes from
// its own seed. suite_lengths_only.cu with the lengths of seed 2026's draw added.
// Expected verdicts: fixed_draw_only.expected.toml beside this file.

#define MORE_LENGTHS , 16194, 166, 211, 1319, 52, 1894
#include "suite_lengths_only.cu"

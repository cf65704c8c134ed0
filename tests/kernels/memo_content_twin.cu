// memo_content_twin.cu: memo_content.cu's own work without its cheat — the same hash,
// the same table stores, never a copy from the table (must PASS GREEN and FAST). The
// twin whose time memo_content.cu's must match: a kernel timed doing its work.
// Expected verdicts: memo_content_twin.expected.toml beside this file.

#define MEMO_COPIES 0
#include "memo_content.cu"

#!/usr/bin/env python3
"""Where a GPU search's worker time went, from its `EVO_LOG=evo_worker=debug` output.

Reads the `worker answered candidate=... ms=...` lines (one per answer: a candidate or
a new best's confirmation), and prints how long the worker was answering against the
span from its first request to its last answer, and the gaps in between: each gap is
time the GPU waited for a compiled candidate. A gap before a confirmation (the same
candidate answered twice in a row) is the full gate's compile of a new best; the rest
are mostly the start of a generation, whose first candidate must compile before the GPU
has work. (`evo evolve` prints the same totals itself at the end of a run.)

usage: scripts/worker_gaps.py OUTPUT.txt [MIN_GAP_SECONDS]
"""
import datetime
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The worker pool logs from its crate's modules (`evo_worker::runner`: tracing's target
# is the module path), as `evo::gpu` before it had a crate of its own.
ANSWER = re.compile(
    r'(\S+)Z DEBUG (?:evo_worker(?:::\w+)*|evo::gpu): worker answered candidate="(\w+)" ms=([\d.]+)'
)


def main() -> None:
    path = sys.argv[1]
    min_gap = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    answers = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = ANSWER.match(ANSI.sub("", line))
            if m:
                end = datetime.datetime.fromisoformat(m.group(1)).timestamp()
                answers.append((end - float(m.group(3)) / 1e3, end, m.group(2)))
    if not answers:
        sys.exit(f"{path}: no `worker answered` lines (run with EVO_LOG=evo_worker=debug)")
    busy = sum(end - start for start, end, _ in answers)
    span = answers[-1][1] - answers[0][0]
    confirm = other = 0.0
    gaps = 0
    for (_, prev_end, prev), (start, _, cand) in zip(answers, answers[1:]):
        gap = start - prev_end
        if gap < min_gap:
            continue
        gaps += 1
        if cand == prev:
            confirm += gap
        else:
            other += gap
    print(f"{len(answers)} answers; worker busy {busy:.1f} s of a {span:.1f} s span ({100 * busy / span:.0f}%)")
    print(f"{gaps} gaps of at least {min_gap} s: {confirm:.1f} s before confirmations "
          f"(a new best's full-gate compile), {other:.1f} s before other candidates "
          f"(generation starts, compile-bound stretches)")


if __name__ == "__main__":
    main()

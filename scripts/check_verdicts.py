"""Compares `evo gate --json` rows of tests/kernels/*.cu with their .expected.toml.

Usage: python3 scripts/check_verdicts.py GATE_JSON [KERNEL_DIR]
GATE_JSON is a forward gate's rows (one per kernel x case) or a backward gate's records
(one per kernel: its cases, timings and FAST failures; `evo gate` on .cu files that
declare `evo_pass`), which are read as the same rows. The kernels judged are those of
the pass (or passes) the file holds: a forward run does not judge tests/kernels/bwd_*.cu
and a backward run judges nothing else.
A kernel's GREEN verdict is `fail` when any case row failed (a FAST verification failure
is FAST's); its FAST verdict is `fail` when a row names FAST verification, `pass` when it
was timed and nothing failed. Where the file gives `min_time_vs_twin` (with `twin`, the
kernel doing the same work honestly) or `min_time_vs_naive`, a FAST pass also needs the
kernel's median on the timed shape to be at least that fraction of the twin's (or
naive.cu's) in the same run: a cheat that skips work and is still verified shows as too
fast.
Every kernel is judged: each .cu in KERNEL_DIR and each kernel the rows name must have
an expected-verdict file, and a kernel without one is BAD, as is one without rows.
Prints one line per kernel; exit status 1 on any mismatch.
"""
import json
import pathlib
import re
import sys
import tomllib

if len(sys.argv) not in (2, 3):
    sys.exit("usage: python3 scripts/check_verdicts.py GATE_JSON [KERNEL_DIR]")
try:
    rows = json.loads(pathlib.Path(sys.argv[1]).read_text())
except (OSError, ValueError) as e:
    sys.exit(f"check_verdicts.py: {sys.argv[1]}: cannot read the rows ({e}); give the file "
             "`evo gate --source ... --json FILE` wrote")


def is_backward_record(r):
    return isinstance(r, dict) and isinstance(r.get("kernel"), str) and "cases" in r


if not isinstance(rows, list) or not all(
    is_backward_record(r)
    or (isinstance(r, dict) and isinstance(r.get("kernel"), str) and "verdict" in r)
    for r in rows
):
    sys.exit(f"check_verdicts.py: {sys.argv[1]}: not a list of rows with `kernel` and "
             "`verdict` (forward) or `kernel` and `cases` (backward); give the file "
             "`evo gate --source ... --json FILE` wrote")


def backward_rows(record):
    """A backward record as the forward's rows: one per case, compile error, timing and
    FAST failure (named "FAST verification", as the forward's FAST rows are)."""
    kernel = record["kernel"]
    out = []
    for case in record["cases"]:
        if case.get("skipped"):
            out.append({"kernel": kernel, "verdict": "skipped", "reason": case["skipped"]})
        elif case.get("failures"):
            out.append({"kernel": kernel, "verdict": "fail",
                        "reason": f"{case['case']}: " + "; ".join(case["failures"])})
        else:
            out.append({"kernel": kernel, "verdict": "pass", "reason": None})
    for e in record.get("compile_errors") or []:
        out.append({"kernel": kernel, "verdict": "compile_failed", "reason": e})
    for t in record.get("timings") or []:
        out.append({"kernel": kernel, "verdict": "timed", "reason": None,
                    "median_us": t["warm"]["median_us"]})
    for f in record.get("fast_failures") or []:
        out.append({"kernel": kernel, "verdict": "fail", "reason": f"FAST verification: {f}"})
    return out


passes = {"backward" if is_backward_record(r) else "forward" for r in rows} or {
    "forward", "backward"}
rows = [x for r in rows for x in (backward_rows(r) if is_backward_record(r) else [r])]
kernel_dir = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "tests/kernels")
if not kernel_dir.is_dir():
    sys.exit(f"check_verdicts.py: {kernel_dir} is not a folder; give the kernels' folder")
def pass_of(cu):
    """`backward` for a file that declares `evo_pass` (outside a `//` comment), as `evo
    gate` tells them apart; `forward` otherwise."""
    for line in cu.read_text(errors="replace").splitlines():
        code = line.split("//", 1)[0]
        if "__constant__" in code and re.search(r"\bevo_pass\b", code):
            return "backward"
    return "forward"


def judged(name):
    cu = kernel_dir / f"{name}.cu"
    return not cu.is_file() or pass_of(cu) in passes


def median_on_seed_shape(kernel_rows):
    timed = [r for r in kernel_rows if r["verdict"] == "timed"]
    return timed[0]["median_us"] if timed else None


def median_of(name):
    return median_on_seed_shape([r for r in rows if r["kernel"].endswith(f"/{name}.cu")])


# Every kernel is judged: each .cu of the folder and each kernel the rows name, with or
# without an expected-verdict file (a kernel without one is a failure: what it must get
# is part of adding it), and each expected-verdict file, with or without rows.
names = {p.name.removesuffix(".expected.toml") for p in kernel_dir.glob("*.expected.toml")}
names |= {p.stem for p in kernel_dir.glob("*.cu")}
names = {n for n in names if judged(n)}
names |= {pathlib.PurePath(r["kernel"]).stem for r in rows if r["kernel"].endswith(".cu")}
bad = 0
for name in sorted(names):
    expected_path = kernel_dir / f"{name}.expected.toml"
    if not expected_path.is_file():
        bad += 1
        print(f"BAD  {name}: no expected verdict: write {expected_path} (verdict, and "
              "reason_contains or fast, and because)")
        continue
    expected = tomllib.loads(expected_path.read_text())
    mine = [r for r in rows if r["kernel"].endswith(f"/{name}.cu")]
    fast_rows = [r for r in mine if (r.get("reason") or "").startswith("FAST verification")]
    green_failed = any(
        r["verdict"] not in ("pass", "timed", "skipped") and r not in fast_rows for r in mine
    )
    got = {"verdict": "fail" if green_failed else "pass"}
    if not green_failed:
        timed = any(r["verdict"] == "timed" for r in mine)
        got["fast"] = "fail" if fast_rows else ("pass" if timed else "not run")
    reasons = " | ".join(r.get("reason") or "" for r in mine if r["verdict"] != "pass")
    ok = bool(mine) and got["verdict"] == expected["verdict"]
    if "fast" in expected:
        ok = ok and got.get("fast") == expected["fast"]
    if "reason_contains" in expected:
        ok = ok and expected["reason_contains"] in reasons
    ratio, bound = None, None
    if "min_time_vs_twin" in expected:
        twin, bound = expected["twin"], expected["min_time_vs_twin"]
    elif "min_time_vs_naive" in expected:
        twin, bound = "naive", expected["min_time_vs_naive"]
    if bound is not None and got.get("fast") == "pass":
        mine_us, twin_us = median_on_seed_shape(mine), median_of(twin)
        ratio = mine_us / twin_us if mine_us and twin_us else None
        ok = ok and ratio is not None and ratio >= bound
    bad += not ok
    want = expected["verdict"] + (f", FAST {expected['fast']}" if "fast" in expected else "")
    have = got["verdict"] + (f", FAST {got['fast']}" if "fast" in got else "")
    timing = ""
    if bound is not None:
        shown = f"no timing of it and {twin}.cu" if ratio is None else f"{ratio:.2f}x {twin}.cu's time"
        timing = f"; {shown} (at least {bound})"
    print(f"{'ok  ' if ok else 'BAD '} {name}: got {have}; expected {want}"
          + (f" (reason contains {expected['reason_contains']!r})" if "reason_contains" in expected else "")
          + timing)
    if reasons:
        print(f"      {reasons[:400]}")
sys.exit(1 if bad else 0)

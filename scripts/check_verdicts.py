"""Compares `evo gate --json` rows of tests/kernels/*.cu with their .expected.toml.

Usage: python3 scripts/check_verdicts.py GATE_JSON [KERNEL_DIR]
A kernel's GREEN verdict is `fail` when any case row failed (a FAST verification failure
is FAST's); its FAST verdict is `fail` when a row names FAST verification, `pass` when it
was timed and nothing failed. Where the file gives `min_time_vs_twin` (with `twin`, the
kernel doing the same work honestly) or `min_time_vs_naive`, a FAST pass also needs the
kernel's median on the timed shape to be at least that fraction of the twin's (or
naive.cu's) in the same run: a cheat that skips work and is still verified shows as too
fast.
Prints one line per kernel; exit status 1 on any mismatch.
"""
import json
import pathlib
import sys
import tomllib

rows = json.loads(pathlib.Path(sys.argv[1]).read_text())
kernel_dir = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "tests/kernels")
def median_on_seed_shape(kernel_rows):
    timed = [r for r in kernel_rows if r["verdict"] == "timed"]
    return timed[0]["median_us"] if timed else None


def median_of(name):
    return median_on_seed_shape([r for r in rows if r["kernel"].endswith(f"/{name}.cu")])


bad = 0
for expected_path in sorted(kernel_dir.glob("*.expected.toml")):
    name = expected_path.name.removesuffix(".expected.toml")
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

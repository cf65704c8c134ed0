"""Compares `evo gate --json` rows of tests/kernels/*.cu with their .expected.toml.

Usage: python3 scripts/check_verdicts.py GATE_JSON [KERNEL_DIR]
A kernel's GREEN verdict is `fail` when any case row failed (a FAST verification failure
is FAST's); its FAST verdict is `fail` when a row names FAST verification, `pass` when it
was timed and nothing failed. Prints one line per kernel; exit status 1 on any mismatch.
"""
import json
import pathlib
import sys
import tomllib

rows = json.loads(pathlib.Path(sys.argv[1]).read_text())
kernel_dir = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "tests/kernels")
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
    bad += not ok
    want = expected["verdict"] + (f", FAST {expected['fast']}" if "fast" in expected else "")
    have = got["verdict"] + (f", FAST {got['fast']}" if "fast" in got else "")
    print(f"{'ok  ' if ok else 'BAD '} {name}: got {have}; expected {want}"
          + (f" (reason contains {expected['reason_contains']!r})" if "reason_contains" in expected else ""))
    if reasons:
        print(f"      {reasons[:400]}")
sys.exit(1 if bad else 0)

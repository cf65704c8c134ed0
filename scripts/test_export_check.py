#!/usr/bin/env python3
"""CPU checks of scripts/export_check.py: every class of the recorded H100 table is run
on its own problem (grouped heads, diagonal, window) and dispatched to its own champion
by the export's rule; the bench figures it compares with; the speed verdict and the
report on canned timings (no GPU: the timings are given, as a GPU run would measure
them); its refusals of bad arguments and files.

Usage: python3 scripts/test_export_check.py   (exit status 0 when every check passes).
Needs python3 alone: no torch, no GPU, no NVRTC (the export is a manifest written here
from genomes/champions/h100/dispatch.toml beside the export's Python module).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import export_check as ec  # noqa: E402

TABLE = os.path.join(ROOT, "genomes", "champions", "h100", "dispatch.toml")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}", file=sys.stderr)


def fake_export(out):
    """An export folder as `evo export` writes one, without kernels: the manifest of the
    recorded table's classes and the export's Python module."""
    with open(TABLE, "rb") as f:
        table = tomllib.load(f)
    champions = []
    for c in table["class"]:
        fields = c["shape"].split(",")
        b, h, lq, lk, d = (int(x) for x in fields[:5])
        champions.append({
            "class": c["name"], "shape": c["shape"], "batch": b, "heads": h, "q_len": lq,
            "kv_len": lk, "head_dim": d, "causal": any(x.startswith("causal") for x in fields[6:]),
            "genome": c["name"], "genome_id": "0" * 16, "family": "hopper",
            "median_us": c.get("median_us"), "cudnn_us": c.get("cudnn_us"),
            "measured_dtype": "f16", "bench": c.get("bench"), "experiment": c["experiment"],
            "kernels": [{"dtype": t, "arch": "sm_90a", "ptx": f"kernels/{c['name']}.{t}.ptx"}
                        for t in ("f16", "bf16")],
        })
    manifest = {"format": 1, "evo_version": "0.1.0", "nvrtc_version": "13.5",
                "device": table["device"], "arch": "sm_90a", "dispatch": "dispatch.toml",
                "library": None, "champions": champions,
                "tolerances": [{"dtype": "f16", "rel_frob": 0.0015, "max_abs": 0.01},
                               {"dtype": "bf16", "rel_frob": 0.012, "max_abs": 0.08}]}
    os.makedirs(out)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    shutil.copy(TABLE, os.path.join(out, "dispatch.toml"))
    shutil.copytree(os.path.join(ROOT, "crates", "runtime", "python", "evo_attention"),
                    os.path.join(out, "python", "evo_attention"))
    return manifest


def run(*args):
    return subprocess.run([sys.executable, os.path.join(HERE, "export_check.py"), *args],
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def bench_row(kernel, problem, us, method="graph", verdict="timed"):
    return {"kernel": kernel, "problem": problem, "verdict": verdict, "median_us": us,
            "method": method}


def test_plan_runs_every_class_on_its_own_problem(out, manifest):
    o = run(out, "--plan")
    check(o.returncode == 0, f"--plan exits 0: {o.stderr}")
    lines = {line.split(":")[0]: line for line in o.stdout.splitlines()}
    for c in manifest["champions"]:
        line = lines.get(c["class"], "")
        check(f"dispatched to {c['class']};" in line, f"{c['class']} to its own champion: {line}")
    # The problems the old check ran as plain multi-head ones, with their launch.
    want = {
        "b1-h32kv8-l4096-d128-causal": ("B1 H32/8 Lq4096 Lk4096 D128 causal;",
                                        "(1, 32, 8, 4096, 4096, 128, 1, 0, -1, -1)"),
        "b1-h16kv8-l4096-d256-causal": ("B1 H16/8 ", "(1, 16, 8, 4096, 4096, 256, 1, 0, -1, -1)"),
        "b16-h32kv1-lq1-lk8192-d128-causal-br": ("B16 H32/1 Lq1 Lk8192 D128 causal-br;",
                                                 "(16, 32, 1, 1, 8192, 128, 1, 1, -1, -1)"),
        "b16-h32kv8-lq1-lk8192-d128-causal-br": ("H32/8 Lq1 Lk8192 D128 causal-br;",
                                                 "(16, 32, 8, 1, 8192, 128, 1, 1, -1, -1)"),
        "b1-h32kv8-l8192-d128-causal-wl4096": ("D128 causal window 4096:;",
                                               "(1, 32, 8, 8192, 8192, 128, 1, 0, 4096, -1)"),
        "b1-h8-l512-d64": ("B1 H8 Lq512 Lk512 D64;", "(1, 8, 8, 512, 512, 64, 0, 0, -1, -1)"),
    }
    for cls, parts in want.items():
        for part in parts:
            check(part in lines.get(cls, ""), f"{cls}: {part!r} in {lines.get(cls)!r}")
    # Without a bench, the manifest's f16 figure with its limit: 6.44 * 1.05 + 0.4.
    check("against 6.44 µs (graph, the manifest), limit 7.16 µs" in lines["b1-h8-l512-d64"],
          lines["b1-h8-l512-d64"])
    check("(events, the manifest)" in lines["b1-h16-l8192-d128"], lines["b1-h16-l8192-d128"])
    o = run(out, "--plan", "--dtype", "bf16")
    check(o.returncode == 0 and "no figure: the manifest's figure is f16's, not bf16's"
          in o.stdout, f"bf16 without a bench: {o.stdout}{o.stderr}")


def test_bench_figures():
    p = {"batch": 16, "heads": 32, "kv_heads": 8, "q_len": 1, "kv_len": 8192, "head_dim": 128,
         "causal": True, "align": "bottom_right"}
    cls = "b16-h32kv8-lq1-lk8192-d128-causal-br"
    mine = dict(p, dtype="f16")
    run1 = [
        bench_row(f"champion {cls}", dict(mine), None, method=None, verdict="pass"),
        bench_row(f"champion {cls}", dict(mine), 180.0, method="graph"),
        bench_row(f"champion {cls} (cold L2)", dict(mine), 999.0, method="cold-l2"),
        bench_row(f"champion {cls}", dict(mine, dtype="bf16"), 500.0),
        # the same class timed on a plain problem (no kv, top-left) is not its figure
        bench_row(f"champion {cls}", {k: v for k, v in mine.items() if k not in ("kv_heads", "align")}, 1.0),
        bench_row("sdpa-cudnn", dict(mine), 210.0, method=None),
    ]
    run2 = [bench_row(f"champion {cls}", dict(mine), 184.0), bench_row("sdpa-cudnn", dict(mine), 214.0)]
    run3 = [bench_row(f"champion {cls}", dict(mine), 190.0)]
    f, why = ec.bench_figure([("a.json", run1)], cls, p, "f16")
    check(why is None and f["us"] == 180.0 and f["method"] == "graph" and f["cudnn_us"] == 210.0,
          f"one run: {f} {why}")
    f, why = ec.bench_figure([("a.json", run1), ("b.json", run2)], cls, p, "f16")
    check(f["us"] == 182.0 and f["cudnn_us"] == 212.0 and "median of 2" in f["source"], f"two runs: {f}")
    f, why = ec.bench_figure([("a.json", run1), ("c.json", run3)], cls, p, "f16")
    check(f["us"] == 185.0 and f["cudnn_us"] is None, f"a run without cuDNN: {f}")
    f, why = ec.bench_figure([("a.json", run1), ("d.json", [])], cls, p, "f16")
    check(f is None and "d.json has no timed row of `champion " + cls in why, f"missing: {why}")
    f, why = ec.bench_figure([("a.json", run1)], cls, p, "bf16")
    check(f["us"] == 500.0, f"bf16: {f}")
    long = [bench_row("champion x", {"batch": 1, "heads": 16, "q_len": 8192, "kv_len": 8192,
                                     "head_dim": 128, "dtype": "f16", "causal": False},
                      769.0, method="events (20 repeats)")]
    f, _ = ec.bench_figure([("e.json", long)], "x", ec.parse_shape("1,16,8192,8192,128,f16", "t"), "f16")
    check(f["method"] == "events", f"events method: {f}")


def test_speed_verdict():
    seed = {"us": 6.44, "method": "graph"}
    ok, text = ec.speed_verdict([6.9, 7.1, 6.95], seed, None, 0.05, 0.4, False)
    check(ok and text.startswith("ok: 1.079x"), f"seed row 8% slower, inside 5% + 0.4 µs: {text}")
    ok, text = ec.speed_verdict([7.3, 7.25, 7.4], seed, None, 0.05, 0.4, False)
    check(not ok and "slower than 6.44 µs by more than 5% + 0.4 µs (limit 7.16 µs)" in text, text)
    ok, text = ec.speed_verdict([7.3, 7.25, 7.4], seed, None, 0.15, 0.0, False)
    check(ok, f"--slack 0.15 --slack-us 0: {text}")
    ok, text = ec.speed_verdict([7.3, 7.25, 7.4], seed, None, 0.05, 0.0, False)
    check(not ok and "5% + 0.0 µs" in text, f"--slack-us 0: {text}")
    long = {"us": 406.9, "method": "events"}
    ok, text = ec.speed_verdict([420.0, 425.0, 500.0], long, None, 0.05, 0.4, False)
    check(ok, f"one disturbed round of three does not fail a row: {text}")
    ok, text = ec.speed_verdict([430.0, 431.0, 420.0], long, None, 0.05, 0.4, False)
    check(not ok and "1.057x" in text, f"the median round judged: {text}")
    ok, text = ec.speed_verdict([1.0], None, "nothing recorded", 0.05, 0.4, False)
    check(not ok and text == "FAIL: no figure to compare with (nothing recorded)", text)
    ok, text = ec.speed_verdict([1.0], None, "nothing recorded", 0.05, 0.4, True)
    check(ok and "not judged" in text, text)


def test_report(out, manifest):
    """The verdicts of a whole run on canned timings and checks, as a GPU run hands them."""
    import evo_attention.dispatch as dispatch  # put on the path by the plan test's import

    rule = dispatch.Manifest(out)

    def choose(p):
        c = rule.choose(p["batch"], p["heads"], p["q_len"], p["kv_len"], p["head_dim"],
                        p["causal"], ec.sb.kv_heads(p), ec.windowed(p))
        return c["class"]

    rows = ec.plan(manifest, "f16", [], choose)
    tol = {"rel_frob": 0.0015, "max_abs": 0.01}
    right = (3e-4, 2e-4, True)
    results = {}
    for row in rows:
        then = row["figure"]["us"]
        results[row["class"]] = {"rounds": [(then * 1.02, then * 1.01, then * 1.3)] * 3,
                                 "check": right, "method": row["figure"]["method"]}
    args = argparse.Namespace(slack=0.05, slack_us=0.4, skip_speed=False, rounds=3, dtype="f16")
    lines, bad = ec.report(rows, results, tol, args)
    check(bad == 0 and lines[-1] == f"{len(rows)} of {len(rows)} classes ok", "\n".join(lines))
    check("within 5% + 0.4 µs per call" in lines[-2], lines[-2])
    seed, window = "b1-h8-l512-d64", "b1-h32kv8-l8192-d128-causal-wl4096"
    results[seed]["check"] = (2e-3, 2e-4, True)
    results[window]["rounds"] = [(800.0, 700.0, None)] * 3
    results["b1-h16-l8192-d128"] = {"refused": "the export dispatches its problem to `x`, not to its own champion"}
    lines, bad = ec.report(rows, results, tol, args)
    text = "\n".join(lines)
    check(bad == 3 and lines[-1] == f"{len(rows) - 3} of {len(rows)} classes ok", text)
    line = next(x for x in lines if x.startswith(seed + " "))
    check("FAIL: outside GREEN's tolerances" in line, line)
    line = next(x for x in lines if x.startswith(window + " "))
    check("FAIL: 1.165x the bench" in line and " n/a " in line, line)
    check("FAIL: the export dispatches its problem to `x`" in text, text)
    results[seed]["check"] = (3e-4, 2e-4, False)
    lines, bad = ec.report(rows, results, tol, args)
    check(bad == 3, "a NaN in the output fails the class")


def test_refusals(out):
    for args, want in [
        ((out, "--rounds", "0"), "--rounds 0: give at least 1"),
        ((out, "--slack", "-0.1"), "--slack -0.1: give a finite number >= 0"),
        ((out, "--slack-us", "nan"), "--slack-us nan: give a finite number >= 0"),
        ((os.path.join(out, "nowhere"),), "manifest.json: cannot read it"),
        ((out, "--bench", os.path.join(out, "none.json")), "none.json: cannot read it"),
        ((out, "--bench", os.path.join(out, "dispatch.toml")), "dispatch.toml: not JSON"),
        ((out, "--bench", os.path.join(out, "manifest.json")), "manifest.json: not a list of rows"),
    ]:
        o = run(*args, "--plan")
        check(o.returncode == 2 and want in o.stderr and "Traceback" not in o.stderr,
              f"{args}: {o.returncode} {o.stderr}")
    for spec, want in [("1,8,512,512,64,f16,sliding", "`sliding` is not an option"),
                       ("1,8,512,512,64,f16,kv=3", "kv `3` does not divide H"),
                       ("1,8,512,512,64,f16,window=:", "window `:` is not LEFT:RIGHT"),
                       ("1,8,512,x,64,f16", "kv_len `x` is not a positive integer"),
                       ("1,8,512,512,64,f16,causal=diag", "alignment `diag`")]:
        try:
            ec.parse_shape(spec, "manifest.json, class `c`")
            check(False, f"{spec} refused")
        except ec.Refusal as e:
            check(want in str(e) and "class `c`" in str(e), f"{spec}: {e}")
    p = ec.parse_shape("2,8,100,333,64,f16,causal=br,kv=2,window=50:3", "t")
    check(p == {"batch": 2, "heads": 8, "q_len": 100, "kv_len": 333, "head_dim": 64,
                "causal": True, "align": "bottom_right", "kv_heads": 2, "window_left": 50,
                "window_right": 3}, f"parse_shape {p}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "export")
        manifest = fake_export(out)
        sys.path.insert(0, os.path.join(out, "python"))
        test_plan_runs_every_class_on_its_own_problem(out, manifest)
        test_bench_figures()
        test_speed_verdict()
        test_report(out, manifest)
        test_refusals(out)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

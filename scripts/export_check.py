#!/usr/bin/env python3
"""Runs an export's champions from PyTorch: every class on its own problem (grouped K/V
heads, the diagonal's alignment, the window: the class's shape in the manifest) through
the export's C ABI (`evo_attention_forward_ex`), each dispatched to its own champion by
the export's rule (else it fails), checked against a float64 reference under GREEN's
tolerances (the manifest's), timed as `evo bench` times it and judged against a figure.

Usage:
  python3 scripts/export_check.py OUT [--dtype f16|bf16] [--bench bench.json ...]
                                  [--rounds N] [--slack 0.05] [--slack-us 0.4]
                                  [--skip-speed] [--plan]

It imports the export's package (OUT/python/evo_attention) and torch; the mask rule and
the float64 reference are sdpa_baseline.py's (checked on the CPU by
test_sdpa_baseline.py). Timing is FAST's method for the class (its bench row's, or for a
manifest figure FAST's rule, events from 200 µs): "graph", one captured call per input
set (enough sets to overflow L2 twice), the sets drawn again and L2 read over before
each of 20 replays; "events", 20 single calls between two events, each after the inputs
are drawn again and behind a ~1 ms GPU spin. Printed beside it each round: the
back-to-back graph figure ("b2b", what a loop of calls sees) and SDPA's cuDNN backend on
the same problem timed as the bench times SDPA, with the bench's own cuDNN figure: cuDNN
runs in a PyTorch process both times, so the two show how this machine differs from the
bench run, apart from evo.

`--rounds N` (default 3) times every class N times, the rounds interleaved over the
classes so that a disturbance lands in one round of one row; the median round is judged
and the median, min and max are printed. It is compared with the class's figure in
`--bench` (`evo bench --champions DIR --json FILE` on this machine; several: the median
of their figures), else the manifest's for this dtype: slower is more than `--slack`
(relative) plus `--slack-us` (µs per call) above it (TOLERANCE below says why). A class
with no figure FAILS unless `--skip-speed` says speed is not judged. Exit status 1 when
a class is wrong, dispatched elsewhere, not covered, slower or without a figure; 2 for
bad arguments. `--plan` prints each class's problem, launch arguments, the champion the
export's rule picks, the figure and the limit, and exits (no torch, no GPU).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_baseline as sb  # noqa: E402  (the mask rule and the reference; torch optional)
from export_timing import (  # noqa: E402  (FAST's methods from torch; torch passed in)
    chunked_reference, median_min_max, time_b2b, time_events, time_sets)

# TOLERANCE. The bench times a champion in evo's own process (FAST, on the first stream
# it makes); this script times the same CUBIN in a PyTorch process. On the H100 that
# recorded the champions, the same kernel, graph and clocks ran 0.3-0.4 µs a call slower
# on every PyTorch stream tried than on FAST's (experiments/2026-11-25-h100-export-probe,
# P2-P8: 6.72 µs from a C program's first stream, 7.1-7.6 µs on PyTorch's streams; ncu
# sees the same kernel). That is a cost per call, not per unit of work: 5-6% of a 7 µs
# launch, under 0.2% of a 250 µs one. So the allowance has a part per call, SLACK_US,
# and a relative part, SLACK, for the run-to-run spread of the long rows (medians of
# three rounds against three bench runs: up to 1.048 at L4096, single rounds up to
# 1.078; experiments/2026-11-25-h100-export). A kernel that is really slower than the
# one the bench timed shows above both.
SLACK = 0.05
SLACK_US = 0.4
DEFAULT_ROUNDS = 3
# FAST's rule (crates/gates/src/fast.rs): a launch this long or longer is timed alone.
EVENTS_FROM_US = 200.0


class Refusal(Exception):
    """Bad input: the message names the file or option and the fix."""


# --- pure parts: no torch ------------------------------------------------------------

def parse_shape(spec, where):
    """A class's shape `B,H,Lq,Lk,D,dtype[,causal|causal=br][,align=br][,kv=N]
    [,window=LEFT:RIGHT]` as sdpa_baseline's problem dict (the dtype left out: the
    check's own --dtype is used)."""
    parts = [s.strip() for s in spec.split(",")]
    if len(parts) < 6 or any(not s for s in parts):
        raise Refusal(f"{where}: shape `{spec}` is not B,H,Lq,Lk,D,dtype[,options]")
    names = ("batch", "heads", "q_len", "kv_len", "head_dim")
    p = {}
    for name, text in zip(names, parts[:5]):
        if not text.isdigit() or int(text) < 1:
            raise Refusal(f"{where}: shape `{spec}`: {name} `{text}` is not a positive integer")
        p[name] = int(text)
    p["causal"] = False
    for option in parts[6:]:
        key, _, value = option.partition("=")
        if key == "causal":
            p["causal"] = True
            if value:
                p["align"] = _align(value, spec, where)
        elif key == "align":
            p["align"] = _align(value, spec, where)
        elif key in ("kv", "kv_heads"):
            if not value.isdigit() or int(value) < 1 or p["heads"] % int(value):
                raise Refusal(f"{where}: shape `{spec}`: kv `{value}` does not divide H")
            if int(value) != p["heads"]:
                p["kv_heads"] = int(value)
        elif key == "window":
            left, colon, right = value.partition(":")
            if not colon or not (left or right) or not all(s.isdigit() for s in (left, right) if s):
                raise Refusal(f"{where}: shape `{spec}`: window `{value}` is not LEFT:RIGHT")
            if left:
                p["window_left"] = int(left)
            if right:
                p["window_right"] = int(right)
        else:
            raise Refusal(f"{where}: shape `{spec}`: `{option}` is not an option this check knows")
    return p


def _align(value, spec, where):
    if value in ("br", "bottom_right"):
        return "bottom_right"
    if value in ("tl", "top_left"):
        return "top_left"
    raise Refusal(f"{where}: shape `{spec}`: alignment `{value}` is not br or tl")


def windowed(p):
    return p.get("window_left") is not None or p.get("window_right") is not None


def launch_args(p):
    """(B, H, Hkv, Lq, Lk, D, causal, align, window_left, window_right) as
    evo_attention_forward_ex takes them."""
    side = lambda w: -1 if w is None else w  # noqa: E731
    return (p["batch"], p["heads"], sb.kv_heads(p), p["q_len"], p["kv_len"], p["head_dim"],
            int(bool(p["causal"])), 1 if p.get("align") == "bottom_right" else 0,
            side(p.get("window_left")), side(p.get("window_right")))


def same_problem(row_problem, p, dtype):
    """Whether a bench row's `problem` (evo's Problem as JSON) is `p` in `dtype`."""
    want = dict(p, dtype=dtype)
    if want.get("align") == "top_left":
        del want["align"]
    got = {k: v for k, v in row_problem.items() if v is not None}
    if got.get("align") == "top_left":
        del got["align"]
    if got.get("kv_heads") == got.get("heads"):
        got.pop("kv_heads", None)
    return got == want


def load_bench(paths):
    """The rows of each `evo bench --json` file, or a Refusal naming the file."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                rows = json.load(f)
        except OSError as e:
            raise Refusal(f"--bench {path}: cannot read it ({e.strerror}); give the file "
                          "`evo bench --champions DIR --json FILE` wrote")
        except ValueError as e:
            raise Refusal(f"--bench {path}: not JSON ({e}); give the file "
                          "`evo bench --champions DIR --json FILE` wrote")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise Refusal(f"--bench {path}: not a list of rows; give the file "
                          "`evo bench --champions DIR --json FILE` wrote")
        runs.append((path, rows))
    return runs


def bench_figure(runs, cls, p, dtype):
    """(figure or None, why not): the median over the runs of the champion's timed
    figure on its own problem in `dtype`, its method, and the bench's cuDNN figure on
    that problem (None when a run has none). A class missing from any run has none."""
    figures, methods, cudnn = [], [], []
    for path, rows in runs:
        mine = [r for r in rows
                if r.get("kernel") == f"champion {cls}" and r.get("verdict") == "timed"
                and isinstance(r.get("problem"), dict) and same_problem(r["problem"], p, dtype)
                and isinstance(r.get("median_us"), (int, float))]
        if not mine:
            return None, (f"{path} has no timed row of `champion {cls}` on its problem in "
                          f"{dtype}")
        figures.append(mine[0]["median_us"])
        methods.append("events" if (mine[0].get("method") or "").startswith("events") else "graph")
        sdpa = [r for r in rows
                if r.get("kernel") == "sdpa-cudnn" and isinstance(r.get("problem"), dict)
                and same_problem(r["problem"], p, dtype)
                and isinstance(r.get("median_us"), (int, float))]
        cudnn.append(sdpa[0]["median_us"] if sdpa else None)
    return {
        "us": median_min_max(figures)[0],
        "method": methods[0],
        "cudnn_us": median_min_max(cudnn)[0] if all(c is not None for c in cudnn) else None,
        "source": f"median of {len(runs)} bench run(s)" if len(runs) > 1 else runs[0][0],
    }, None


def manifest_figure(entry, dtype):
    """The manifest's recorded figure for this dtype, or why there is none."""
    us = entry.get("median_us")
    if us is None:
        return None, "the manifest records no figure for it (never benched)"
    measured = entry.get("measured_dtype")
    if measured != dtype:
        return None, (f"the manifest's figure is {measured}'s, not {dtype}'s; give --bench "
                      f"with `evo bench --champions DIR --dtype {dtype} --json FILE`")
    return {"us": us, "method": "events" if us >= EVENTS_FROM_US else "graph",
            "cudnn_us": entry.get("cudnn_us"), "source": "the manifest"}, None


def allowed_us(then, slack, slack_us):
    """The slowest median that passes against the figure `then`."""
    return then * (1 + slack) + slack_us


def speed_verdict(rounds_us, figure, why_none, slack, slack_us, skip):
    """(ok, text) of the speed check of one class: its rounds' µs against the figure."""
    if skip:
        return True, "speed not judged (--skip-speed)"
    if figure is None:
        return False, f"FAIL: no figure to compare with ({why_none})"
    median = median_min_max(rounds_us)[0]
    limit = allowed_us(figure["us"], slack, slack_us)
    ratio = median / figure["us"]
    if median > limit:
        return False, (f"FAIL: {ratio:.3f}x the bench, slower than {figure['us']:.2f} µs "
                       f"by more than {slack:.0%} + {slack_us} µs (limit {limit:.2f} µs)")
    return True, f"ok: {ratio:.3f}x the bench (limit {limit:.2f} µs)"


def plan(manifest, dtype, runs, choose):
    """Per class of the manifest, in its order: what is run and against what.
    `choose(p)` is the export's rule: the class it dispatches `p` to."""
    rows = []
    for entry in manifest["champions"]:
        cls = entry["class"]
        p = parse_shape(entry["shape"], f"manifest.json, class `{cls}`")
        p["dtype"] = dtype
        if runs:
            figure, why = bench_figure(runs, cls, {k: v for k, v in p.items() if k != "dtype"}, dtype)
        else:
            figure, why = manifest_figure(entry, dtype)
        rows.append({"class": cls, "problem": p, "args": launch_args(p), "chosen": choose(p),
                     "figure": figure, "why_no_figure": why})
    return rows


def describe_problem(p):
    """One line: B H/Hkv Lq Lk D, the mask and the window."""
    heads = f"H{p['heads']}" + (f"/{sb.kv_heads(p)}" if sb.is_gqa(p) else "")
    mask = ""
    if p["causal"]:
        mask = " causal" + ("-br" if p.get("align") == "bottom_right" else "")
    elif p.get("align") == "bottom_right":
        mask = " br"
    if windowed(p):
        side = lambda w: "" if w is None else str(w)  # noqa: E731
        mask += f" window {side(p.get('window_left'))}:{side(p.get('window_right'))}"
    return f"B{p['batch']} {heads} Lq{p['q_len']} Lk{p['kv_len']} D{p['head_dim']}{mask}"


def report(rows, results, tol, args):
    """The table and the verdicts: (lines, failures). `results[class]` is None for a
    class that was not run (its `refused` says why), else {"rounds": [(µs, b2b µs,
    cuDNN µs or None)], "check": (rel_frob, max_abs, finite)}."""
    lines = [f"{'class':<38} {'rel_frob':>9} {'max_abs':>8} {'method':>6} {'µs':>8} "
             f"{'min':>8} {'max':>8} {'bench µs':>8} {'b2b µs':>8} {'cuDNN µs':>8} "
             f"{'bench cuDNN':>11}  verdict"]
    failures = 0
    for row in rows:
        cls, res = row["class"], results.get(row["class"])
        if res is None or res.get("refused"):
            lines.append(f"{cls:<38} FAIL: {res['refused'] if res else 'not run'}")
            failures += 1
            continue
        us = [r[0] for r in res["rounds"]]
        med, lo, hi = median_min_max(us)
        b2b = median_min_max([r[1] for r in res["rounds"]])[0]
        cud = [r[2] for r in res["rounds"] if r[2] is not None]
        cudnn = f"{median_min_max(cud)[0]:>8.2f}" if cud else f"{'n/a':>8}"
        rel_frob, max_abs, finite = res["check"]
        right = finite and rel_frob <= tol["rel_frob"] and max_abs <= tol["max_abs"]
        fast, speed = speed_verdict(us, row["figure"], row["why_no_figure"], args.slack,
                                    args.slack_us, args.skip_speed)
        figure = row["figure"]
        then = f"{figure['us']:>8.2f}" if figure else f"{'none':>8}"
        bench_cudnn = (f"{figure['cudnn_us']:>11.2f}" if figure and figure.get("cudnn_us")
                       else f"{'n/a':>11}")
        verdict = speed if right else "FAIL: outside GREEN's tolerances; " + speed
        failures += not (right and fast)
        method = figure["method"] if figure else res.get("method", "graph")
        lines.append(f"{cls:<38} {rel_frob:>9.2e} {max_abs:>8.2e} {method:>6} {med:>8.2f} "
                     f"{lo:>8.2f} {hi:>8.2f} {then} {b2b:>8.2f} {cudnn} {bench_cudnn}  {verdict}")
    speed = ("speed not judged (--skip-speed)" if args.skip_speed else
             f"speed: the median of {args.rounds} round(s) within {args.slack:.0%} + "
             f"{args.slack_us} µs per call of the bench's figure (scripts/export_check.py, "
             "TOLERANCE, says why)")
    lines.append(f"tolerances {args.dtype}: rel_frob {tol['rel_frob']}, max_abs {tol['max_abs']}; "
                 f"{speed}")
    lines.append(f"{len(rows) - failures} of {len(rows)} classes ok")
    return lines, failures


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Runs an export's champions from PyTorch.")
    ap.add_argument("export", help="the folder `evo export` wrote")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--bench", action="append", default=[],
                    help="`evo bench --champions DIR --json FILE` of this machine (repeatable)")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    ap.add_argument("--slack", type=float, default=SLACK,
                    help=f"relative allowance over the bench's figure (default {SLACK})")
    ap.add_argument("--slack-us", type=float, default=SLACK_US,
                    help=f"allowance in µs per call over it (default {SLACK_US})")
    ap.add_argument("--skip-speed", action="store_true",
                    help="check correctness and dispatch only; say that speed was not judged")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--plan", action="store_true",
                    help="print what would run and against what, then exit (no torch, no GPU)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        raise Refusal(f"--rounds {args.rounds}: give at least 1 (default {DEFAULT_ROUNDS})")
    for name in ("slack", "slack_us"):
        value = getattr(args, name)
        if not math.isfinite(value) or value < 0:
            raise Refusal(f"--{name.replace('_', '-')} {value}: give a finite number >= 0")
    return args


def read_manifest(export):
    """manifest.json of the export, checked before anything runs."""
    path = os.path.join(export, "manifest.json")
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except OSError as e:
        raise Refusal(f"{path}: cannot read it ({e.strerror}); give the folder `evo export` wrote")
    except ValueError as e:
        raise Refusal(f"{path}: not JSON ({e}); export again")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("champions"), list) \
            or not manifest["champions"]:
        raise Refusal(f"{path}: no champions; export a champions folder that has classes")
    if not os.path.isdir(os.path.join(export, "python", "evo_attention")):
        raise Refusal(f"{export}: no python/evo_attention; export again with this evo")
    return manifest


# --- torch and a GPU -------------------------------------------------------------------

class Runner:
    """One class on the GPU: its input sets, its launch through the C ABI, a round."""

    def __init__(self, torch, lib, row, dtype, seed):
        self.torch, self.lib, self.row, self.dtype = torch, lib, row, dtype
        self.p = row["problem"]
        self.method = row["figure"]["method"] if row["figure"] else "graph"
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.code = 0 if dtype == torch.float16 else 1
        self.bufs = self.sets = None

    def launch(self, q, k, v, o):
        b, h, hk, lq, lk, d, causal, align, wl, wr = self.row["args"]
        stream = self.torch.cuda.current_stream().cuda_stream
        status = self.lib.lib.evo_attention_forward_ex(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, hk, lq, lk, d,
            self.code, causal, align, wl, wr, stream)
        if status != 0:
            raise RuntimeError(f"evo_attention_forward_ex ({self.row['class']}): "
                               f"{self.lib.last_error()}")

    def allocate(self):
        torch, p = self.torch, self.p
        n = sb.input_sets(p)
        b, h, hk, lq, lk, d = p["batch"], p["heads"], sb.kv_heads(p), p["q_len"], p["kv_len"], p["head_dim"]
        self.bufs = [torch.randn(n, *shape, device="cuda", generator=self.gen).to(self.dtype)
                     for shape in ((b, h, lq, d), (b, hk, lk, d), (b, hk, lk, d))]
        self.bufs.append(torch.empty_like(self.bufs[0]))
        self.sets = [tuple(t[i] for t in self.bufs) for i in range(n)]

    def release(self):
        self.bufs = self.sets = None
        self.torch.cuda.empty_cache()

    def refresh(self):
        for t in self.bufs[:3]:
            t.normal_(generator=self.gen)

    def cudnn(self, F, SDPBackend, sdpa_kernel):
        """cuDNN on this problem, timed as the bench times SDPA; None if it refuses."""
        p, sets = self.p, self.sets
        form = sb.mask_form(p)
        kw = {"is_causal": form == "is_causal"}
        if form == "attn_mask":
            kw["attn_mask"] = sb.additive_mask(sb.visible_mask(p, "cuda"), self.dtype)
        if sb.is_gqa(p):
            kw["enable_gqa"] = True
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return sb.time_graph(lambda i: F.scaled_dot_product_attention(
                    *sets[i % len(sets)][:3], **kw))[0]
        except Exception as e:  # a backend that cannot state the problem
            print(f"  cuDNN on {self.row['class']}: {sb.describe(e)}", file=sys.stderr)
            return None

    def time_round(self, F, SDPBackend, sdpa_kernel):
        """(µs by the bench's method, back-to-back µs, cuDNN µs or None). Events first,
        right after the warm-up, as FAST takes them: after tens of ms of graph replays
        the same calls time up to ~5% slower on an H100 (experiments/2026-11-25-h100-record,
        run R5)."""
        sets = self.sets
        if self.method == "events":
            q, k, v, o = sets[0]
            us = time_events(self.torch, lambda: self.launch(q, k, v, o), self.refresh)
        else:
            us = time_sets(self.torch, lambda i: self.launch(*sets[i]), len(sets), self.refresh)
        b2b = time_b2b(self.torch, lambda i: self.launch(*sets[i % len(sets)]))
        return us, b2b, self.cudnn(F, SDPBackend, sdpa_kernel)

    def check(self):
        """(rel_frob, max_abs, finite) of one call against the float64 reference, on
        the rows that see a key; after the timing, which it must not precede."""
        torch, p = self.torch, self.p
        q, k, v, o = self.sets[0]
        self.launch(q, k, v, o)
        torch.cuda.synchronize()
        mask = sb.visible_mask(p, "cuda")
        has_key = None if mask is None or bool(mask.any(-1).all()) else mask.any(-1)
        c = sb.compare(o, chunked_reference(torch, q, k, v, mask), has_key)
        bad = float("inf")
        return (c["rel_frob"] if c["rel_frob"] is not None else bad,
                c["max_abs"] if c["max_abs"] is not None else bad, c["finite"])


def run_on_gpu(args, rows):
    """Times and checks every class that the export dispatches to itself; returns
    {class: result} as `report` reads it."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import evo_attention
    from evo_attention import _lib

    m = evo_attention.manifest()
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    lib = _lib.Library(_lib.library_path(m), m.export_dir)
    print(f"{torch.cuda.get_device_name(0)}; export of {m.device}, {m.data['arch']}, "
          f"evo {m.data['evo_version']}, NVRTC {m.data['nvrtc_version']}; {args.dtype}; "
          f"{args.rounds} round(s), {len(args.bench)} bench run(s)", flush=True)
    results, runners = {}, []
    for row in rows:
        p = row["problem"]
        q = torch.empty(p["batch"], p["heads"], p["q_len"], p["head_dim"], dtype=dtype, device="cuda")
        k = torch.empty(p["batch"], sb.kv_heads(p), p["kv_len"], p["head_dim"], dtype=dtype, device="cuda")
        if not evo_attention.covers(q, k, k, p["causal"], enable_gqa=sb.is_gqa(p)):
            results[row["class"]] = {"refused": "not covered by the export on this GPU"}
        elif row["chosen"] != row["class"]:
            results[row["class"]] = {"refused": f"the export dispatches its problem to "
                                                f"`{row['chosen']}`, not to its own champion"}
        else:
            runners.append(Runner(torch, lib, row, dtype, args.seed))
        del q, k
    for r in range(args.rounds):
        for run in list(runners):
            try:
                run.allocate()
                us, b2b, cudnn = run.time_round(F, SDPBackend, sdpa_kernel)
                res = results.setdefault(run.row["class"], {"rounds": [], "method": run.method})
                res["rounds"].append((us, b2b, cudnn))
                if r == 0:
                    res["check"] = run.check()
            except RuntimeError as e:  # the runtime's refusal or a CUDA error: this class fails
                results[run.row["class"]] = {"refused": str(e)}
                runners.remove(run)
                run.release()
                continue
            cud = "n/a" if cudnn is None else f"{cudnn:.2f}"
            print(f"round {r + 1}: {run.row['class']:<38} {run.method:>6} {us:>9.2f} µs "
                  f"(b2b {b2b:.2f}, cuDNN {cud})", flush=True)
            run.release()
    return results


def main(argv=None):
    try:
        args = parse_args(argv)
        manifest = read_manifest(args.export)
        runs = load_bench(args.bench)
        sys.path.insert(0, os.path.join(args.export, "python"))
        from evo_attention.dispatch import Manifest  # pure Python, no torch

        rule = Manifest(args.export)

        def choose(p):
            c = rule.choose(p["batch"], p["heads"], p["q_len"], p["kv_len"], p["head_dim"],
                            p["causal"], sb.kv_heads(p), windowed(p))
            return c["class"] if c else None

        rows = plan(manifest, args.dtype, runs, choose)
        tol = {t["dtype"]: t for t in manifest.get("tolerances", [])}.get(args.dtype)
        if tol is None:
            raise Refusal(f"{os.path.join(args.export, 'manifest.json')}: no GREEN tolerance "
                          f"for {args.dtype}; export again with this evo")
    except Refusal as e:
        print(f"export_check.py: {e}", file=sys.stderr)
        return 2
    if args.plan:
        for row in rows:
            f = row["figure"]
            against = (f"against {f['us']:.2f} µs ({f['method']}, {f['source']}), limit "
                       f"{allowed_us(f['us'], args.slack, args.slack_us):.2f} µs"
                       if f else f"no figure: {row['why_no_figure']}")
            print(f"{row['class']}: {describe_problem(row['problem'])}; forward_ex"
                  f"{row['args']}; dispatched to {row['chosen']}; {against}")
        return 0
    results = run_on_gpu(args, rows)
    lines, failures = report(rows, results, tol, args)
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

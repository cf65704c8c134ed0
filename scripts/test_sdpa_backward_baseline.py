#!/usr/bin/env python3
"""CPU checks of scripts/sdpa_backward_baseline.py's pure parts: its options, the
backward's FLOP count against numbers worked by hand, the input sets, the refusal of
masks is_causal cannot state, the binding of op arguments by schema name, and the JSON
shape of a row (the keys crates/gates/src/baselines.rs reads, `pass` among them).

Usage: python3 scripts/test_sdpa_backward_baseline.py   (exit status 0 and "ok" when every
check passes). No GPU and no torch needed.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_backward_baseline as bb  # noqa: E402
from test_sdpa_baseline import problem  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}", file=sys.stderr)


def test_args():
    a = bb.parse_args(["--shapes", "[]"])
    check(a.backends == "cudnn,flash,efficient" and a.seed == 0 and a.q_gain == 1.0
          and not a.cold_l2 and not a.no_timing, f"defaults {a}")
    # the flags evo bench passes (crates/gates/src/baselines.rs, run_sdpa)
    a = bb.parse_args(["--shapes", '[{"batch":1}]', "--seed", "2026", "--cold-l2"])
    check(a.seed == 2026 and a.cold_l2 and json.loads(a.shapes) == [{"batch": 1}], f"bench flags {a}")
    a = bb.parse_args(["--shapes", "[]", "--backends", "flash", "--no-timing", "--q-gain", "8"])
    check(a.backends == "flash" and a.no_timing and a.q_gain == 8.0, f"calibration flags {a}")


def test_flops():
    # 2.5 x 4*B*H*Lq*Lk*D: B1 H8 L512 D64 = 2.5 * 536870912
    check(bb.flops(problem(h=8, lq=512, lk=512)) == 1342177280.0, "bwd flops plain")
    check(bb.flops(problem(h=8, lq=512, lk=512, causal=True)) == 671088640.0, "bwd flops causal")
    # B2 H16 L4096 D128: 4*2*16*4096*4096*128 = 274877906944, x2.5
    p = problem(b=2, h=16, lq=4096, lk=4096, d=128)
    check(bb.flops(p) == 687194767360.0, "bwd flops L4096")
    # ANCHORS' cuDNN figure: 1313 µs at this shape is 523 TFLOP/s
    check(round(bb.flops(p) / 1313e-6 / 1e12) == 523, "bwd flops vs ANCHORS")
    check(bb.flops(problem(h=8, kv=2, lq=16, lk=16)) == 2.5 * 524288.0, "bwd flops gqa")


def test_input_sets():
    # B1 H8 L512 D64: Q, O, dO, K, V 256 Ki elements each in 16 bits (2.5 MiB) + lse
    # 16 KiB -> ceil(100 MiB / 2.5156 MiB) = 40
    check(bb.input_sets(problem(h=8, lq=512, lk=512)) == 40, "sets seed")
    check(bb.input_sets(problem(b=2, h=16, lq=4096, lk=4096, d=128)) == 1, "sets large")
    check(bb.input_sets(problem(h=8, lq=64, lk=64)) == 64, "sets capped")
    # GQA: fewer K/V bytes -> more sets; expanded K/V read all heads
    gqa = problem(h=16, kv=4, lq=1024, lk=1024)
    check(bb.input_sets(gqa) > bb.input_sets(gqa, kv=16), "sets gqa vs expanded")


def test_unsupported():
    check(bb.unsupported(problem()) is None, "plain supported")
    check(bb.unsupported(problem(causal=True)) is None, "causal supported")
    check(bb.unsupported(problem(causal=True, align="bottom_right")) is None, "br square supported")
    check(bb.unsupported(problem(h=4, kv=2, causal=True)) is None, "gqa supported")
    for p in (problem(lq=7, lk=3, causal=True, align="bottom_right"), problem(wl=2, wr=1)):
        r = bb.unsupported(p)
        check(r is not None and r.startswith("unsupported"), f"unsupported {p}")
        check(bb.problem_refusal(p) == r, f"refusal {p}")
    r = bb.problem_refusal(problem(h=4, kv=3))
    check(r is not None and r.startswith("ValueError") and "kv_heads" in r, f"bad problem {r}")


class Arg:
    """A schema argument as torch._C.Argument shows it."""

    def __init__(self, name, kwarg_only=False, default=False):
        self.name, self.kwarg_only, self._default = name, kwarg_only, default

    def has_default_value(self):
        return self._default


def test_bind():
    # the flash backward's schema (torch 2.11), in order
    schema = [Arg(n) for n in ("grad_out", "query", "key", "value", "out", "logsumexp",
                               "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p",
                               "is_causal", "philox_seed", "philox_offset")]
    schema.append(Arg("scale", kwarg_only=True, default=True))
    values = {a.name: a.name.upper() for a in schema}
    values["unrelated"] = 1
    args, kwargs = bb.bind(schema, values)
    check(args == [a.name.upper() for a in schema[:-1]] and kwargs == {"scale": "SCALE"}, "bind all")
    # a defaulted positional left out: what follows goes by keyword
    fwd = [Arg("query"), Arg("dropout_p", default=True), Arg("is_causal", default=True),
           Arg("scale", kwarg_only=True, default=True)]
    args, kwargs = bb.bind(fwd, {"query": 1, "is_causal": True})
    check(args == [1] and kwargs == {"is_causal": True}, f"bind default {args} {kwargs}")
    try:
        bb.bind(schema, {"grad_out": 0}, "flash_bwd")
        check(False, "bind missing must raise")
    except ValueError as e:
        check("flash_bwd" in str(e) and "`query`" in str(e), f"bind message {e}")


def test_row_json():
    p = problem(h=8, lq=512, lk=512)
    row = bb.blank_row("cudnn", p, "NVIDIA H100 80GB HBM3")
    for key in ("backend", "problem", "device", "median_us", "min_us", "max_us", "tflops",
                "rel_frob", "max_abs", "error", "timing"):
        check(key in row, f"row key {key}")
    check(row["pass"] == "backward", "row pass")
    errors = {"dq": {"rel_frob": 1e-3, "max_abs": 0.01}, "dk": {"rel_frob": 2e-3, "max_abs": 0.005},
              "dv": {"rel_frob": 5e-4, "max_abs": 0.02}}
    check(bb.worst(errors, "rel_frob") == 2e-3 and bb.worst(errors, "max_abs") == 0.02, "worst")
    errors["dk"]["rel_frob"] = None
    check(bb.worst(errors, "rel_frob") is None, "worst none")
    row.update(grads=errors, empty_row_lse=bb.fmt_value(math.inf))
    back = json.loads(json.dumps([row], allow_nan=False))
    check(back[0]["empty_row_lse"] == "+inf" and back[0]["problem"] == p, "row json")
    check(bb.fmt_value(-math.inf) == "-inf" and bb.fmt_value(math.nan) == "nan"
          and bb.fmt_value(1.5) == 1.5, "fmt_value")


def main():
    test_args()
    test_flops()
    test_input_sets()
    test_unsupported()
    test_bind()
    test_row_json()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

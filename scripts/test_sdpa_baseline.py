#!/usr/bin/env python3
"""CPU checks of scripts/sdpa_baseline.py's pure parts: the visible-key rule against a
brute-force loop over the rule's definition, flops against numbers worked by hand,
input_sets, the mask form chosen for SDPA, and (when torch is importable) the boolean
mask, flex's mask_mod, the additive mask, the float64 reference and the comparison.

Usage: python3 scripts/test_sdpa_baseline.py   (exit status 0 when every check passes;
the torch checks print a skip line when torch is not importable). No GPU needed.
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_baseline as sb  # noqa: E402


def problem(b=1, h=1, lq=8, lk=8, d=64, causal=False, kv=None, align=None, wl=None, wr=None):
    p = {"batch": b, "heads": h, "q_len": lq, "kv_len": lk, "head_dim": d, "dtype": "f16",
         "causal": causal}
    for key, value in (("kv_heads", kv), ("align", align), ("window_left", wl), ("window_right", wr)):
        if value is not None:
            p[key] = value
    return p


def sees(p, i, j):
    """The rule as problem.rs's doc comment states it, one (i, j) at a time."""
    d = i + (p["kv_len"] - p["q_len"] if p.get("align") == "bottom_right" else 0)
    if p.get("causal") and j > d:
        return False
    if p.get("window_left") is not None and j < d - p["window_left"]:
        return False
    if p.get("window_right") is not None and j > d + p["window_right"]:
        return False
    return True


def brute(p):
    return [[sees(p, i, j) for j in range(p["kv_len"])] for i in range(p["q_len"])]


# Small shapes covering every kind: GQA, bottom-right causal with Lq > Lk (empty rows)
# and Lq < Lk, two-sided and one-sided windows, windows on bottom-right without causal.
SHAPES = [
    problem(),
    problem(causal=True),
    problem(h=4, kv=2, lq=6, lk=9, causal=True),
    problem(h=4, kv=1, lq=5, lk=5),
    problem(lq=7, lk=3, causal=True, align="bottom_right"),
    problem(lq=3, lk=7, causal=True, align="bottom_right"),
    problem(lq=7, lk=3, causal=True),
    problem(lq=8, lk=8, wl=2, wr=1),
    problem(lq=6, lk=10, wl=1, wr=0, align="bottom_right"),
    problem(lq=10, lk=4, wl=0, wr=0, align="bottom_right"),
    problem(lq=9, lk=9, causal=True, wl=3),
    problem(lq=5, lk=12, causal=True, wl=2, align="bottom_right"),
    problem(lq=12, lk=5, wr=0),
    problem(lq=4, lk=4, wl=100, wr=100),
    problem(lq=1, lk=9, causal=True, align="bottom_right"),
]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL {what}", file=sys.stderr)


def test_visible_keys():
    for p in SHAPES:
        rows = brute(p)
        for i, row in enumerate(rows):
            lo, hi = sb.visible_keys(p, i)
            expect = [lo <= j < hi for j in range(p["kv_len"])]
            check(lo <= hi and row == expect, f"visible_keys {p} row {i}: {lo}..{hi} vs {row}")
        pairs = sum(map(sum, rows))
        check(sb.visible_pairs(p) == pairs, f"visible_pairs {p}")
        check(sb.empty_rows(p) == sum(1 for r in rows if not any(r)), f"empty_rows {p}")


def test_flops():
    # by hand: 4*B*H*Lq*Lk*D
    check(sb.flops(problem(h=8, lq=512, lk=512)) == 536870912.0, "flops plain")
    check(sb.flops(problem(h=8, lq=512, lk=512, causal=True)) == 268435456.0, "flops causal")
    # top-left causal is halved even with Lq != Lk (the benchmarks' convention)
    check(sb.flops(problem(lq=4, lk=2, causal=True)) == 4 * 64 * 4 * 2 / 2, "flops causal Lq>Lk")
    # GQA does not change the work: 4*8*16*16*64
    check(sb.flops(problem(h=8, kv=2, lq=16, lk=16)) == 524288.0, "flops gqa")
    # bottom-right causal, Lq=4 Lk=2: rows see 0, 0, 1, 2 keys = 3 pairs
    check(sb.flops(problem(lq=4, lk=2, causal=True, align="bottom_right")) == 4 * 64 * 3, "flops br")
    check(sb.empty_rows(problem(lq=4, lk=2, causal=True, align="bottom_right")) == 2, "empty br")
    # bottom-right causal with Lq == Lk counts pairs, 4+3+2+1 = 10, not L*L/2 = 8
    check(sb.flops(problem(lq=4, lk=4, causal=True, align="bottom_right")) == 4 * 64 * 10, "flops br square")
    # bottom-right causal Lq=2 Lk=5: rows see 4 and 5 keys
    check(sb.flops(problem(lq=2, lk=5, causal=True, align="bottom_right")) == 4 * 64 * 9, "flops br Lq<Lk")
    # window 2:1 on L=8: rows see 2,3,4,4,4,4,4,3 = 28 keys; B2 H4 D128
    check(sb.flops(problem(b=2, h=4, d=128, wl=2, wr=1)) == 4 * 2 * 4 * 128 * 28, "flops window")
    # a left window on causal L=9, wl=3: rows see 1,2,3,4,4,4,4,4,4 = 30
    check(sb.flops(problem(lq=9, lk=9, causal=True, wl=3)) == 4 * 64 * 30, "flops sliding")
    # a window that bounds nothing still counts pairs (= the full count)
    check(sb.flops(problem(lq=4, lk=4, wl=100, wr=100)) == 4 * 64 * 16, "flops wide window")


def test_input_sets():
    # B1 H16 L2048 D64: Q, O 2 Mi elements each, K, V too: 16 MiB -> ceil(100/16) = 7
    check(sb.input_sets(problem(h=16, lq=2048, lk=2048)) == 7, "input_sets mha")
    # kv_heads 4: K, V 0.5 Mi elements each: 10 MiB -> 10 sets
    check(sb.input_sets(problem(h=16, kv=4, lq=2048, lk=2048)) == 10, "input_sets gqa")
    # the expanded-kv variant reads all heads
    check(sb.input_sets(problem(h=16, kv=4, lq=2048, lk=2048), kv=16) == 7, "input_sets expanded")
    check(sb.input_sets(problem(h=32, kv=8, lq=4096, lk=4096, d=128)) == 1, "input_sets large")
    check(sb.input_sets(problem(h=8, lq=64, lk=64)) == 64, "input_sets capped")


def test_mask_form():
    check(sb.mask_form(problem()) == "none", "form plain")
    check(sb.mask_form(problem(causal=True)) == "is_causal", "form causal")
    check(sb.mask_form(problem(lq=7, lk=3, causal=True)) == "is_causal", "form causal Lq>Lk")
    check(sb.mask_form(problem(causal=True, align="bottom_right")) == "is_causal", "form br square")
    check(sb.mask_form(problem(lq=7, lk=3, causal=True, align="bottom_right")) == "attn_mask", "form br")
    check(sb.mask_form(problem(lq=1, lk=9, causal=True, align="bottom_right")) == "none", "form decode")
    check(sb.mask_form(problem(wl=2, wr=1)) == "attn_mask", "form window")
    check(sb.mask_form(problem(lq=4, lk=4, wl=100, wr=100)) == "none", "form wide window")
    check(sb.mask_form(problem(lq=4, lk=4, causal=True, wl=100)) == "is_causal", "form wide causal")
    check(sb.is_plain(problem(causal=True)) and sb.is_plain(problem(causal=True, align="bottom_right")),
          "plain")
    check(not sb.is_plain(problem(h=4, kv=2)) and not sb.is_plain(problem(wl=3))
          and not sb.is_plain(problem(lq=4, lk=8, causal=True, align="bottom_right")), "not plain")
    check(sb.is_plain(problem(h=4, kv=4)), "kv_heads == heads is plain")
    check(sb.problem_error(problem(h=4, kv=3)) is not None, "kv_heads must divide heads")
    check(sb.problem_error(problem(align="diagonal")) is not None, "align checked")
    check(all(sb.problem_error(p) is None for p in SHAPES), "valid shapes pass")
    # a shape with no figure: one row per backend that would have run, flex never
    rows = sb.failed_rows(["cudnn", "flash", "efficient", "flex"],
                          lambda name: {"backend": name, "error": None}, "why")
    check([(r["backend"], r["error"]) for r in rows]
          == [("cudnn", "why"), ("flash", "why"), ("efficient", "why")], "failed_rows")


def test_torch():
    try:
        import torch
    except ImportError:
        print("skip: torch is not importable (mask, reference and comparison checks)")
        return
    for p in SHAPES:
        mask = sb.visible_mask(p)
        if not sb.masked(p):
            check(mask is None, f"no mask for {p}")
            continue
        check(mask.tolist() == brute(p), f"visible_mask {p}")
        # flex evaluates the mask_mod on index tensors; broadcast ones give the same rule
        qi = torch.arange(p["q_len"]).view(-1, 1).expand(-1, p["kv_len"])
        ki = torch.arange(p["kv_len"]).view(1, -1).expand(p["q_len"], -1)
        check(sb.mask_rule(p, qi, ki).tolist() == brute(p), f"mask_rule {p}")
        bias = sb.additive_mask(mask, torch.float16)
        check(bias.stride(0) % 16 == 0 and bias.shape == mask.shape, "additive_mask aligned")
        check(torch.equal(bias == 0, mask) and bool(torch.isinf(bias[~mask]).all()), "additive_mask values")

    # the reference against a loop: grouped heads, masked keys, zeros for empty rows
    gen = torch.Generator().manual_seed(1)
    for p in SHAPES:
        b, h, hk, lq, lk, d = p["batch"], p["heads"], sb.kv_heads(p), p["q_len"], p["kv_len"], 16
        q = torch.randn(b, h, lq, d, generator=gen, dtype=torch.float64)
        k = torch.randn(b, hk, lk, d, generator=gen, dtype=torch.float64)
        v = torch.randn(b, hk, lk, d, generator=gen, dtype=torch.float64)
        ref = sb.reference(q, k, v, sb.visible_mask(p))
        rows = brute(p)
        want = torch.zeros(b, h, lq, d, dtype=torch.float64)
        for bi in range(b):
            for hi in range(h):
                kh = hi // (h // hk)
                for i in range(lq):
                    keys = [j for j in range(lk) if rows[i][j]]
                    if not keys:
                        continue
                    s = torch.stack([q[bi, hi, i] @ k[bi, kh, j] for j in keys]) / math.sqrt(d)
                    w = torch.softmax(s, 0)
                    want[bi, hi, i] = sum(w[n] * v[bi, kh, j] for n, j in enumerate(keys))
        check(torch.allclose(ref, want, rtol=1e-12, atol=1e-12), f"reference {p}")
        # a head and a block of rows at a time, as a problem past REF_CHUNK is computed
        whole, sb.REF_CHUNK = sb.REF_CHUNK, max(1, lk * b * 3)
        try:
            chunked = sb.reference(q, k, v, sb.visible_mask(p))
        finally:
            sb.REF_CHUNK = whole
        check(torch.allclose(chunked, want, rtol=1e-12, atol=1e-12), f"chunked reference {p}")
        # a decode-like problem: few scores, but K/V expanded to every head past REF_CHUNK
        # (B64 H32/8 Lk32768 D128's would be 64 GiB in float64): chunked by heads too
        whole, sb.REF_CHUNK = sb.REF_CHUNK, b * h * lq * lk
        try:
            if b * h * lk * d > sb.REF_CHUNK:
                calls, block = [], sb._reference_block
                sb._reference_block = lambda *a: calls.append(a[0].shape[1]) or block(*a)
                try:
                    by_heads = sb.reference(q, k, v, sb.visible_mask(p))
                finally:
                    sb._reference_block = block
                check(calls and max(calls) == 1, f"reference by heads when K/V is large {p}")
                check(torch.allclose(by_heads, want, rtol=1e-12, atol=1e-12),
                      f"reference by heads {p}")
        finally:
            sb.REF_CHUNK = whole

    # a shape whose inputs or reference fail is reported, not raised: the run goes on
    p = problem(lq=5, lk=7, causal=True)
    drawn, why = sb.draw_and_reference(p, 0, 1.0, device="cpu")
    check(why is None and drawn[0].dtype == torch.float16
          and tuple(drawn[4].shape) == (1, 1, 5, 64) and drawn[4].dtype == torch.float64,
          f"draw_and_reference draws the inputs and their reference: {why}")
    real = sb.reference

    def out_of_memory(*_):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
    sb.reference = out_of_memory
    try:
        drawn, why = sb.draw_and_reference(p, 0, 1.0, device="cpu")
    finally:
        sb.reference = real
    check(drawn is None and "out of memory" in why and "float64 reference" in why,
          f"a failed reference is a reason, not an exception: {why}")

    # the comparison: NaN in empty rows is recorded, not counted; elsewhere it is
    p = problem(lq=7, lk=3, causal=True, align="bottom_right")
    mask = sb.visible_mask(p)
    has_key = mask.any(-1)
    check(int((~has_key).sum()) == sb.empty_rows(p) == 4, "has_key matches empty_rows")
    ref = torch.randn(1, 2, 7, 16, dtype=torch.float64)
    ref[..., ~has_key, :] = 0
    out = ref.half().clone()
    out[..., ~has_key, :] = float("nan")
    c = sb.compare(out, ref, has_key)
    check(c["finite"] and c["empty_rows_nan"] and c["empty_rows_max_abs"] is None, f"compare nan rows {c}")
    check(c["rel_frob"] is not None and c["rel_frob"] < 1e-3, f"compare rel_frob {c}")
    out[..., ~has_key, :] = 0.5
    c = sb.compare(out, ref, has_key)
    check(not c["empty_rows_nan"] and c["empty_rows_max_abs"] == 0.5, f"compare finite rows {c}")
    out[0, 0, -1, 0] = float("nan")
    c = sb.compare(out, ref, has_key)
    check(not c["finite"] and c["rel_frob"] is None, f"compare nan in a seen row {c}")
    c = sb.compare(ref.half(), ref)
    check(set(c) == {"rel_frob", "max_abs", "finite"} and c["finite"], "compare plain")


def main():
    test_visible_keys()
    test_flops()
    test_input_sets()
    test_mask_form()
    test_torch()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

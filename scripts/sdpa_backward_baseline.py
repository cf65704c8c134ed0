#!/usr/bin/env python3
"""PyTorch's attention backward kernels as baselines for `evo bench`: per backend (cuDNN,
flash, efficient), the backward kernel alone, timed the way the FAST gate times a kernel,
with the errors of dQ, dK, dV against float64 autograd on the same inputs (the
calibration of GREEN's backward tolerances).

Usage (the CLI of scripts/sdpa_baseline.py):
  sdpa_backward_baseline.py --shapes '[{"batch":1,"heads":8,"q_len":512,"kv_len":512,
                                        "head_dim":64,"dtype":"f16","causal":false}]'
                            [--seed N] [--q-gain G] [--backends cudnn,flash,efficient]
                            [--no-timing] [--cold-l2]

Problems are evo's `Problem` as JSON, exactly as sdpa_baseline.py reads them.

What is timed: per problem and backend the forward op runs ONCE, outside the timing
(torch.ops.aten._scaled_dot_product_{cudnn,flash,efficient}_attention, giving O, the
log-sum-exp and the philox/sequence bookkeeping its backward takes); then only the
backward op (..._attention_backward) is timed, fed that O and lse and a random dO laid
out with O's strides (PyTorch built with cuDNN < 9.5.1 copies a dO whose strides differ
from O's inside the call, which no fused backward does). The ops' arguments are bound
by name from their schemas in this torch (`bind`), so a reordered schema is followed and
a new required argument is a row's error naming the schema, never a silent misbinding.

Timing is sdpa_baseline.py's (`time_graph`, `time_cold`): a CUDA graph of N back-to-back
calls replayed 20 times ("graph"), single calls between events for calls of 200 µs and
more ("events"), and with --cold-l2 single calls each after an L2 flush ("cold-l2").
The calls rotate among enough input sets (Q, K, V, O, dO in 16 bits, lse in fp32) to
overflow L2 twice (`input_sets`). TFLOP/s counts FlashAttention's convention: the
backward is 2.5x the forward's work, 2.5 * 4*B*H*Lq*Lk*D, halved for causal (`flops`).

Output: notes on stderr, one JSON array on the last line of stdout, one object per
(shape, backend), the keys of sdpa_baseline.py's rows plus
  pass          "backward".
  rel_frob, max_abs   the worst of dQ, dK, dV (per-tensor figures in `grads`).
  grads         {"dq": {"rel_frob", "max_abs"}, "dk": {...}, "dv": {...}} against float64
                autograd through sdpa_baseline.reference on the same Q, K, V, dO.
  out_rel_frob  the error of the O the backward was fed (the forward's own).
  lse_shape     the shape of the forward's lse (cuDNN [B, H, Lq, 1]; efficient pads Lq).
  lse_max_abs   max |lse - float64 logsumexp of the scaled scores| (natural log).
  lse_base      "e" when the lse is a natural log, "2" when a base-2 one fits better.
  empty_row_lse, empty_row_out, empty_row_dq, empty_row_probe
                what the backend does for a query row that sees no key, from one small
                probe per backend (not timed): the lse it stores for that row ("+inf",
                "-inf", "nan" or a number), whether its O row and dQ row are "zeros",
                "nan" or "nonzero", and how the empty row was made (flash: the raw op's
                causal with Lq > Lk, empty only if it aligns bottom-right; cuDNN and
                efficient: an additive bias row of -inf). null fields: not observable.
                Seen on torch 2.11 (experiments/2026-11-26-h100-bwd-baselines): lse
                cuDNN -inf, flash +inf, efficient 0; O and dQ rows zeros in all three.
  mask, variant, gqa_error   as in sdpa_baseline.py, for problems that are not plain.
GQA/MQA: the forward and backward ops first get K/V with kv_heads heads (as SDPA's
enable_gqa would); where that raises or the forward's O is wrong
(rel_frob > GQA_OUT_TOL), K/V are expanded to every head once outside the timing (variant
"expanded-kv"), the timed backward reads and writes H heads of K/V, and dK/dV are summed
over each group in fp32 (outside the timing) before the comparison.
Masks is_causal cannot state (bottom-right causal with Lq != Lk, windows): the row's
error is "unsupported: ..." (the backward ops take no window; a dense bias would time
something else).

The pure-Python parts (flops, input_sets, unsupported, bind, fmt_value) need no torch;
scripts/test_sdpa_backward_baseline.py checks them on the CPU.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_baseline as sb  # noqa: E402  (the problem's rule, the timing, the reference)

torch = sb.torch

# FlashAttention's count: the backward does 2.5x the forward's matrix work
# (S, dP, dV, dK, dQ: five products of the forward's two, S recomputed).
BWD_FLOP_FACTOR = 2.5
BACKEND_NAMES = ("cudnn", "flash", "efficient")
OPS = {
    "cudnn": ("_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"),
    "flash": ("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward"),
    "efficient": ("_scaled_dot_product_efficient_attention",
                  "_scaled_dot_product_efficient_attention_backward"),
}
# The forward ops' return names, as their backward ops name the same values (flash
# returns its philox seed and offset as `rng_state` and `unused`).
RETURN_ALIASES = {"rng_state": "philox_seed", "unused": "philox_offset",
                  "log_sumexp": "logsumexp", "output": "out"}
# The forward ops' returns in order, for a schema that leaves them unnamed.
RETURN_ORDER = {
    "cudnn": ("out", "logsumexp", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "philox_seed",
              "philox_offset", "debug_attn_mask"),
    "efficient": ("out", "logsumexp", "philox_seed", "philox_offset"),
}
RETURN_ORDER["flash"] = RETURN_ORDER["cudnn"]
# The forward's O with grouped K/V heads must match float64 this well, else the
# backend is taken not to support grouped heads (f16 lands near 3e-4).
GQA_OUT_TOL = 0.05
# float64 score matrix of one chunk of the reference (autograd keeps ~4 of them).
REF_CHUNK_BYTES = 1 << 30


# --- pure Python --------------------------------------------------------------------

def flops(p):
    """The backward's work by FlashAttention's convention: 2.5x evo's Problem::flops."""
    return BWD_FLOP_FACTOR * sb.flops(p)


def input_sets(p, kv=None):
    """Input sets the timed calls rotate among: Q, O, dO and K, V (with `kv` heads, default
    kv_heads) in 16 bits and the fp32 lse, enough sets to overflow L2 twice."""
    kv = sb.kv_heads(p) if kv is None else kv
    q = p["batch"] * p["heads"] * p["q_len"] * p["head_dim"]
    kvn = p["batch"] * kv * p["kv_len"] * p["head_dim"]
    nbytes = 2 * (3 * q + 2 * kvn) + 4 * p["batch"] * p["heads"] * p["q_len"]
    if nbytes >= sb.L2_BYTES:
        return 1
    return max(1, min(sb.MAX_SETS, math.ceil(2 * sb.L2_BYTES / nbytes)))


def unsupported(p):
    """Why the backward ops cannot state `p`'s mask, or None."""
    if sb.mask_form(p) == "attn_mask":
        return ("unsupported: the mask (bottom-right causal with Lq != Lk, or a window) is "
                "not one is_causal states, and the backward ops take no window")
    return None


def bind(arguments, values, op_name="op"):
    """(args, kwargs) for a call of an op whose schema arguments are `arguments` (objects
    with .name, .kwarg_only, .has_default_value()), each value taken from `values` by
    name. Positional while every argument is supplied, keywords after the first one left
    to its default. Raises ValueError naming the argument when a required one is missing."""
    args, kwargs, positional = [], {}, True
    for a in arguments:
        if a.name not in values:
            if a.has_default_value():
                positional = False
                continue
            raise ValueError(f"{op_name} needs `{a.name}`, which this script does not supply "
                             f"(its schema: {', '.join(x.name for x in arguments)})")
        if positional and not a.kwarg_only:
            args.append(values[a.name])
        else:
            positional = False
            kwargs[a.name] = values[a.name]
    return args, kwargs


def fmt_value(x):
    """A float as the rows state it: "+inf", "-inf", "nan", or the number."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    return x


def worst(errors, key):
    """The largest `key` over the per-tensor errors; None when any is None."""
    vals = [e[key] for e in errors.values()]
    return None if any(v is None for v in vals) else max(vals)


# --- torch --------------------------------------------------------------------------

def op(name):
    return getattr(torch.ops.aten, name).default


def call(name, values):
    """Calls aten op `name` with its arguments bound from `values` by name."""
    o = op(name)
    args, kwargs = bind(o._schema.arguments, values, name)
    return o(*args, **kwargs)


def forward_values(name, values):
    """Runs backend `name`'s forward op; returns its outputs by the names the backward
    op uses (out, logsumexp, philox_seed, philox_offset, cum_seq_q, ...)."""
    fwd = OPS[name][0]
    outs = call(fwd, values)
    names = [RETURN_ALIASES.get(r.name, r.name) for r in op(fwd)._schema.returns]
    if not all(names):  # an unnamed return: the order this torch's schemas have
        names = list(RETURN_ORDER[name])
    named = dict(zip(names, outs))
    named["out"], named["logsumexp"] = outs[0], outs[1]
    return named


def base_values(q, k, v, causal, bias=None):
    scale = 1.0 / math.sqrt(q.shape[-1])
    return {"query": q, "key": k, "value": v, "attn_bias": bias, "dropout_p": 0.0,
            "is_causal": causal, "scale": scale, "compute_log_sumexp": True,
            "return_debug_mask": False, "grad_input_mask": [True, True, True, False]}


def backward_values(vals, named, do):
    """The backward op's arguments: the forward's inputs and outputs and dO (with O's
    strides)."""
    d = dict(vals)
    d.update(named)
    g = torch.empty_like(named["out"])
    g.copy_(do)
    d["grad_out"] = d["grad_out_"] = g
    return d


def reference_backward(q, k, v, do, mask):
    """float64 O, dQ, dK, dV and natural-log lse by autograd through
    sdpa_baseline.reference, in chunks of (batch, K/V heads) whose score matrix stays
    under REF_CHUNK_BYTES. `mask` is None or one without empty rows (reference's
    in-place zeroing of empty rows would break autograd)."""
    b, h, lq, d = q.shape
    hk, lk = k.shape[1], k.shape[2]
    g = h // hk
    step = max(1, REF_CHUNK_BYTES // (g * lq * lk * 8))
    f64 = torch.float64
    out, dq = torch.empty(q.shape, dtype=f64, device=q.device), torch.empty(q.shape, dtype=f64, device=q.device)
    dk, dv = torch.empty(k.shape, dtype=f64, device=q.device), torch.empty(k.shape, dtype=f64, device=q.device)
    lse = torch.empty(b, h, lq, dtype=f64, device=q.device)
    for bi in range(b):
        for g0 in range(0, hk, step):
            g1 = min(hk, g0 + step)
            hs, ks = slice(g0 * g, g1 * g), slice(g0, g1)
            with torch.enable_grad():
                qc = q[bi:bi + 1, hs].double().requires_grad_()
                kc = k[bi:bi + 1, ks].double().requires_grad_()
                vc = v[bi:bi + 1, ks].double().requires_grad_()
                oc = sb.reference(qc, kc, vc, mask)
                oc.backward(do[bi:bi + 1, hs].double())
            out[bi:bi + 1, hs] = oc.detach()
            dq[bi:bi + 1, hs], dk[bi:bi + 1, ks], dv[bi:bi + 1, ks] = qc.grad, kc.grad, vc.grad
            with torch.no_grad():
                s = qc.detach() @ sb.expand_kv(kc.detach(), g).transpose(-1, -2) / math.sqrt(d)
                if mask is not None:
                    s.masked_fill_(~mask, float("-inf"))
                lse[bi:bi + 1, hs] = torch.logsumexp(s, -1)
            del qc, kc, vc, oc, s
    return out, dq, dk, dv, lse


def row_state(t):
    """"zeros", "nan" or "nonzero" for one row of an output."""
    if bool(torch.isnan(t).any()):
        return "nan"
    return "zeros" if bool((t == 0).all()) else "nonzero"


def probe_empty_row(name):
    """What backend `name` stores and writes for a query row that sees no key (see the
    module doc); fields null where the row could not be made empty."""
    res = {"empty_row_lse": None, "empty_row_out": None, "empty_row_dq": None}
    if name == "flash":
        lq, lk, causal = 256, 128, True
        how = "raw op, is_causal with Lq 256 > Lk 128 (row 0 empty only if aligned bottom-right)"
    else:
        lq, lk, causal = 128, 128, False
        how = "attn_bias whose row 0 is all -inf, Lq = Lk = 128"
    res["empty_row_probe"] = how
    try:
        gen = torch.Generator(device="cuda").manual_seed(7)
        bias = None
        if name != "flash":
            bias = torch.zeros(1, 1, lq, lk, dtype=torch.float16, device="cuda")
            bias[..., 0, :] = float("-inf")
        q = torch.randn(1, 1, lq, 64, device="cuda", generator=gen).half()
        k = torch.randn(1, 1, lk, 64, device="cuda", generator=gen).half()
        v = torch.randn(1, 1, lk, 64, device="cuda", generator=gen).half()
        vals = base_values(q, k, v, causal, bias)
        named = forward_values(name, vals)
        o = named["out"]
        if name == "flash" and row_state(o[0, 0, 0]) == "nonzero":
            res["empty_row_probe"] = how + ": row 0 saw a key (top-left), not observable"
            return res
        lse = named["logsumexp"].float().reshape(1, 1, -1)
        res["empty_row_lse"] = fmt_value(lse[0, 0, 0].item())
        res["empty_row_out"] = row_state(o[0, 0, 0])
        do = torch.randn(o.shape, device="cuda", generator=gen).half()
        dq = call(OPS[name][1], backward_values(vals, named, do))[0]
        res["empty_row_dq"] = row_state(dq[0, 0, 0])
        torch.cuda.synchronize()
    except Exception as e:
        res["empty_row_probe"] = how + ": " + sb.describe(e)
    return res


def grad_errors(grads, refs):
    """Per-tensor errors; raises when a gradient has NaN or Inf."""
    errors = {}
    for key, g, r in zip(("dq", "dk", "dv"), grads, refs):
        c = sb.compare(g, r)
        if not c["finite"]:
            raise ValueError(f"{key} has NaN or Inf")
        errors[key] = {"rel_frob": c["rel_frob"], "max_abs": c["max_abs"]}
    return errors


def run_backend(name, p, q, k, v, do, ref, args, row, cold):
    """Fills `row` (and the cold-l2 row `cold`) for backend `name`; returns extra keys."""
    ref_out, ref_dq, ref_dk, ref_dv, ref_lse = ref
    b, h, hk, lk, d = p["batch"], p["heads"], sb.kv_heads(p), p["kv_len"], p["head_dim"]
    g = sb.group(p)
    causal = sb.mask_form(p) == "is_causal"
    extra = {}

    def attempt(kv):
        vals = base_values(q, kv[0], kv[1], causal)
        named = forward_values(name, vals)
        c = sb.compare(named["out"], ref_out)
        if not c["finite"] or c["rel_frob"] is None or c["rel_frob"] > GQA_OUT_TOL:
            raise ValueError(f"the forward's O is wrong (rel_frob {c['rel_frob']})")
        bvals = backward_values(vals, named, do)
        grads = call(OPS[name][1], bvals)[:3]
        torch.cuda.synchronize()
        return named, bvals, grads, c["rel_frob"]

    kv = (k, v)
    try:
        named, bvals, grads, out_err = attempt(kv)
    except Exception as e:
        if not sb.is_gqa(p):
            raise
        extra.update(variant="expanded-kv", gqa_error=sb.describe(e))
        kv = (sb.expand_kv(k, g), sb.expand_kv(v, g))
        named, bvals, grads, out_err = attempt(kv)
    dq, dk, dv = grads
    if kv[0].shape[1] != hk:  # expanded: sum each group's heads (outside the timing)
        dk = dk.float().reshape(b, hk, g, lk, d).sum(2)
        dv = dv.float().reshape(b, hk, g, lk, d).sum(2)
    errors = grad_errors((dq, dk, dv), (ref_dq, ref_dk, ref_dv))
    del dq, dk, dv, grads
    lse = named["logsumexp"]
    lse_rows = lse.float().reshape(b, h, -1)[..., :p["q_len"]].double()
    err_e = (lse_rows - ref_lse).abs().max().item()
    err_2 = (lse_rows - ref_lse / math.log(2)).abs().max().item()
    extra.update(grads=errors, out_rel_frob=out_err, lse_shape=list(lse.shape),
                 lse_max_abs=sb._finite_or_none(err_e), lse_base="e" if err_e <= err_2 else "2")
    row.update(rel_frob=worst(errors, "rel_frob"), max_abs=worst(errors, "max_abs"))
    if args.no_timing:
        return extra
    bwd = op(OPS[name][1])
    big = ("query", "key", "value", "out", "logsumexp", "grad_out", "grad_out_")
    sets = [bvals]
    for _ in range(input_sets(p, kv=kv[0].shape[1]) - 1):
        s = dict(bvals)
        clones = {}
        for key in big:  # grad_out and grad_out_ are one tensor: clone it once
            t = bvals[key]
            if id(t) not in clones:
                clones[id(t)] = t.clone()
            s[key] = clones[id(t)]
        sets.append(s)
    bound = [bind(bwd._schema.arguments, s, OPS[name][1]) for s in sets]
    fn = lambda i: bwd(*bound[i % len(bound)][0], **bound[i % len(bound)][1])
    try:
        med, lo, hi, method = sb.time_graph(fn)
        row.update(median_us=med, min_us=lo, max_us=hi, timing=method,
                   tflops=flops(p) / (med * 1e-6) / 1e12)
    except Exception as e:  # e.g. a capture the backend refuses: the cold row still runs
        row["error"] = "timing: " + sb.describe(e)
    if cold is not None:
        try:
            med, lo, hi = sb.time_cold(fn)
            cold.update(median_us=med, min_us=lo, max_us=hi, tflops=flops(p) / (med * 1e-6) / 1e12)
        except Exception as e:
            cold["error"] = "timing: " + sb.describe(e)
    return extra


def parse_args(argv=None):
    """sdpa_baseline.py's options, less flex (no backward op of its own to time)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="JSON list of evo Problem objects")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--q-gain", type=float, default=1.0, help="multiply Q (large-logit cases)")
    ap.add_argument("--backends", default=",".join(BACKEND_NAMES))
    ap.add_argument("--no-timing", action="store_true", help="errors only (calibration)")
    ap.add_argument("--cold-l2", action="store_true", help="also time single calls on a cold L2")
    return ap.parse_args(argv)


def blank_row(name, p, device):
    """A row before anything ran: sdpa_baseline.py's keys plus `pass`."""
    return {"backend": name, "pass": "backward", "problem": p, "device": device,
            "median_us": None, "min_us": None, "max_us": None, "tflops": None,
            "rel_frob": None, "max_abs": None, "error": None, "timing": "graph"}


def problem_refusal(p):
    """The error every row of `p` gets before any backend runs, or None."""
    bad = sb.problem_error(p)
    if bad is not None:
        return f"ValueError: {bad}"
    return unsupported(p)


def main():
    args = parse_args()
    device = sb.cuda_device()
    names = args.backends.split(",")
    results = []
    for p in json.loads(args.shapes):
        bad = problem_refusal(p)
        dtype = sb.DTYPES.get(p.get("dtype"))
        ref, q, k, v, do = None, None, None, None, None
        if bad is None:
            b, h, hk, lq, lk, d = (p["batch"], p["heads"], sb.kv_heads(p), p["q_len"],
                                   p["kv_len"], p["head_dim"])
            gen = torch.Generator(device="cuda").manual_seed(args.seed)
            q = (torch.randn(b, h, lq, d, device="cuda", generator=gen) * args.q_gain).to(dtype)
            k = torch.randn(b, hk, lk, d, device="cuda", generator=gen).to(dtype)
            v = torch.randn(b, hk, lk, d, device="cuda", generator=gen).to(dtype)
            do = torch.randn(b, h, lq, d, device="cuda", generator=gen).to(dtype)
            mask = sb.visible_mask(p, "cuda") if sb.mask_form(p) != "none" else None
            try:
                ref = reference_backward(q, k, v, do, mask)
            except Exception as e:  # e.g. out of memory for a very long sequence
                bad = "reference: " + sb.describe(e)
            del mask
        for name in names:
            row = blank_row(name, p, device)
            cold = dict(row, timing="cold-l2") if args.cold_l2 else None
            extra = {}
            if not sb.is_plain(p) and sb.problem_error(p) is None:
                extra["mask"] = sb.mask_form(p)
            if bad is not None:
                row["error"] = bad
            elif name not in OPS:
                row["error"] = f"ValueError: unknown backend {name!r} (not one of {', '.join(OPS)})"
            else:
                try:
                    extra.update(run_backend(name, p, q, k, v, do, ref, args, row, cold))
                except Exception as e:  # a backend that refuses a shape
                    row["error"] = sb.describe(e)
            row.update(extra)
            note = f" ({extra['variant']})" if "variant" in extra else ""
            print(f"sdpa backward {name}{note} {p}: {row['median_us']} us, rel_frob "
                  f"{row['rel_frob']}, error {row['error']}", file=sys.stderr)
            results.append(row)
            if cold is not None:
                cold.update(rel_frob=row["rel_frob"], max_abs=row["max_abs"],
                            error=cold["error"] or (row["error"] if cold["median_us"] is None else None))
                cold.update(extra)
                results.append(cold)
        del q, k, v, do, ref
        torch.cuda.empty_cache()
    # Last, so that a probe that upsets the device cannot cost the timings.
    for name in dict.fromkeys(r["backend"] for r in results if r["backend"] in OPS):
        probe = probe_empty_row(name)
        print(f"sdpa backward {name} empty row: {probe}", file=sys.stderr)
        for r in results:
            if r["backend"] == name:
                r.update(probe)
    print(json.dumps(results, allow_nan=False))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch SDPA baselines for `evo bench`: per backend (cuDNN, flash, efficient, and
FlexAttention for masks `is_causal` cannot state), graph-timed the way the FAST gate
times a kernel, with its errors against a float64 reference on the same inputs
(tolerance calibration).

Usage:
  sdpa_baseline.py --shapes '[{"batch":1,"heads":8,"q_len":512,"kv_len":512,
                               "head_dim":64,"dtype":"f16","causal":false}]'
                   [--seed N] [--q-gain G] [--backends cudnn,flash,efficient,flex]
                   [--no-timing] [--cold-l2]

Problems are evo's `Problem` (crates/genome/src/problem.rs) as JSON: batch, heads,
q_len, kv_len, head_dim, dtype, causal, and the optional fields, present only when set:
  kv_heads      K/V heads (grouped-query attention, 1 = multi-query): K and V are
                [B, kv_heads, Lk, D], query head h reads K/V head h // (heads // kv_heads).
  align         "top_left" (default: row i's diagonal key is i) or "bottom_right"
                (row i's diagonal key is i + Lk - Lq).
  window_left   keys j < diag(i) - window_left are masked (absent: unbounded).
  window_right  keys j > diag(i) + window_right are masked (absent: unbounded).
With `causal`, keys j > diag(i) are masked. A row that sees no key outputs zeros
(FlashAttention's convention).

Prints notes on stderr and one JSON array on the last line of stdout, one object per
(shape, backend): backend, problem, device, median_us, min_us, max_us, tflops,
rel_frob, max_abs, error (null unless the backend refused the shape), timing ("graph",
or "events" for calls of 200 µs and more; with --cold-l2 each backend also gets a
"cold-l2" row). Rows of problems that are not
plain (plain: K/V with all heads, and no mask or one `is_causal` states) add:
  mask          how the mask reached the backend: "none" (no key is masked), "is_causal"
                (top-left causal, also bottom-right causal with Lq == Lk), "attn_mask"
                (an explicit mask) or "block_mask" (flex).
  variant       "expanded-kv", only where the backend refused K/V with kv_heads heads
                under enable_gqa=True (or torch has no enable_gqa) and was run instead
                on K/V expanded to all heads (repeat_interleave, done once outside the
                timed region, so the timed calls read H heads of K/V).
  gqa_error     with variant: the refusal of the enable_gqa call.
  empty_rows    with an explicit mask: the query positions (of Lq, in every batch and
                head) that see no key. rel_frob and max_abs then compare only the rows
                that see at least one key (the reference has zeros in the others, where
                some SDPA releases write NaN), and a NaN or Inf only in empty rows is no
                error.
  empty_rows_nan        whether the backend wrote NaN in an empty row (null: no output).
  empty_rows_max_abs    the largest finite |value| it wrote in empty rows (0 expected,
                        null when none is finite or there are none).
Plain problems give exactly today's rows: the same backends and calls, no new keys.

Backends: cudnn, flash and efficient are SDPA under sdpa_kernel([backend]), so a
backend that cannot take the call reports its error (no silent math fallback).
 - GQA/MQA: K/V keep kv_heads heads and SDPA gets enable_gqa=True (torch >= 2.5); where
   that call raises, the same backend is run on expanded K/V (variant "expanded-kv").
 - Masks is_causal cannot state (bottom-right causal with Lq != Lk, any window that
   masks a key): the boolean [Lq, Lk] mask (True = attend, broadcast over B and H) is
   built once outside the timing and passed as the additive mask SDPA would convert
   it to on every call (0 / -inf in the inputs' dtype, rows padded to 16 elements so
   the efficient kernel takes it without a copy); converting it inside the timed
   region would charge SDPA for work a fused kernel never does. A mask that masks
   nothing is passed as none, a top-left causal one as is_causal=True.
 - flex (only for those masks, and only when torch.nn.attention.flex_attention is
   importable): flex_attention compiled by torch.compile(dynamic=False), with a block
   mask from create_block_mask and a mask_mod of the same rule (enable_gqa=True for
   GQA); the block mask and the compilation (the first call) are outside the timing,
   and a compilation that fails is the row's error.

Timing (as crates/gates/src/fast.rs): warm-up 25 ms; N calls captured in one CUDA
graph, N chosen so a replay lasts >= 1 ms; 20 replays, each between two events;
median/min/max per call. A call of 200 µs or more is timed as FAST times one: 20
single calls, each between two events ("events"), so a long evo kernel and its
baseline are timed alike; each call is enqueued behind a ~1 ms GPU spin
(torch.cuda._sleep), so the events hold the device's time and not the host's dispatch
of the call (without it, cuDNN's L8192 figure held ~70 µs of PyTorch's dispatch). When one input set (Q, K, V, O; K and V with the heads the
call reads: kv_heads, or all heads for expanded-kv) is under L2 (50 MB) the captured
calls rotate among ceil(2 * 50 MB / set bytes) sets (at most 64), so the inputs are
not L2-resident. TFLOP/s = flops(p) / t, evo's Problem::flops: 4*B*H*Lq*Lk*D, halved
for top-left causal without a window, and otherwise 4*B*H*D * (visible (i, j) pairs).
Cold L2 (--cold-l2, as FAST's cold-l2 method): 20 single calls, each between two events
after reading over a buffer twice the L2's size (and the same spin); median/min/max.
A single call of the "events" method is read over alike first, as FAST's are.

The pure-Python parts (visible_keys, flops, input_sets, mask_form) need no torch; the
mask, the reference and the comparison run on any torch device (scripts/
test_sdpa_baseline.py checks them on the CPU).
"""
import argparse
import contextlib
import json
import math
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # the pure-Python helpers below work without torch
    torch = None

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except Exception:  # no torch, or a torch without FlexAttention (< 2.5)
    flex_attention = create_block_mask = None

from sdpa_timing import (  # noqa: F401,E402  (re-exported: the backward's baseline, export_timing)
    EVENTS_FROM_US, HOLD_CYCLES, L2_BYTES, L2Flush, hold, time_cold, time_graph)

MAX_SETS = 64
if torch is not None:
    BACKENDS = {
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }
    DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
else:
    BACKENDS, DTYPES = {}, {}
DTYPE_NAMES = ("f16", "bf16")
ALIGNS = ("top_left", "bottom_right")


# --- the problem's rule, pure Python (mirrors crates/genome/src/problem.rs) ----------

def kv_heads(p):
    """K/V heads: `kv_heads`, or `heads` when absent."""
    k = p.get("kv_heads")
    return p["heads"] if k is None else k


def group(p):
    """Query heads per K/V head."""
    return p["heads"] // max(kv_heads(p), 1)


def is_gqa(p):
    return kv_heads(p) != p["heads"]


def masked(p):
    """Whether any key is masked by position (causal or a window)."""
    return bool(p.get("causal")) or p.get("window_left") is not None or p.get("window_right") is not None


def diag(p):
    """The diagonal's offset: query i's diagonal key is i + diag(p)."""
    return p["kv_len"] - p["q_len"] if p.get("align", "top_left") == "bottom_right" else 0


def visible_keys(p, i):
    """The keys query i sees, as (lo, hi): keys lo..hi-1, none when hi == lo
    (Problem::visible_keys)."""
    d = i + diag(p)
    lk = p["kv_len"]
    hi = lk
    if p.get("causal"):
        hi = min(hi, d + 1)
    if p.get("window_right") is not None:
        hi = min(hi, d + p["window_right"] + 1)
    lo = max(d - p["window_left"], 0) if p.get("window_left") is not None else 0
    hi = min(max(hi, 0), lk)
    return min(lo, hi), hi


def visible_pairs(p):
    """The (query, key) pairs the mask leaves visible, per batch and head."""
    return sum(hi - lo for lo, hi in (visible_keys(p, i) for i in range(p["q_len"])))


def empty_rows(p):
    """Query positions that see no key (their output is zeros)."""
    return sum(1 for lo, hi in (visible_keys(p, i) for i in range(p["q_len"])) if lo == hi)


def flops(p):
    """evo's Problem::flops, the same float operations in the same order: 4*B*H*Lq*Lk*D,
    halved for top-left causal without a window, else 4*B*H*D * visible pairs."""
    per_pair = 4.0 * p["batch"] * p["heads"] * p["head_dim"]
    full = per_pair * p["q_len"] * p["kv_len"]
    if not masked(p):
        return full
    if (p.get("causal") and p.get("align", "top_left") == "top_left"
            and p.get("window_left") is None and p.get("window_right") is None):
        return full / 2.0
    return per_pair * float(visible_pairs(p))


def input_sets(p, kv=None):
    """Input sets the timed calls rotate among: Q, O and K, V (with `kv` heads, default
    kv_heads) in 16 bits, enough sets to overflow L2 twice."""
    kv = kv_heads(p) if kv is None else kv
    q = p["batch"] * p["heads"] * p["q_len"] * p["head_dim"]
    kvn = p["batch"] * kv * p["kv_len"] * p["head_dim"]
    nbytes = 2 * (2 * q + 2 * kvn)
    if nbytes >= L2_BYTES:
        return 1
    return max(1, min(MAX_SETS, math.ceil(2 * L2_BYTES / nbytes)))


def is_plain(p):
    """MHA with no mask or one is_causal states (Problem::is_basic): today's rows."""
    return (not is_gqa(p) and p.get("window_left") is None and p.get("window_right") is None
            and (p.get("align", "top_left") == "top_left" or not p.get("causal")
                 or p["q_len"] == p["kv_len"]))


def mask_form(p):
    """How SDPA gets the mask: "none" (no key masked), "is_causal" (exactly PyTorch's
    top-left causal mask) or "attn_mask" (anything else: an explicit mask)."""
    if not masked(p):
        return "none"
    lk = p["kv_len"]
    rows = [visible_keys(p, i) for i in range(p["q_len"])]
    if all(r == (0, lk) for r in rows):
        return "none"
    if all(r == (0, min(i + 1, lk)) for i, r in enumerate(rows)):
        return "is_causal"
    return "attn_mask"


def problem_error(p):
    """Why the script cannot run `p`, or None."""
    for f in ("batch", "heads", "q_len", "kv_len", "head_dim"):
        if not isinstance(p.get(f), int) or p[f] < 1:
            return f"problem field `{f}` must be a positive integer"
    if p.get("dtype") not in DTYPE_NAMES:
        return f"dtype {p.get('dtype')!r} is not f16 or bf16"
    k = p.get("kv_heads")
    if k is not None and (not isinstance(k, int) or k < 1 or p["heads"] % k):
        return f"kv_heads {k!r} does not divide heads ({p['heads']})"
    if p.get("align", "top_left") not in ALIGNS:
        return f"align {p.get('align')!r} is not top_left or bottom_right"
    for f in ("window_left", "window_right"):
        w = p.get(f)
        if w is not None and (not isinstance(w, int) or w < 0):
            return f"{f} {w!r} is not a width >= 0"
    return None


def describe(e):
    """An exception in one line (two when the first only introduces the second)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text += " " + lines[1]
    return f"{type(e).__name__}: {text}"


# --- torch, any device --------------------------------------------------------------

def mask_rule(p, q_idx, kv_idx):
    """Whether query q_idx sees key kv_idx (tensors, broadcast): the mask_mod of flex
    and the rule of visible_mask."""
    d = q_idx + diag(p)
    keep = (kv_idx >= 0) & (q_idx >= 0)
    if p.get("causal"):
        keep = keep & (kv_idx <= d)
    if p.get("window_left") is not None:
        keep = keep & (kv_idx >= d - p["window_left"])
    if p.get("window_right") is not None:
        keep = keep & (kv_idx <= d + p["window_right"])
    return keep


def visible_mask(p, device="cpu"):
    """The mask as a boolean [Lq, Lk] tensor, True = attend; None when no key is masked
    by position."""
    if not masked(p):
        return None
    i = torch.arange(p["q_len"], device=device).unsqueeze(1)
    j = torch.arange(p["kv_len"], device=device).unsqueeze(0)
    return mask_rule(p, i, j)


def additive_mask(mask, dtype):
    """The boolean mask as SDPA converts it (0 where True, -inf where False), in `dtype`,
    each row padded to a multiple of 16 elements (the view is [Lq, Lk])."""
    lq, lk = mask.shape
    bias = torch.zeros(lq, -(-lk // 16) * 16, dtype=dtype, device=mask.device)[:, :lk]
    bias.masked_fill_(~mask, float("-inf"))
    return bias


def expand_kv(t, g):
    """[B, kv_heads, L, D] -> [B, kv_heads * g, L, D]: head h is K/V head h // g."""
    return t if g == 1 else t.repeat_interleave(g, dim=1)


# Score elements the float64 reference holds at once (1 GiB), and so also elements of
# K/V expanded to every query head: a larger problem (a 32k prefill's scores alone are
# 256 GiB; B64 H32/8 Lk32768 D128's expanded K/V 64 GiB) is computed a head and a block
# of query rows at a time.
REF_CHUNK = 1 << 27


def reference(q, k, v, mask=None):
    """float64 softmax(QK^T/sqrt(D) masked) V; K/V with fewer heads than Q are grouped
    (query head h reads K/V head h // (H / kv_heads)); `mask` is boolean [Lq, Lk]
    (True = attend) or None; a row that sees no key is zeros."""
    b, h, lq, _ = q.shape
    lk = k.shape[2]
    if b * h * lq * lk <= REF_CHUNK and b * h * lk * k.shape[-1] <= REF_CHUNK:
        return _reference_block(q, k, v, mask)
    g = h // k.shape[1]
    rows = max(1, REF_CHUNK // (b * lk))
    out = torch.empty(b, h, lq, v.shape[-1], dtype=torch.float64, device=q.device)
    for head in range(h):
        kh, vh = k[:, head // g : head // g + 1], v[:, head // g : head // g + 1]
        for r0 in range(0, lq, rows):
            part = None if mask is None else mask[r0 : r0 + rows]
            out[:, head : head + 1, r0 : r0 + rows] = _reference_block(
                q[:, head : head + 1, r0 : r0 + rows], kh, vh, part)
    return out


def _reference_block(q, k, v, mask):
    g = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), expand_kv(k.double(), g), expand_kv(v.double(), g)
    s = qd @ kd.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s.masked_fill_(~mask, float("-inf"))
    pr = torch.softmax(s, dim=-1)
    del s
    if mask is not None:
        has_key = mask.any(-1)
        if not bool(has_key.all()):
            pr.masked_fill_(~has_key.unsqueeze(-1), 0.0)
    return pr @ vd


def _finite_or_none(x):
    return x if math.isfinite(x) else None


def compare(out, ref, has_key=None):
    """Errors of `out` against `ref`: rel_frob, max_abs (null when not finite) and
    finite (no NaN or Inf where compared). With `has_key` (boolean [Lq]: the rows that
    see a key) only those rows are compared and empty_rows_nan / empty_rows_max_abs
    describe what `out` holds in the others."""
    if has_key is None:
        o, r = out, ref
    else:
        o, r = out[..., has_key, :], ref[..., has_key, :]
    res = {"rel_frob": None, "max_abs": None, "finite": bool(torch.isfinite(o).all())}
    if o.numel():
        diff = o.double() - r
        rn = r.norm().item()
        res["rel_frob"] = _finite_or_none(diff.norm().item() / rn) if rn > 0 else None
        res["max_abs"] = _finite_or_none(diff.abs().max().item())
    if has_key is not None:
        e = out[..., ~has_key, :]
        res["empty_rows_nan"] = bool(torch.isnan(e).any())
        finite = e[torch.isfinite(e)]
        res["empty_rows_max_abs"] = finite.abs().max().item() if finite.numel() else None
    return res


# --- CUDA ---------------------------------------------------------------------------

def flex_setup(p):
    """FlexAttention for `p`: (compiled flex_attention, block mask), both built here,
    outside any timing; the compilation itself happens on the first call."""
    if hasattr(torch, "_dynamo"):
        torch._dynamo.reset()  # a fresh cache per problem: no recompile limit, no dynamic shapes
    compiled = torch.compile(flex_attention, dynamic=False)
    block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: mask_rule(p, q_idx, kv_idx),
                                   None, None, p["q_len"], p["kv_len"], device="cuda")
    return compiled, block_mask


def cuda_device():
    """The name of CUDA device 0. Without torch or a CUDA device it exits with status 3,
    which the callers of this baseline and of the backward's read as "no GPU here"."""
    if torch is None:
        print("torch is not importable", file=sys.stderr)
        sys.exit(3)
    if not torch.cuda.is_available():
        print("torch sees no CUDA device", file=sys.stderr)
        sys.exit(3)
    return torch.cuda.get_device_name(0)


def failed_rows(names, blank, error):
    """One row per backend (flex has none: it runs only where it would have a mask)
    saying why the shape has no figure."""
    return [dict(blank(name), error=error) for name in names if name != "flex"]


def draw_and_reference(p, seed, q_gain, device="cuda"):
    """((q, k, v, mask, ref), None) for `p` on `device`, or (None, why) when drawing the
    inputs or computing the float64 reference failed (out of memory, say): that shape's
    rows say so and the others are still measured."""
    dtype = DTYPES[p["dtype"]]
    b, h, hk, lq, lk, d = p["batch"], p["heads"], kv_heads(p), p["q_len"], p["kv_len"], p["head_dim"]
    try:
        gen = torch.Generator(device=device).manual_seed(seed)
        q = (torch.randn(b, h, lq, d, device=device, generator=gen) * q_gain).to(dtype)
        k = torch.randn(b, hk, lk, d, device=device, generator=gen).to(dtype)
        v = torch.randn(b, hk, lk, d, device=device, generator=gen).to(dtype)
        mask = visible_mask(p, device) if mask_form(p) != "none" else None
        return (q, k, v, mask, reference(q, k, v, mask)), None
    except Exception as e:
        q = k = v = mask = None
        if device == "cuda":
            torch.cuda.empty_cache()
        return None, f"the inputs or the float64 reference failed: {describe(e)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="JSON list of evo Problem objects")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--q-gain", type=float, default=1.0, help="multiply Q (large-logit cases)")
    ap.add_argument("--backends", default="cudnn,flash,efficient,flex",
                    help="flex runs only for masks is_causal cannot state")
    ap.add_argument("--no-timing", action="store_true", help="errors only (calibration)")
    ap.add_argument("--cold-l2", action="store_true", help="also time single calls on a cold L2")
    args = ap.parse_args()
    device = cuda_device()
    names = args.backends.split(",")
    results = []
    flex_note = False
    for p in json.loads(args.shapes):
        def blank(name):
            return {"backend": name, "problem": p, "device": device, "median_us": None,
                    "min_us": None, "max_us": None, "tflops": None, "rel_frob": None,
                    "max_abs": None, "error": None, "timing": "graph"}
        bad = problem_error(p)
        if bad is not None:
            results.extend(failed_rows(names, blank, f"ValueError: {bad}"))
            print(f"sdpa {p}: {bad}", file=sys.stderr)
            continue
        dtype = DTYPES[p["dtype"]]
        plain = is_plain(p)
        form = mask_form(p)
        explicit = form == "attn_mask"
        causal = form == "is_causal"
        gqa = is_gqa(p)
        drawn, why = draw_and_reference(p, args.seed, args.q_gain)
        if drawn is None:
            results.extend(failed_rows(names, blank, why))
            print(f"sdpa {p}: {why}", file=sys.stderr)
            continue
        q, k, v, mask, ref = drawn
        del drawn
        has_key, bias, expanded = None, None, None
        if explicit:
            has_key = mask.any(-1)
            bias = additive_mask(mask, dtype)
        del mask
        for name in names:
            if name == "flex":
                if not explicit:
                    continue
                if flex_attention is None:
                    if not flex_note:
                        print("flex skipped: torch.nn.attention.flex_attention is not importable",
                              file=sys.stderr)
                        flex_note = True
                    continue
            row = blank(name)
            cold = dict(row, timing="cold-l2")
            extra = {}
            if not plain:
                extra["mask"] = "block_mask" if name == "flex" else form
            if explicit:
                extra.update(empty_rows=empty_rows(p), empty_rows_nan=None, empty_rows_max_abs=None)
            try:
                if name == "flex":
                    ctx = contextlib.nullcontext()
                    flex_fn, block_mask = flex_setup(p)
                    def attend(q_, k_, v_, native_gqa):
                        kw = {"enable_gqa": True} if native_gqa else {}
                        return flex_fn(q_, k_, v_, block_mask=block_mask, **kw)
                else:
                    ctx = sdpa_kernel([BACKENDS[name]])
                    sdpa_kw = {"attn_mask": bias} if explicit else {}
                    def attend(q_, k_, v_, native_gqa):
                        kw = dict(sdpa_kw, enable_gqa=True) if native_gqa else sdpa_kw
                        return F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal, **kw)
                with ctx:
                    kv, native = (k, v), gqa
                    try:
                        out = attend(q, k, v, native)
                        torch.cuda.synchronize()
                    except Exception as e:
                        if not gqa:
                            raise
                        extra.update(variant="expanded-kv", gqa_error=describe(e))
                        if expanded is None:
                            expanded = (expand_kv(k, group(p)), expand_kv(v, group(p)))
                        kv, native = expanded, False
                        out = attend(q, *kv, native)
                        torch.cuda.synchronize()
                    c = compare(out, ref, has_key)
                    del out
                    row["rel_frob"], row["max_abs"] = c["rel_frob"], c["max_abs"]
                    if explicit:
                        extra.update(empty_rows_nan=c["empty_rows_nan"],
                                     empty_rows_max_abs=c["empty_rows_max_abs"])
                    if not c["finite"]:
                        raise ValueError("the output has NaN or Inf"
                                         + (" in rows that see a key" if explicit else ""))
                    if not args.no_timing:
                        n = input_sets(p, kv=kv[0].shape[1])
                        sets = [(q,) + kv] + [(q.clone(), kv[0].clone(), kv[1].clone()) for _ in range(n - 1)]
                        fn = lambda i: attend(*sets[i % len(sets)], native)
                        med, lo, hi, method = time_graph(fn)
                        row.update(median_us=med, min_us=lo, max_us=hi, timing=method,
                                   tflops=flops(p) / (med * 1e-6) / 1e12)
                        if args.cold_l2:
                            med, lo, hi = time_cold(fn)
                            cold.update(median_us=med, min_us=lo, max_us=hi,
                                        tflops=flops(p) / (med * 1e-6) / 1e12)
                        del sets, fn
            except Exception as e:  # a backend that refuses a shape (e.g. flash and some dtypes)
                row["error"] = describe(e)
            row.update(extra)
            note = f" ({extra['variant']})" if "variant" in extra else ""
            print(f"sdpa {name}{note} {p}: {row['median_us']} us, rel_frob {row['rel_frob']}, "
                  f"error {row['error']}", file=sys.stderr)
            results.append(row)
            if args.cold_l2:
                cold.update(rel_frob=row["rel_frob"], max_abs=row["max_abs"], error=row["error"])
                cold.update(extra)
                results.append(cold)
        del q, k, v, ref, has_key, bias, expanded
        torch.cuda.empty_cache()
    print(json.dumps(results, allow_nan=False))


if __name__ == "__main__":
    main()

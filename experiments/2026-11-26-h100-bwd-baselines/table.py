#!/usr/bin/env python3
"""Prints the README's tables from sdpa_backward.json (run from this folder)."""
import json

rows = json.load(open("sdpa_backward.json"))


def shape(p):
    c = " causal" if p["causal"] else ""
    return f"B{p['batch']} H{p['heads']} L{p['q_len']} D{p['head_dim']}{c}"


by = {}
for r in rows:
    by.setdefault(shape(r["problem"]), {})[(r["backend"], r["timing"] != "cold-l2")] = r

print("| shape (f16) | cuDNN warm µs (TF) | cuDNN cold | flash warm | flash cold | efficient warm | efficient cold |")
print("|---|---:|---:|---:|---:|---:|---:|")
for s, cells in by.items():
    out = []
    for b in ("cudnn", "flash", "efficient"):
        for warm in (True, False):
            r = cells[(b, warm)]
            t = r["median_us"]
            tag = " e" if r["timing"] == "events" else ""
            out.append(f"{t:.1f} ({r['tflops']:.0f}){tag}" if t else r["error"] or "—")
    print(f"| {s} | " + " | ".join(out) + " |")

print()
print("| shape (f16) | backend | dQ rel_frob | dK rel_frob | dV rel_frob | dQ / dK / dV max_abs | O rel_frob | lse max_abs (ln) |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for s, cells in by.items():
    for b in ("cudnn", "flash", "efficient"):
        r = cells[(b, True)]
        g = r["grads"]
        mx = " / ".join(f"{g[t]['max_abs']:.1e}" for t in ("dq", "dk", "dv"))
        print(f"| {s} | {b} | {g['dq']['rel_frob']:.2e} | {g['dk']['rel_frob']:.2e} | "
              f"{g['dv']['rel_frob']:.2e} | {mx} | {r['out_rel_frob']:.2e} | {r['lse_max_abs']:.1e} |")

print()
print("| backend | lse shape (B4 H16 L1024) | empty row: lse | O row | dQ row | how the row was made empty |")
print("|---|---|---|---|---|---|")
for b in ("cudnn", "flash", "efficient"):
    r = by["B4 H16 L1024 D64"][(b, True)]
    print(f"| {b} | {r['lse_shape']} | {r['empty_row_lse']} | {r['empty_row_out']} | "
          f"{r['empty_row_dq']} | {r['empty_row_probe']} |")

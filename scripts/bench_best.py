#!/usr/bin/env python3
"""The fastest kernel per shape of an `evo bench --json` file, against SDPA's cuDNN.

    python3 scripts/bench_best.py bench.json [--top N]

For each timed shape: the N fastest of evo's kernels (baselines excluded), their
median µs and spread, and the ratios cuDNN µs / kernel µs and fastest SDPA backend
µs / kernel µs (> 1: faster; the fastest backend that states the problem, K/V expansion
and FlexAttention included, is named on the shape's line). Rows of `evo bench --cold-l2`
("... (cold L2)") are compared with the baselines' cold-L2 rows.
"""
import argparse
import gzip
import json
from collections import defaultdict

BASELINES = ("sdpa-", "cublas-hybrid")
COLD = " (cold L2)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_json")
    ap.add_argument("--top", type=int, default=3)
    args = ap.parse_args()
    # A recorded bench is often kept gzipped (experiments/*/*.json.gz).
    opener = gzip.open if args.bench_json.endswith(".gz") else open
    with opener(args.bench_json, "rt", encoding="utf-8") as f:
        rows = [r for r in json.load(f) if r.get("median_us")]
    by_shape = defaultdict(list)
    for r in rows:
        cold = r["kernel"].endswith(COLD)
        by_shape[r["shape"] + (COLD if cold else "")].append(r)
    for shape, rs in by_shape.items():
        cudnn_name = "sdpa-cudnn" + (COLD if shape.endswith(COLD) else "")
        cudnn = next((r["median_us"] for r in rs if r["kernel"] == cudnn_name), None)
        ours = sorted((r for r in rs if not r["kernel"].startswith(BASELINES)),
                      key=lambda r: r["median_us"])
        cold = shape.endswith(COLD)
        sdpa = sorted((r for r in rs if r["kernel"].startswith("sdpa-")
                       and r["kernel"].endswith(COLD) == cold), key=lambda r: r["median_us"])
        best = sdpa[0] if sdpa else None
        head = f"{shape}: cuDNN {cudnn:.2f} µs" if cudnn else f"{shape}: no cuDNN row"
        if best:
            head += f"; fastest SDPA {best['kernel']} {best['median_us']:.2f} µs"
        print(head)
        for r in ours[: args.top]:
            ratio = f"{cudnn / r['median_us']:.3f}x" if cudnn else "-"
            vs_best = f"{best['median_us'] / r['median_us']:.3f}x" if best else "-"
            print(f"  {r['median_us']:9.2f} µs [{r['min_us']:.2f}, {r['max_us']:.2f}] "
                  f"{ratio:>7} {vs_best:>7}  {r['kernel']}")
        failed = [r["kernel"] for r in rs if r.get("verdict") not in (None, "pass", "timed")]
        if failed:
            print(f"  not passing: {', '.join(sorted(set(failed)))}")


if __name__ == "__main__":
    main()

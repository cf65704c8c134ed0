#!/usr/bin/env python3
"""What a recorded landscape holds, per kernel family, and how two measurements agree.

Reads an `evo landscape` record (`evaluations.jsonl` or `.jsonl.gz`) and prints, per
family: how many genomes passed both gates, the fastest, the median, and the N fastest
with their one-line summaries (the same line `evo` prints); then the rank of each
genome named as NAME=ID. With --against OTHER (another record of some of the same
genomes, e.g. an earlier slice measured again), it prints how the two agree: the
ratio of each common genome's score, median and percentiles.

usage: scripts/landscape_summary.py EVALUATIONS [--top N] [--against OTHER] [NAME=ID ...]
"""
import gzip
import json
import sys


def read(path):
    """genome id -> record, for the records that passed both gates."""
    opener = gzip.open if path.endswith(".gz") else open
    out = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("status") == "ok":
                out[r["genome_id"]] = r
    return out


def summary(g):
    """Genome::summary, from a record's genes (defaults as the genome crate's)."""
    if g.get("family") == "hopper":
        wgs = g.get("consumer_wgs", 2)
        return (
            f"hopper wgmma {64 * wgs}x{g['block_n']} wg{wgs} {g.get('hopper_load', 'tma')} "
            f"s{g['stages']} {g['exp']} split{g['split_kv']} regs:{g.get('producer_regs', 'none')} "
            f"pingpong:{g.get('pingpong', 'off')} overlap:{g.get('softmax_overlap', 'off')}"
        )
    return (
        f"{g['qk_math']}/{g['pv_math']} P:{g['p_path']} O:{g['o_accum']} {g['block_m']}x{g['block_n']} "
        f"w{g['warps']}+p{g['producer_warps']} {g['kv_load']} s{g['stages']} {g['smem_layout']} "
        f"v{g['vec_bytes']} {g['exp']} split{g['split_kv']} cap:{g['reg_cap']} mb{g['min_blocks']}"
    )


def pct(xs, p):
    return xs[round(p * (len(xs) - 1))]


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    path, rest = args[0], args[1:]
    top, against, named = 5, None, []
    while rest:
        a = rest.pop(0)
        if a == "--top":
            top = int(rest.pop(0))
        elif a == "--against":
            against = rest.pop(0)
        elif "=" in a:
            named.append(a.split("=", 1))
        else:
            sys.exit(f"{a}: expected --top N, --against FILE or NAME=ID")
    ok = read(path)
    ranked = sorted(ok.values(), key=lambda r: r["score_us"])
    rank = {r["genome_id"]: i + 1 for i, r in enumerate(ranked)}
    print(f"{path}: {len(ok)} genomes passed GREEN and FAST")
    for family in ("ampere", "hopper"):
        rows = [r for r in ranked if r["genome"].get("family", "ampere") == family]
        if not rows:
            continue
        scores = [r["score_us"] for r in rows]
        print(f"\n{family}: {len(rows)} genomes, fastest {scores[0]:.2f} µs, median {pct(scores, 0.5):.2f} µs")
        for r in rows[:top]:
            print(f"  {r['score_us']:7.2f} µs  #{rank[r['genome_id']]:<5} {r['genome_id']}  {summary(r['genome'])}")
    if named:
        print("\nnamed genomes:")
        for name, gid in named:
            r = ok.get(gid)
            where = f"{r['score_us']:.2f} µs, rank {rank[gid]} of {len(ok)}" if r else "not measured ok here"
            print(f"  {name} ({gid}): {where}")
    if against:
        other = read(against)
        common = sorted(set(ok) & set(other))
        if not common:
            sys.exit(f"{against}: no genome in common with {path}")
        ratios = sorted(other[g]["score_us"] / ok[g]["score_us"] for g in common)
        dev = sorted(abs(x - 1) for x in ratios)
        print(f"\n{against} / {path}: {len(common)} genomes in both")
        print(
            f"  score ratio median {pct(ratios, 0.5):.4f}, p5 {pct(ratios, 0.05):.4f}, "
            f"p95 {pct(ratios, 0.95):.4f}, min {ratios[0]:.4f}, max {ratios[-1]:.4f}"
        )
        print(
            f"  |ratio - 1| median {pct(dev, 0.5):.2%}, p90 {pct(dev, 0.9):.2%}, p99 {pct(dev, 0.99):.2%}"
        )


if __name__ == "__main__":
    main()

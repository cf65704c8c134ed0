#!/usr/bin/env python3
"""Trains a small GPT with evo's attention (`evo_attention.sdpa`, forward and backward by
evo's kernels) and with torch SDPA, from the same seed on the same token stream, and
compares the loss curves.

The model: 4 layers, d_model 512; the first two layers have 8 heads of D64, the last two
4 heads of D128 (both of evo's backward head dims in one model); sequence 1024, bf16
autocast over fp32 parameters, AdamW. The data: a token stream drawn from a fixed random
sparse bigram table (each token has 4 likely successors), generated from the seed, so the
loss has something to learn and every run sees the same batches.

torch SDPA's backward adds with atomics, so two torch runs from one seed differ; it runs
`--torch-runs` times (3) to measure that spread (evo's backward of `dq_mode = "atomic"`
does too: `--evo-runs 2` measures its own). The report: per-step losses, the largest
|difference| between each evo curve and each torch run against the largest between two
torch runs, and the median step time of each run.

Usage: python3 scripts/train_gpt.py EXPORT_DIR [--steps 300] [--evo-runs 1] [--json OUT.json]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings


def build(torch, args):
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(args.d_model)
            self.qkv = nn.Linear(args.d_model, 3 * args.d_model, bias=False)
            self.proj = nn.Linear(args.d_model, args.d_model, bias=False)
            self.ln2 = nn.LayerNorm(args.d_model)
            self.mlp = nn.Sequential(
                nn.Linear(args.d_model, 4 * args.d_model, bias=False),
                nn.GELU(),
                nn.Linear(4 * args.d_model, args.d_model, bias=False),
            )

        def forward(self, x, attention):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            # [B, H, T, D], contiguous: what both attentions take.
            q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2).contiguous()
                       for y in (q, k, v))
            y = attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(args.vocab, args.d_model)
            self.pos = nn.Embedding(args.seq, args.d_model)
            heads = [args.d_model // 64] * 2 + [args.d_model // 128] * 2
            self.blocks = nn.ModuleList(Block(h) for h in heads)
            self.ln = nn.LayerNorm(args.d_model)
            self.head = nn.Linear(args.d_model, args.vocab, bias=False)

        def forward(self, idx, targets, attention):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x, attention)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))

    return GPT()


def token_stream(torch, args):
    """(inputs, targets) per step, [steps, B, T]: a walk on a sparse random bigram table
    drawn from the seed (on the CPU, so every run and device sees the same tokens)."""
    g = torch.Generator().manual_seed(args.seed)
    successors = torch.randint(0, args.vocab, (args.vocab, 4), generator=g)
    weights = torch.tensor([0.55, 0.25, 0.12, 0.08])
    n = args.steps * args.batch
    tokens = torch.empty(n, args.seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, args.vocab, (n,), generator=g)
    picks = torch.multinomial(weights, n * args.seq, replacement=True, generator=g).view(n, args.seq)
    for t in range(args.seq):
        tokens[:, t + 1] = successors[tokens[:, t], picks[:, t]]
    tokens = tokens.view(args.steps, args.batch, args.seq + 1)
    return tokens[:, :, :-1], tokens[:, :, 1:]


def train(torch, args, attention, data):
    torch.manual_seed(args.seed)
    model = build(torch, args).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    inputs, targets = data
    losses, times = [], []
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 30)
        for group in opt.param_groups:
            group["lr"] = lr
        x = inputs[step].cuda(non_blocking=True)
        y = targets[step].cuda(non_blocking=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y, attention)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--torch-runs", type=int, default=3)
    parser.add_argument("--evo-runs", type=int, default=1)
    parser.add_argument("--json", help="write the curves and times here")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.join(args.export_dir, "python"))
    os.environ["EVO_EXPORT_DIR"] = args.export_dir
    import evo_attention

    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"steps {args.steps}, batch {args.batch}, seq {args.seq}, d_model {args.d_model}, "
          f"heads 8xD64 (layers 0-1) and 4xD128 (layers 2-3), seed {args.seed}", flush=True)
    data = token_stream(torch, args)
    runs = []
    for i in range(args.evo_runs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            losses, times = train(torch, args, evo_attention.sdpa, data)
        fallbacks = sorted({str(w.message) for w in caught})
        runs.append({"name": f"evo{i + 1}", "losses": losses, "times": times,
                     "fallbacks": fallbacks})
        print(f"evo{i + 1}: done, fallback warnings: {fallbacks or 'none'}", flush=True)
    for i in range(args.torch_runs):
        losses, times = train(torch, args, F.scaled_dot_product_attention, data)
        runs.append({"name": f"torch{i + 1}", "losses": losses, "times": times})
        print(f"torch{i + 1}: done", flush=True)

    names = [r["name"] for r in runs]
    print("\nstep " + " ".join(f"{n:>9s}" for n in names))
    for s in range(args.steps):
        print(f"{s:4d} " + " ".join(f"{r['losses'][s]:9.5f}" for r in runs))

    def maxdiff(a, b):
        return max(abs(x - y) for x, y in zip(a["losses"], b["losses"]))

    evo_runs, torch_runs = runs[:args.evo_runs], runs[args.evo_runs:]

    def spread_of(group):
        return max((maxdiff(a, b) for i, a in enumerate(group) for b in group[i + 1:]),
                   default=float("nan"))

    spread = spread_of(torch_runs)
    print("\nmax |loss difference| over all steps:")
    for e in evo_runs:
        for t in torch_runs:
            print(f"  {e['name']} vs {t['name']}: {maxdiff(e, t):.5f}")
    print(f"  spread among torch runs (largest pair): {spread:.5f}")
    if len(evo_runs) > 1:
        print(f"  spread among evo runs (largest pair): {spread_of(evo_runs):.5f}")
    print("final loss (mean of the last 10 steps):")
    for r in runs:
        print(f"  {r['name']}: {statistics.mean(r['losses'][-10:]):.5f}")
    print("median step time (ms, steps 10 on):")
    for r in runs:
        print(f"  {r['name']}: {1e3 * statistics.median(r['times'][10:]):.2f}")
    ok = all(math.isfinite(x) for r in runs for x in r["losses"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "runs": runs, "torch_spread": spread,
                       "evo_spread": spread_of(evo_runs),
                       "evo_vs_torch": [[maxdiff(e, t) for t in torch_runs] for e in evo_runs]},
                      f)
    return 0 if ok and not any(e["fallbacks"] for e in evo_runs) else 1


if __name__ == "__main__":
    sys.exit(main())

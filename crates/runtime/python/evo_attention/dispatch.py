"""Which champion serves a shape: the dispatch table's rule over the export's manifest.

Pure Python, no torch: CI checks it against evo's own rule (crates/genome/src/dispatch.rs)
without a GPU. The rule, as dispatch.toml's header states it:

1. the head dim must match (a champion is built and checked for its own);
2. a class of the same kind (causal or not, windowed or not, grouped K/V heads or not)
   is preferred; without one, a class with the same causality;
3. among those, the nearest in work |log2(B*H*Lq*Lk) - log2(class's)|;
4. ties go to the nearest key length, then to the nearest group (query heads per K/V
   head), then to the table's order.

The dtype is not a class: every champion is exported for f16 and bf16.

The backward is not dispatched by class: the manifest's `backward` entries give one
kernel per head dim (and dtype), `backward_for` finds it.
"""

import json
import math
import os

# OUT/python/evo_attention/dispatch.py -> OUT
EXPORT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MANIFEST_FORMAT = 1


def _work(batch, heads, q_len, kv_len):
    return math.log2(float(batch) * float(heads) * float(q_len) * float(kv_len))


def _group(entry):
    """Query heads per K/V head of a champion, read from its shape
    `B,H,Lq,Lk,D,dtype[,causal|causal=br][,kv=N][,window=LEFT:RIGHT]` (1 without `kv=`)."""
    kv = [int(f[3:]) for f in entry["shape"].split(",") if f.startswith("kv=")]
    return entry["heads"] // kv[0] if kv else 1


def _kind(entry):
    """(causal, windowed, grouped) of a champion, as the rule compares them."""
    windowed = any(f.startswith("window=") for f in entry["shape"].split(","))
    return (bool(entry["causal"]), windowed, _group(entry) > 1)


def arch_runs_on(arch, capability, cubin):
    """Whether code for `arch` runs on a GPU of compute capability (major, minor):
    as the runtime's `arch_runs_on` (crates/runtime/src/export.rs)."""
    digits = arch[3:] if arch.startswith("sm_") else arch
    specific = digits.endswith("a")
    try:
        n = int(digits.rstrip("a"))
    except ValueError:
        return False
    major, minor = divmod(n, 10)
    cc = tuple(capability)
    if specific:
        return cc == (major, minor)
    if cubin:
        return cc[0] == major and cc[1] >= minor
    return cc >= (major, minor)


class Manifest:
    """An export's manifest.json: its champions, in the dispatch table's order."""

    def __init__(self, export_dir=None):
        self.export_dir = export_dir or os.environ.get("EVO_EXPORT_DIR") or EXPORT_DIR
        path = os.path.join(self.export_dir, "manifest.json")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != MANIFEST_FORMAT:
            raise ValueError(
                f"{path}: format {data.get('format')} is not {MANIFEST_FORMAT}; "
                "use the Python module of the same export"
            )
        self.data = data
        self.champions = data["champions"]
        self.head_dims = sorted({c["head_dim"] for c in self.champions})
        self.dtypes = sorted({k["dtype"] for c in self.champions for k in c["kernels"]})
        # Exports written before the backward have no such key: no backward kernels.
        self.backward = data.get("backward", [])

    @property
    def device(self):
        return self.data["device"]

    @property
    def library(self):
        lib = self.data.get("library")
        return os.path.join(self.export_dir, lib) if lib else None

    def runs_on(self, capability):
        """Whether every kernel of the export can run on this compute capability (its
        PTX can wherever its CUBIN can, and the runtime falls back to it)."""
        return all(
            arch_runs_on(k["arch"], capability, False)
            for c in self.champions
            for k in c["kernels"]
        )

    def considered(self, batch, heads, q_len, kv_len, head_dim, causal, kv_heads=None, windowed=False):
        """The classes of the head dim (and kind, or else mask, if any has it), nearest
        first. `kv_heads` (None: `heads`) and `windowed` complete the problem's kind."""
        same_dim = [c for c in self.champions if c["head_dim"] == head_dim]
        if not same_dim:
            return []
        group = heads // kv_heads if kv_heads else 1
        kind = (bool(causal), bool(windowed), group > 1)
        same_kind = any(_kind(c) == kind for c in same_dim)
        same_mask = any(c["causal"] == bool(causal) for c in same_dim)
        if same_kind:
            pool = [c for c in same_dim if _kind(c) == kind]
        else:
            pool = [c for c in same_dim if not same_mask or c["causal"] == bool(causal)]
        work = _work(batch, heads, q_len, kv_len)
        key = math.log2(float(kv_len))
        lgroup = math.log2(float(group))

        def order(c):
            distance = abs(_work(c["batch"], c["heads"], c["q_len"], c["kv_len"]) - work)
            return (
                distance,
                abs(math.log2(float(c["kv_len"])) - key),
                abs(math.log2(float(_group(c))) - lgroup),
            )

        # sorted() is stable: equal keys keep the table's order, as the rule says.
        return sorted(pool, key=order)

    def choose(self, batch, heads, q_len, kv_len, head_dim, causal, kv_heads=None, windowed=False):
        """The champion entry serving this shape, or None when no class has its head dim."""
        pool = self.considered(batch, heads, q_len, kv_len, head_dim, causal, kv_heads, windowed)
        return pool[0] if pool else None

    def backward_for(self, head_dim, dtype):
        """The backward entry serving head dim `head_dim` in `dtype` ("f16" or "bf16")
        with a kernel of that dtype, or None."""
        for b in self.backward:
            if b["head_dim"] == head_dim and b.get("dtype") in (None, dtype):
                if any(k["dtype"] == dtype for k in b["kernels"]):
                    return b
        return None

    def backward_coverage(self):
        """What the export's backward covers, for messages: `D64, D96 (f16)`."""
        parts = []
        for b in self.backward:
            dtypes = sorted(k["dtype"] for k in b["kernels"])
            parts.append(f"D{b['head_dim']} ({', '.join(dtypes)})")
        return ", ".join(parts) or "none"

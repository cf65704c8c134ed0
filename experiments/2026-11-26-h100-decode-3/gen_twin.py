#!/usr/bin/env python3
"""A genome's Hopper kernel as a hand-written file with a few macros changed.

    python3 gen_twin.py DEFINES_FILE OUT.cu NAME=VALUE...

DEFINES_FILE is `evo compile GENOME --head-dim 128 --emit defines` (one -DNAME=VALUE a
line). The file written is the template exactly as `evo` compiles it (the same files, in
the same order, behind the same #line markers), preceded by the genome's macros with the
given ones replaced; EVO_HEAD_DIM and EVO_BF16 are left to the gates (kernels/ABI.md).
The template is read from $KERNELS (default: kernels, the repository's own), so a run can
time a patched copy (run-d5.sh and run-d7.sh apply this folder's patches to one).
The template's ring bound (EVO_STAGES <= 4) is widened to 8 and its barrier area to 512
bytes, so rings deeper than the genome allows can be timed; the shared-memory plan is
recomputed for the D128 one-consumer-warpgroup, non-persistent kernel. CTAS_PER_SM=2
(not a macro of the template) asks for two CTAs per SM: the launch bounds' minimum and the
register split's share of the register file are halved.
"""
import os
import re
import sys

FILES = ["mask.cuh", "cluster.cuh", "attention_sm90.cu", "attention_sm90_roles.cuh",
         "attention_sm90_kernel.cuh", "combine.cuh"]


def main():
    defines_file, out, *sets = sys.argv[1:]
    defs = {}
    for line in open(defines_file):
        line = line.strip()
        if line.startswith("-D"):
            k, v = line[2:].split("=", 1)
            defs[k] = v
    defs.setdefault("EVO_KV_STREAMS", "1")  # read by kv-streams.patch's template (D5)
    defs.setdefault("EVO_KV_PREFETCH", "0")  # read by kv-prefetch.patch's template (D7)
    defs.setdefault("EVO_DIAG_NO_MATH", "0")  # read by diag-no-math.patch's template (D11)
    defs.setdefault("EVO_WG_KEYS", "0")  # read by wg-keys.patch's template (D13)
    for s in sets:
        k, v = s.split("=", 1)
        defs[k] = v
    ctas = int(defs.pop("CTAS_PER_SM", "1"))
    for k in ("EVO_HEAD_DIM", "EVO_BF16"):
        defs.pop(k, None)
    bn, stages = int(defs["EVO_BLOCK_N"]), int(defs["EVO_STAGES"])
    assert defs["EVO_PERSISTENT"] == "0"
    assert defs["EVO_CONSUMER_WGS"] == "1" or defs["EVO_WG_KEYS"] == "1"  # 64 rows
    split = int(defs["EVO_SPLIT_KV"])
    exchange = (split - 1) * (16 // split + 1) * 16 * 128 if defs["EVO_CLUSTER_COMBINE"] == "1" else 0
    barrier = 512
    defs["EVO_SMEM_BYTES"] = str(1024 + 64 * 128 * 2 + 2 * stages * bn * 128 * 2 + barrier + exchange)
    text = ""
    for i, f in enumerate(FILES):
        body = open(os.path.join(os.environ.get("KERNELS", "kernels"), f)).read()
        if i:
            text += f'#line 1 "kernels/{f}"\n'
        text += body
    text, n1 = re.subn(r"kStages >= 1 && kStages <= 4", "kStages >= 1 && kStages <= 8", text)
    text, n2 = re.subn(r"constexpr int kBarrierBytes = 256;", f"constexpr int kBarrierBytes = {barrier};", text)
    assert n1 == 1 and n2 == 1, (n1, n2)
    if ctas > 1:
        text, n3 = re.subn(r"65536 / \(128 \* \(kWgs \+ 1\)\)", f"65536 / {ctas} / (128 * (kWgs + 1))", text)
        text, n4 = re.subn(r"__launch_bounds__\(evo::kThreads, 1\)", f"__launch_bounds__(evo::kThreads, {ctas})", text)
        assert n3 == 2 and n4 == 1, (n3, n4)
    head = "".join(f"#define {k} {v}\n" for k, v in defs.items())
    open(out, "w").write(f"// twin: {' '.join(sets)}\n" + head + text)


main()

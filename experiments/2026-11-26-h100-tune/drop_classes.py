"""Copy a champions folder without some classes: the seeds a tune would have for a
model whose shapes evo never searched. Usage: drop_classes.py SRC DST NAME..."""
import re
import shutil
import sys

src, dst, names = sys.argv[1], sys.argv[2], set(sys.argv[3:])
shutil.copytree(src, dst)
text = open(f"{src}/dispatch.toml").read()
# Top-level sections start at a `[[class]]` or `[[backward]]` line; a class's
# `[[class.baseline]]` tables stay with it.
parts = re.split(r"(?m)^(?=\[\[(?:class|backward)\]\]$)", text)
kept, dropped = [], []
for part in parts:
    m = re.search(r'(?m)^name = "([^"]+)"', part)
    if part.startswith("[[class]]") and m and m.group(1) in names:
        dropped.append(m.group(1))
    else:
        kept.append(part)
if set(dropped) != names:
    sys.exit(f"not in {src}/dispatch.toml: {sorted(names - set(dropped))}")
open(f"{dst}/dispatch.toml", "w").write("".join(kept))
print(f"{dst}: dropped {', '.join(sorted(dropped))}")

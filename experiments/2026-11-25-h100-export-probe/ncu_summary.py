#!/usr/bin/env python3
"""Median (min, max) of each metric over the kernels of an `ncu --csv --page raw` file."""
import csv
import sys


def main():
    rows = list(csv.reader(open(sys.argv[1], errors="replace")))
    start = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
    head, data = rows[start], [r for r in rows[start + 2:] if len(r) == len(rows[start])]
    print(f"{sys.argv[1]}: {len(data)} kernels")
    for j, name in enumerate(head):
        if "__" not in name:
            continue
        vals = []
        for r in data:
            try:
                vals.append(float(r[j].replace(",", "")))
            except ValueError:
                pass
        if vals:
            vals.sort()
            print(f"  {name:<55} {vals[len(vals) // 2]:>14.4g}  [{vals[0]:.4g}, {vals[-1]:.4g}]  {rows[start + 1][j]}")


if __name__ == "__main__":
    main()

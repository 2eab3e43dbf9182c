#!/usr/bin/env python3
"""Checks a sweep.h5 written by `rocesim sweep` (docs/studies.md).

usage: check_sweep.py SWEEP [--same-as OTHER] [--run POINT RESULTS]

Always: /meta holds the study; /points has one row per point, in point order, and each row's
workload metrics equal its /runs/<point> group's /workloads table; every run group is a
results.h5 as `rocesim run` writes it (its /meta, /workloads, /tiers).
--same-as OTHER: the same points table and the same datasets in every run group as OTHER.
--run POINT RESULTS: the run group of POINT holds what RESULTS (a results.h5) holds.
Prints "ok" or the failures (exit 1).
"""
import argparse
import sys

import h5py
import numpy as np


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def datasets(group, prefix=""):
    out = {}
    for name, obj in group.items():
        if isinstance(obj, h5py.Dataset):
            out[prefix + name] = obj[()]
        else:
            out.update(datasets(obj, prefix + name + "/"))
    return out


def same(a, b):
    if isinstance(a, np.ndarray) and a.dtype.names:
        return a.dtype == b.dtype and all(same(a[n], b[n]) for n in a.dtype.names)
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.array_equal(a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--same-as", metavar="OTHER")
    ap.add_argument("--run", nargs=2, metavar=("POINT", "RESULTS"))
    args = ap.parse_args()
    failures = []

    def check(ok, message):
        if not ok:
            failures.append(message)

    with h5py.File(args.sweep, "r") as f:
        check(len(text(f["meta"].attrs["study"])) > 0, "/meta@study is empty")
        points = f["points"][:]
        ids = points["point"]
        check(bool(np.all(np.diff(ids) > 0)), "/points: not in point order")
        runs = sorted(f["runs"].keys())
        check(runs == [f"{i:07d}" for i in ids], "/runs: not one group per row of /points")
        for row in points:
            g = f["runs"][f"{row['point']:07d}"]
            check(int(g["meta"].attrs["seed"]) == int(row["seed"]),
                  f"point {row['point']}: seed differs from its run")
            for w in g["workloads"][:]:
                col = text(w["name"]) + ".completion_s"
                check(col in points.dtype.names, f"/points: no column {col}")
                if col in points.dtype.names:
                    check(np.isclose(row[col], (w["end_ps"] - w["start_ps"]) * 1e-12,
                                     rtol=1e-12, atol=0),
                          f"point {row['point']}: {col} differs from its run")
        if args.same_as:
            with h5py.File(args.same_as, "r") as g:
                check(same(points, g["points"][:]), f"/points differs from {args.same_as}")
                check(sorted(g["runs"].keys()) == runs, f"/runs differs from {args.same_as}")
                for r in runs:
                    a, b = datasets(f["runs"][r]), datasets(g["runs"][r])
                    check(sorted(a) == sorted(b), f"/runs/{r}: other datasets")
                    for name in a:
                        if name in b:
                            check(same(a[name], b[name]), f"/runs/{r}/{name} differs")
        if args.run:
            point, results = args.run
            with h5py.File(results, "r") as g:
                mine = datasets(f["runs"][f"{int(point):07d}"])
                theirs = datasets(g)
                for name in ("workloads", "tiers", "links", "flows", "qps"):
                    check(name in mine and same(mine[name], theirs[name]),
                          f"point {point}: /{name} differs from {results}")
    for m in failures:
        print(f"{args.sweep}: {m}", file=sys.stderr)
    if not failures:
        print(f"{args.sweep}: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

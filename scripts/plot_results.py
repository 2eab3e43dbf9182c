#!/usr/bin/python3
"""Plot a results.h5 written by `rocesim run` or `rocesim nccl-tests`.

Usage:
    python3 scripts/plot_results.py RESULTS.h5 OUT_DIR

Writes into OUT_DIR (created if missing), each PNG under a temporary name then renamed:
  links.png  the distribution of link utilisation per link class (tier): a box per class
             (median, quartiles, 5th-95th percentiles) with the maximum marked, from /links;
  fct.png    the distribution of flow completion times (delivered - start) per workload, as
             a cumulative distribution on a log axis, from /flows (only the flows the file
             keeps: output.max_flows); not drawn when the file has no flows;
  busbw.png  for an nccl-tests run (/tables/nccl_tests): bus bandwidth (out of place and in
             place) against message size;
  congestion.png  for a run of a model with queues (/congestion: network.model fluid): the
             queue depth over time of the links that queued deepest (at most 8), and per link
             class the time its links' senders were paused by PFC.
Prints the paths written. The PNGs are the same bytes for the same file (default style,
fixed size and dpi, no software tag).

Exit status: 0 done; 2 bad input (missing or unreadable file, not a results file); 1
matplotlib or h5py missing, or a PNG could not be written.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy, python3-matplotlib).
"""

import argparse
import os
import sys

DPI = 100


def save(fig, path):
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise RuntimeError(f"{path}: cannot write: {e.strerror or e}")


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def plot_links(f, plt, np, out):
    links = f["links"][:]
    classes = [text(c) for c in f["link_classes"][:]]
    data, names, maxima = [], [], []
    for i, name in enumerate(classes):
        u = links["utilization"][links["link_class"] == i]
        if len(u) == 0:
            continue
        data.append(100 * u)
        names.append(f"{name}\n({len(u)} links)")
        maxima.append(100 * u.max())
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(names)), 4.5), dpi=DPI)
    ax.boxplot(data, whis=(5, 95), showfliers=False)
    ax.plot(range(1, len(maxima) + 1), maxima, "v", color="C3", label="maximum")
    ax.set_xticks(range(1, len(names) + 1))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("link utilisation over the run (%)")
    ax.set_ylim(bottom=0)
    ax.set_title("Link utilisation per tier (box: quartiles and median; whiskers: 5-95%)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = os.path.join(out, "links.png")
    save(fig, path)
    plt.close(fig)
    return path


def plot_fct(f, plt, np, out):
    flows = f["flows"][:]
    if len(flows) == 0:
        return None
    names = {int(w["id"]): text(w["name"]) for w in f["workloads"][:]}
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=DPI)
    for wid in sorted(set(int(w) for w in flows["workload"])):
        mine = flows[flows["workload"] == wid]
        fct = np.sort((mine["delivered_ps"] - mine["start_ps"]) * 1e-6)  # us
        y = np.arange(1, len(fct) + 1) / len(fct)
        ax.step(fct, y, where="post", label=f"{names.get(wid, wid)} ({len(fct)} flows)")
    ax.set_xscale("log")
    ax.set_xlabel("flow completion time (us)")
    ax.set_ylabel("fraction of flows")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Flow completion times", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "fct.png")
    save(fig, path)
    plt.close(fig)
    return path


def plot_busbw(f, plt, np, out):
    if "tables" not in f or "nccl_tests" not in f["tables"]:
        return None
    t = f["tables"]["nccl_tests"]
    size = t["size_bytes"][:]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=DPI)
    ax.plot(size, t["busbw_out_of_place"][:], "o-", ms=3, label="out of place")
    ax.plot(size, t["busbw_in_place"][:], "x--", ms=3, label="in place")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("nccl-tests bus bandwidth", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = os.path.join(out, "busbw.png")
    save(fig, path)
    plt.close(fig)
    return path


def plot_congestion(f, plt, np, out):
    if "congestion" not in f:
        return None
    g = f["congestion"]
    series = g["queue_series"][:]
    tiers = g["tiers"][:]
    links = f["links"][:]
    names = [text(n) for n in f["nodes"][:]["name"]] if "nodes" in f else None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), dpi=DPI,
                                      gridspec_kw={"width_ratios": [2, 1]})
    # Rows are grouped by id: each link's deepest queue in one pass over them.
    ids, first = np.unique(series["id"], return_index=True)
    peaks = np.maximum.reduceat(series["value"], first) if len(first) else np.array([])
    deepest = [int(ids[k]) for k in sorted(range(len(ids)), key=lambda k: -peaks[k])[:8]]
    for i in sorted(deepest):
        mine = series[series["id"] == i]
        label = f"link {i}"
        if names is not None:
            label = f"{names[links['src'][i]]} -> {names[links['dst'][i]]}"
        left.plot(mine["t_ps"] * 1e-6, mine["value"] / 1e6, label=label)
    left.set_xlabel("time (us)")
    left.set_ylabel("egress queue (MB)")
    left.set_title("Deepest egress queues" if deepest else "No queue built", fontsize=10)
    left.grid(True, alpha=0.3)
    if deepest:
        left.legend(fontsize=7, loc="upper right")
    classes = [text(c) for c in tiers["link_class"]]
    right.barh(range(len(classes)), 100 * tiers["paused_fraction"])
    right.set_yticks(range(len(classes)), classes, fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("time paused by PFC (% of link time)")
    right.set_title("PFC pauses per link class", fontsize=10)
    right.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, "congestion.png")
    save(fig, path)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(prog="plot_results.py",
                                description="Plot link utilisation, flow completion times and "
                                            "nccl-tests bus bandwidth from a results.h5.")
    p.add_argument("results", metavar="RESULTS.h5")
    p.add_argument("out", metavar="OUT_DIR")
    a = p.parse_args(argv)
    try:
        import h5py
        import numpy as np
        import matplotlib
    except ImportError as e:
        print(f"plot_results: {e.name} is missing: install python3-h5py, python3-numpy and "
              "python3-matplotlib (scripts/install-deps)", file=sys.stderr)
        return 1
    matplotlib.use("Agg")
    matplotlib.rcdefaults()  # ignore any matplotlibrc: the same file gives the same PNGs
    import matplotlib.pyplot as plt
    try:
        f = h5py.File(a.results, "r")
    except OSError as e:
        print(f"{a.results}: error: expected a results.h5 written by rocesim, found a file "
              f"that cannot be read ({e})", file=sys.stderr)
        return 2
    with f:
        if "tables" in f and "links" not in f:
            required = ()  # an nccl-tests or validate file without a fabric
        else:
            required = ("links", "link_classes", "flows", "workloads")
        missing = [k for k in required if k not in f]
        if missing or ("links" not in f and "tables" not in f):
            print(f"{a.results}: error: expected a results.h5 written by rocesim run or "
                  f"nccl-tests, found no {', '.join('/' + m for m in missing) or '/links'}",
                  file=sys.stderr)
            return 2
        os.makedirs(a.out, exist_ok=True)
        try:
            written = []
            if "links" in f:
                written.append(plot_links(f, plt, np, a.out))
                written.append(plot_fct(f, plt, np, a.out))
                written.append(plot_congestion(f, plt, np, a.out))
            written.append(plot_busbw(f, plt, np, a.out))
        except RuntimeError as e:
            print(f"plot_results: {e}", file=sys.stderr)
            return 1
    for w in written:
        if w:
            print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())

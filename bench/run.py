#!/usr/bin/env python3
"""rocesim benchmarks: micro-benchmarks, scale runs and the SimGrid comparison, in one go.

  bench/run-benchmarks [--runs 5] [--quick]

Every figure is a median over --runs runs of the whole process, timed with /usr/bin/time (wall
clock and peak resident memory). Runs of rocesim and of the peer alternate, so that load on a
shared machine hits both alike. The report (Markdown) is printed and written to
build/bench/report.md.

The peer is SimGrid's flow-level max-min model, run through the harness in the peers folder
(default: ../shared/peers beside the checkout; override with PEERS=/path). It runs the reference
scenarios of that folder's README; bench/reference.py writes the same flows for rocesim, pinned
to the same spines, and the per-flow completion times of both are compared. TCP in the fluid
model is compared the same way with the packet-level ns-3 runs stored in that folder.

  bench/run-benchmarks --only tcp --runs 3     # one section
"""
import argparse
import csv
import gzip
import math
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import reference  # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build", "release"))
OUT = os.path.join(ROOT, "build", "bench")
CLI = os.path.join(BUILD, "rocesim")
PEERS = os.environ.get("PEERS", os.path.join(os.path.dirname(ROOT), "shared", "peers"))
TIME = "/usr/bin/time"


def timed(cmd, cwd=None):
    """Runs cmd under /usr/bin/time; returns (wall seconds, peak RSS MiB, stdout)."""
    tfile = os.path.join(OUT, "time.txt")
    p = subprocess.run([TIME, "-f", "%e %M", "-o", tfile] + cmd, cwd=cwd, capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-2000:]}")
    wall, rss_kb = open(tfile).read().split()[-2:]
    return float(wall), int(rss_kb) / 1024.0, p.stdout


def events_of(summary):
    m = re.search(r"; (\d+) flows, (\d+) events", summary)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def median(xs):
    return statistics.median(xs)


def micro(report):
    exe = os.path.join(BUILD, "bench", "micro_maxmin")
    p = subprocess.run([exe, "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true",
                        "--benchmark_format=csv"], capture_output=True, text=True, check=True)
    report.append("## Solver micro-benchmarks (medians of 5 repetitions)\n")
    report.append("| benchmark | time per iteration | items/s |\n|---|---:|---:|")
    rows = list(csv.reader(p.stdout.splitlines()))
    header = next(r for r in rows if r and r[0] == "name")
    col = {name: i for i, name in enumerate(header)}
    for row in rows:
        if len(row) == len(header) and row[0].endswith("_median"):
            items = row[col["items_per_second"]]
            report.append(f"| {row[0][: -len('_median')]} | {float(row[col['real_time']]):.4g} "
                          f"{row[col['time_unit']]} | {float(items):.4g} |" if items else "|")
    report.append("")


def scale(report, runs, quick):
    cases = [("ring_allreduce_1024", "1 GiB ring AllReduce, 1,024 GPUs"),
             ("ring_allreduce_4096", "1 GiB ring AllReduce, 4,096 GPUs"),
             ("ring_allreduce_8192", "1 GiB ring AllReduce, 8,192 GPUs (target < 10 s)"),
             ("rings_32768", "one step of 4,096 8-rank rings, 32,768 GPUs"),
             ("zero3_70b_32768", "one ZeRO-3 step of Llama 3 70B, 32,768 GPUs")]
    if quick:
        cases = cases[:1]
    report.append(f"## Scale benchmarks (release build, one thread, medians of {runs} runs)\n")
    report.append("| scenario | wall s | peak RSS MiB | flows | events | events/s |")
    report.append("|---|---:|---:|---:|---:|---:|")
    for name, what in cases:
        path = os.path.join(ROOT, "bench", "scenarios", name + ".yaml")
        walls, rss = [], []
        flows = events = 0
        for _ in range(runs):
            w, r, out = timed([CLI, "run", path, "--no-output"])
            walls.append(w)
            rss.append(r)
            flows, events = events_of(out)
        w = median(walls)
        report.append(f"| {what} (`bench/scenarios/{name}.yaml`) | {w:.2f} | {median(rss):.0f} | "
                      f"{flows:,} | {events:,} | {events / w:,.3g} |")
    report.append("")


def collectives(report, runs, quick):
    """nccl-tests on large communicators: the whole sweep, AlltoAll, rings of 16,384 GPUs."""
    cases = [
        ("nccl_1024", ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2"],
         "all_reduce_perf 8 B - 8 GiB (x2, 31 sizes, -n 20 -w 5), 1,024 GPUs", "< 10 s", runs),
        ("nccl_1024", ["alltoall_perf", "-b", "1G", "-e", "1G", "-n", "1", "-w", "0"],
         "alltoall_perf 1 GiB (out of place and in place), 1,024 GPUs", "< 30 s, < 8 GiB", runs),
        # Minutes a run: at most 3.
        ("nccl_4096", ["alltoall_perf", "-b", "1G", "-e", "1G", "-n", "1", "-w", "0"],
         "alltoall_perf 1 GiB (out of place and in place), 4,096 GPUs (AI Zone)",
         "< 60 s, < 8 GiB", min(runs, 3)),
        ("nccl_16384", ["-x", "NCCL_ALGO=Ring", "-x", "NCCL_PROTO=Simple", "all_reduce_perf",
                        "-b", "1G", "-e", "1G", "-n", "1", "-w", "0"],
         "ring AllReduce 1 GiB (NCCL_ALGO=Ring, Simple), 16,384 GPUs", "", runs),
    ]
    if quick:
        cases = cases[:1]
    report.append("## Collectives: `rocesim nccl-tests` (release build, one thread, medians)\n")
    report.append("| benchmark | target | runs | wall s | peak RSS MiB | last row: time, busbw |")
    report.append("|---|---|---:|---:|---:|---|")
    for name, args, what, target, case_runs in cases:
        path = os.path.join(ROOT, "bench", "scenarios", name + ".yaml")
        walls, rss = [], []
        last = ""
        for _ in range(case_runs):
            w, r, out = timed([CLI, "nccl-tests", "--scenario", path, "--no-output"] + args)
            walls.append(w)
            rss.append(r)
            rows = [line.split() for line in out.splitlines() if line and line[0] != "#"]
            last = f"{rows[-1][5]} us, {rows[-1][7]} GB/s"
        report.append(f"| {what} | {target} | {case_runs} | {median(walls):.2f} | "
                      f"{median(rss):.0f} | {last} |")
    report.append("")


def fluid(report, runs, quick):
    """The fluid network model (queues, PFC, ECN, DCQCN) against max-min on the same scenario:
    wall time, peak memory, the ratio (issue 9 target: under 10x), and the simulated times; and
    the fluid model on two threads against one (issue 9 target: at least 1.7x faster)."""
    cases = [("ring_allreduce_1024", "1 GiB ring AllReduce, 1,024 GPUs", "allreduce"),
             ("alltoall_128", "64 MiB NCCL AlltoAll, 128 GPUs", "alltoall")]
    if quick:
        cases = cases[:1]
    report.append(f"## Fluid network model against max-min (release build, medians of {runs} "
                  f"alternating runs; one thread unless said)\n")
    report.append("| scenario | max-min wall s | fluid wall s | ratio | fluid RSS MiB | "
                  "simulated max-min / fluid | fluid, 2 threads, wall s | 2 threads' speed-up |")
    report.append("|---|---:|---:|---:|---:|---|---:|---:|")
    for name, what, workload in cases:
        path = os.path.join(ROOT, "bench", "scenarios", name + ".yaml")
        variants = {"maxmin": ("maxmin", 1), "fluid": ("fluid", 1), "fluid2": ("fluid", 2)}
        walls = {v: [] for v in variants}
        rss, simulated = [], {}
        for _ in range(runs):
            for v, (model, threads) in variants.items():
                w, r, out = timed([CLI, "run", path, "--no-output", "--threads", str(threads),
                                   "--set", f"network.model={model}"])
                walls[v].append(w)
                if v == "fluid":
                    rss.append(r)
                m = re.search(rf"^{workload}\s+\S+\s+\S+(?: \S+)?\s+(\S+ \S+)", out, re.M)
                simulated[v] = m.group(1) if m else "?"
        if simulated["fluid2"] != simulated["fluid"]:
            raise SystemExit(f"{name}: the fluid model at 2 threads simulated "
                             f"{simulated['fluid2']}, at 1 {simulated['fluid']}")
        a, b, c = (median(walls[v]) for v in variants)
        report.append(f"| {what} (`bench/scenarios/{name}.yaml`) | {a:.2f} | {b:.2f} | "
                      f"{b / a:.0f}x | {median(rss):.0f} | {simulated['maxmin']} / "
                      f"{simulated['fluid']} | {c:.2f} | {b / c:.2f}x |")
    report.append("")


def reshare(report, runs, quick):
    """Max-min with network.reshare_delay against exact on an AlltoAllv whose pairs end one by
    one: wall time, and the simulated time's error against exact (docs/models/maxmin.md)."""
    path = os.path.join(ROOT, "bench", "scenarios", "alltoallv_128.yaml")
    delays = ["0s", "1us", "5us"] if quick else ["0s", "1us", "5us", "20us"]
    report.append(f"## Re-sharing after ends: 64 MiB AlltoAllv (imbalance 0.3), 128 GPUs "
                  f"(`bench/scenarios/alltoallv_128.yaml`; release build, one thread, medians of "
                  f"{runs} alternating runs)\n")
    report.append("| network.reshare_delay | wall s | speed-up | simulated | against exact |")
    report.append("|---|---:|---:|---:|---:|")
    walls = {d: [] for d in delays}
    simulated = {}
    import h5py
    for _ in range(runs):
        for d in delays:
            # results.h5 (no flow table: a few kB) for the simulated end to the picosecond
            h5 = os.path.join(OUT, f"reshare_{d}.h5")
            if os.path.exists(h5):
                os.unlink(h5)
            w, _, _ = timed([CLI, "run", path, "-q", "-o", h5, "--set",
                             f"network.reshare_delay={d}"])
            walls[d].append(w)
            with h5py.File(h5, "r") as f:
                simulated[d] = float(f["meta"].attrs["end_ps"]) * 1e-12
    exact_wall, exact = median(walls["0s"]), simulated["0s"]
    for d in delays:
        w = median(walls[d])
        err = "" if d == "0s" else f"{100 * (simulated[d] / exact - 1):+.2f} %"
        report.append(f"| {d} | {w:.2f} | {exact_wall / w:.1f}x | {simulated[d] * 1e6:.3f} us | "
                      f"{err} |")
    report.append("")


def read_ns3(scen, n, nbytes):
    """Per-flow FCTs of the peers' stored ns-3 run, and its wall time on this machine."""
    path = os.path.join(PEERS, "results", "ns3", f"fct_{scen}_N{n}_B{nbytes}.csv.gz")
    with gzip.open(path, "rt") as f:
        fct = {(int(r["src"]), int(r["dst"])): float(r["fct_s"]) for r in csv.DictReader(f)}
    with open(os.path.join(PEERS, "results", "ns3_summary.csv")) as f:
        for r in csv.DictReader(f):
            if (r["scenario"], int(r["N"]), r["tcp"], int(r["bytes"])) == (scen, n, "NewReno",
                                                                            nbytes):
                return fct, float(r["wall_s"])
    raise KeyError(path)


def fct_stats(fct):
    v = sorted(fct.values())
    return sum(v) / len(v), v[math.ceil(0.99 * len(v)) - 1], v[-1]


def tcp_vs_ns3(report, runs, quick):
    """TCP in the fluid model against the peers' packet-level ns-3 runs of the same flows
    (issue 9 item 9: at least 1,000x faster, mean FCT within 10 %, p99 reported). ns-3 takes 38 to
    480 s a run, so its per-flow results and wall times are the ones stored in the peers folder
    (measured on this machine, peers README section 4); rocesim runs here."""
    if not os.path.isdir(os.path.join(PEERS, "results", "ns3")):
        report.append(f"## TCP against ns-3\n\nskipped: no ns-3 results at {PEERS}\n")
        return
    report.append(f"## TCP (fluid model) against ns-3 3.37 (NewReno, 100 Gb/s, permutation of "
                  f"16 MiB flows; rocesim medians of {runs} runs, ns-3 stored)\n")
    report.append("| hosts | ns-3 wall s | rocesim wall s | speed-up | mean FCT ns-3 / rocesim us | "
                  "difference | p99 FCT ns-3 / rocesim us | max FCT ns-3 / rocesim us |")
    report.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in ([64] if quick else [64, 128, 256, 512]):
        nbytes = 16 << 20
        sdir = os.path.join(OUT, "reference")
        yaml_path = reference.write("perm", n, sdir, 100, nbytes, tcp=True)
        h5 = os.path.join(sdir, f"perm_N{n}_tcp.h5")
        walls = [timed([CLI, "run", yaml_path, "-o", h5, "-q"])[0] for _ in range(runs)]
        ours = read_rocesim_fct(h5)
        theirs, ns3_wall = read_ns3("perm", n, nbytes)
        assert ours.keys() == theirs.keys(), "the two simulators ran different flows"
        (am, ap, ax), (bm, bp, bx) = fct_stats(theirs), fct_stats(ours)
        w = median(walls)
        report.append(f"| {n} | {ns3_wall:.1f} | {w:.3f} | {ns3_wall / w:.0f}x | "
                      f"{am * 1e6:.0f} / {bm * 1e6:.0f} | {(bm / am - 1) * 100:+.1f}% | "
                      f"{ap * 1e6:.0f} / {bp * 1e6:.0f} | {ax * 1e6:.0f} / {bx * 1e6:.0f} |")
    report.append("")


def calibration(report, runs, quick):
    """rocesim calibrate fit on the H100 development data: the cost of the simulator in the loop,
    one thread against two in alternating runs (same result, see the tests)."""
    cmd = [CLI, "calibrate", "fit",
           "--scenario", os.path.join(ROOT, "validation", "scenarios", "h100-ib-400g.yaml"),
           "--measured", os.path.join(ROOT, "validation", "data", "measured",
                                      "nvidia_nccl-tests_issue309_h100_ib_2-8nodes.yaml"),
           "--train", "nodes=2..4", "-o", os.path.join(OUT, "calibration.yaml")]
    threads = [1] if quick else [1, 2]
    walls = {t: [] for t in threads}
    rss = {t: [] for t in threads}
    sims = 0
    for _ in range(1 if quick else runs):
        for t in threads:
            w, r, out = timed(cmd + ["--threads", str(t)])
            walls[t].append(w)
            rss[t].append(r)
            m = re.search(r"(\d+) simulations of the training rows", out)
            sims = int(m.group(1)) if m else 0
    report.append("## Calibration: `rocesim calibrate fit` (H100 data, 106 training rows, "
                  "5 parameters; medians)\n")
    report.append("| threads | wall s | peak RSS MiB | simulations | ms per simulation |")
    report.append("|---:|---:|---:|---:|---:|")
    for t in threads:
        w = median(walls[t])
        report.append(f"| {t} | {w:.2f} | {median(rss[t]):.0f} | {sims} | "
                      f"{1000 * w / max(sims, 1):.1f} |")
    report.append("")


def read_rocesim_fct(h5path):
    import h5py  # Debian's python3-h5py
    with h5py.File(h5path, "r") as f:
        flows = f["flows"][:]
    return {(int(r["src_rank"]), int(r["dst_rank"])): float(r["fct_s"]) for r in flows}


def read_simgrid_fct(csv_path):
    out = {}
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            out[(int(row["src"]), int(row["dst"]))] = float(row["fct_s"])
    return out


def peers(report, runs, quick):
    harness = os.path.join(OUT, "peers", "simgrid_fabric")
    if not os.path.isdir(PEERS):
        report.append(f"## SimGrid comparison\n\nskipped: no peers folder at {PEERS} (set PEERS)\n")
        return
    b = subprocess.run(["make", "-s", "-C", PEERS, f"BUILD={os.path.join(OUT, 'peers')}",
                        "simgrid"], capture_output=True, text=True)
    if b.returncode != 0:
        report.append("## SimGrid comparison\n\nskipped: the SimGrid harness did not build "
                      "(scripts/install-deps --bench installs libsimgrid-dev)\n")
        return
    report.append("## Against SimGrid 3.32 (max-min, reference scenarios; medians of alternating "
                  "runs, both writing per-flow results)\n")
    report.append("| scenario | flows | rocesim wall s | rocesim RSS MiB | SimGrid wall s | "
                  "SimGrid RSS MiB | speed-up | max FCT difference |")
    report.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    # (scenario, hosts, runs): the all-to-all takes SimGrid over a minute, so it runs once.
    cases = [("perm", 4096, runs), ("perm", 16384, runs), ("a2a", 256, 1)]
    if quick:
        cases = cases[:1]
    for scen, n, case_runs in cases:
        sdir = os.path.join(OUT, "reference")
        yaml_path = reference.write(scen, n, sdir)
        h5 = os.path.join(sdir, f"{scen}_N{n}.h5")
        sg_csv = os.path.join(sdir, f"{scen}_N{n}_simgrid.csv")
        ours, theirs = [], []
        for _ in range(case_runs):
            ours.append(timed([CLI, "run", yaml_path, "-o", h5, "-q"]))
            theirs.append(timed([harness, f"--hosts={n}", f"--scenario={scen}", f"--csv={sg_csv}",
                                 "--log=root.thresh:warning"]))
        a = read_rocesim_fct(h5)
        s = read_simgrid_fct(sg_csv)
        assert a.keys() == s.keys(), "the two simulators ran different flows"
        diff = max(abs(a[k] - s[k]) / s[k] for k in s)
        ow, tw = median([x[0] for x in ours]), median([x[0] for x in theirs])
        label = f"{scen} N={n} ({case_runs} run{'s' if case_runs > 1 else ''})"
        report.append(f"| {label} | {len(s):,} | {ow:.3f} | {median([x[1] for x in ours]):.0f} | "
                      f"{tw:.3f} | {median([x[1] for x in theirs]):.0f} | {tw / ow:.1f}x | "
                      f"{diff:.2e} |")
    report.append("")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one case of each kind (for testing)")
    sections = {"micro": micro, "scale": scale, "collectives": collectives,
                "fluid": fluid, "reshare": reshare, "tcp": tcp_vs_ns3, "calibration": calibration,
                "peers": peers}
    ap.add_argument("--only", choices=sorted(sections), action="append",
                    help="run only these sections (repeatable; default: all)")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    report = ["# rocesim benchmark report\n",
              f"machine: {os.cpu_count()} cores; `{' '.join(os.uname()[2:3])}`\n"]
    for name, section in sections.items():
        if args.only and name not in args.only:
            continue
        if name == "micro":
            section(report)
        else:
            section(report, args.runs, args.quick)
    text = "\n".join(report)
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

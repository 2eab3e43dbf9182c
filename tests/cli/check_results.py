#!/usr/bin/python3
"""Checks a rocesim results file against the schema of docs/output.md.

    check_results.py RESULTS.h5                      structure and sane values
    check_results.py RESULTS.h5 --differs-from B.h5  also: the QP and flow tables differ from B's
    check_results.py RESULTS.h5 --tables-only        a file of column tables (rocesim validate)

Every group, dataset and field of the schema must be present with its type, and the values must
be consistent with each other: flows are delivered after their last byte left the sender, which is
after they started; link utilisation is a fraction; workloads take time; every index points at an
existing row. Exits 0 when all checks pass; otherwise prints each failed check and exits 1.
Standard library, h5py and numpy only (PyYAML is used when present).
"""

import argparse
import sys

import h5py
import numpy as np

# The schema: dataset -> [(field, numpy kind, item size)], as written by sim/metrics/hdf5_writer.cpp.
# Kinds: u unsigned, i signed, f float, S fixed-length byte string (NUL-padded; its width is a
# storage detail and not checked).
TABLES = {
    "nodes": [("id", "u", 4), ("server", "u", 4), ("local", "u", 4), ("zone", "u", 4),
              ("tier", "u", 1), ("kind", "S", 16), ("role", "S", 16), ("name", "S", 48)],
    "links": [("id", "u", 4), ("src", "u", 4), ("dst", "u", 4), ("link_class", "u", 2),
              ("capacity_bps", "i", 8), ("latency_ps", "i", 8), ("bytes", "i", 8),
              ("utilization", "f", 8), ("qps", "u", 4)],
    "flows": [("id", "u", 8), ("workload", "u", 4), ("src_rank", "u", 4), ("dst_rank", "u", 4),
              ("qp", "u", 4), ("path", "u", 4), ("legs", "u", 4), ("bytes", "i", 8),
              ("start_ps", "i", 8),
              ("bandwidth_end_ps", "i", 8), ("delivered_ps", "i", 8), ("fct_s", "f", 8)],
    "qps": [("qp", "u", 4), ("src_rank", "u", 4), ("dst_rank", "u", 4), ("src_ip", "u", 4),
            ("dst_ip", "u", 4), ("src_port", "u", 2), ("dst_port", "u", 2), ("dst_qpn", "u", 4),
            ("path", "u", 4)],
    "workloads": [("id", "u", 4), ("name", "S", 48), ("type", "S", 48), ("start_ps", "i", 8),
                  ("end_ps", "i", 8), ("duration_s", "f", 8), ("flows", "u", 8),
                  ("bytes", "i", 8), ("throughput_gbps", "f", 8), ("mean_fct_s", "f", 8),
                  ("max_fct_s", "f", 8)],
    "workload_figures": [("workload", "u", 4), ("name", "S", 48), ("value", "f", 8)],
    "workload_notes": [("workload", "u", 4), ("name", "S", 48), ("text", "S", 48)],
    "tiers": [("link_class", "S", 48), ("links", "u", 8), ("capacity_bps", "f", 8),
              ("mean_utilization", "f", 8), ("max_utilization", "f", 8), ("mean_qps", "f", 8),
              ("max_qps", "u", 4), ("mmr", "f", 8), ("p50_utilization", "f", 8),
              ("p90_utilization", "f", 8), ("p99_utilization", "f", 8), ("busy_links", "u", 8),
              ("busy_mmr", "f", 8)],
}
ARRAYS = {  # plain 1-D datasets
    "link_classes": ("S", 48),
    "paths/links": ("u", 4),
    "paths/offsets": ("u", 8),
    "paths/latency_ps": ("i", 8),
    "paths/weights": ("f", 8),
    "paths/union": ("u", 1),
}
META_STRINGS = ["version", "scenario_name", "scenario_file", "scenario", "fabric",
                "routing_scheme"]
META_NUMBERS = {"seed": "u", "end_ps": "i", "events": "u", "flows_total": "u",
                "flows_truncated": "u", "flowlets": "u", "flowlet_moves": "u",
                "flowlet_reorders": "u", "te_computations": "u", "te_moved_qps": "u"}
NONE = 0xFFFFFFFF  # "no server", "no zone", "not routed"
ROCEV2_PORT = 4791
# Utilisation and rates are computed in floating point from integer counts.
TOLERANCE = 1e-9


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, ok, message):
        if not bool(ok):
            self.failures.append(message)
        return bool(ok)


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def check_structure(f, c):
    for name, fields in TABLES.items():
        if not c.check(name in f and isinstance(f[name], h5py.Dataset), f"missing dataset /{name}"):
            continue
        ds = f[name]
        c.check(ds.ndim == 1, f"/{name} is not one-dimensional")
        names = ds.dtype.names or ()
        # Fields are read by name; their order in the file is not part of the schema.
        c.check(sorted(names) == sorted(n for n, _, _ in fields),
                f"/{name} fields are {list(names)}, expected {[n for n, _, _ in fields]}")
        for field, kind, size in fields:
            if field not in names:
                continue
            dt = ds.dtype[field]
            c.check(dt.kind == kind and (kind == "S" or dt.itemsize == size),
                    f"/{name}.{field} has type {dt.str}, expected kind {kind} of {size} bytes")
    for name, (kind, size) in ARRAYS.items():
        if not c.check(name in f and isinstance(f[name], h5py.Dataset), f"missing dataset /{name}"):
            continue
        dt = f[name].dtype
        c.check(f[name].ndim == 1 and dt.kind == kind and (kind == "S" or dt.itemsize == size),
                f"/{name} has type {dt.str} and shape {f[name].shape}")
    if not c.check("meta" in f and isinstance(f["meta"], h5py.Group), "missing group /meta"):
        return False
    attrs = f["meta"].attrs
    for name in META_STRINGS:
        c.check(name in attrs, f"missing attribute /meta@{name}")
    for name, kind in META_NUMBERS.items():
        if c.check(name in attrs, f"missing attribute /meta@{name}"):
            c.check(np.asarray(attrs[name]).dtype.kind == kind,
                    f"/meta@{name} has type {np.asarray(attrs[name]).dtype.str}")
    return not c.failures


def check_meta(f, c):
    attrs = f["meta"].attrs
    for name in META_STRINGS:
        c.check(len(text(attrs[name])) > 0, f"/meta@{name} is empty")
    c.check(int(attrs["end_ps"]) > 0, "/meta@end_ps is not positive")
    c.check(int(attrs["events"]) > 0, "/meta@events is not positive")
    c.check(int(attrs["flows_truncated"]) in (0, 1), "/meta@flows_truncated is not 0 or 1")
    c.check(int(attrs["flowlet_reorders"]) <= int(attrs["flowlet_moves"]) <=
            int(attrs["flowlets"]), "/meta: flowlet reorders <= moves <= flowlets does not hold")
    c.check(text(attrs["routing_scheme"]) in ("flowlet", "adaptive") or
            int(attrs["flowlets"]) == 0,
            "/meta: flowlets counted without flowlet routing (adaptive re-spreads bursts too)")
    c.check(text(attrs["routing_scheme"]) == "te" or int(attrs["te_computations"]) == 0,
            "/meta: TE computations without traffic engineering")
    scenario = text(attrs["scenario"])
    try:
        import yaml  # python3-yaml, optional
    except ImportError:
        return
    try:
        parsed = yaml.safe_load(scenario)
    except yaml.YAMLError as e:
        c.check(False, f"/meta@scenario is not YAML: {e}")
        return
    if c.check(isinstance(parsed, dict), "/meta@scenario is not a YAML mapping"):
        for key in ("seed", "topology", "workloads"):
            c.check(key in parsed, f"/meta@scenario has no '{key}'")
        if "seed" in parsed:
            c.check(int(parsed["seed"]) == int(attrs["seed"]),
                    "/meta@scenario seed differs from /meta@seed")
        if "name" in parsed:
            c.check(str(parsed["name"]) == text(attrs["scenario_name"]),
                    "/meta@scenario name differs from /meta@scenario_name")


def check_values(f, c):
    nodes, links, flows, qps = f["nodes"][:], f["links"][:], f["flows"][:], f["qps"][:]
    workloads, figures, tiers = f["workloads"][:], f["workload_figures"][:], f["tiers"][:]
    classes = f["link_classes"][:]
    path_links, offsets = f["paths/links"][:], f["paths/offsets"][:]
    latency = f["paths/latency_ps"][:]
    end_ps = int(f["meta"].attrs["end_ps"])

    # nodes
    c.check(len(nodes) > 0, "/nodes is empty")
    c.check(np.array_equal(nodes["id"], np.arange(len(nodes))), "/nodes ids are not 0..n-1")
    kinds = set(text(k) for k in nodes["kind"])
    c.check(kinds <= {"gpu", "nic", "switch"}, f"/nodes kinds {kinds}")
    gpus = int(np.count_nonzero(nodes["kind"] == b"gpu"))
    c.check(gpus > 0, "no GPU in /nodes")
    c.check(len(set(nodes["name"])) == len(nodes), "/nodes names are not unique")
    is_gpu = nodes["kind"] == b"gpu"
    c.check(np.all(nodes["server"][is_gpu] != NONE), "a GPU belongs to no server")

    # links and link classes
    c.check(len(links) > 0, "/links is empty")
    c.check(np.array_equal(links["id"], np.arange(len(links))), "/links ids are not 0..n-1")
    c.check(np.all(links["src"] < len(nodes)) and np.all(links["dst"] < len(nodes)),
            "a link end is not a node")
    c.check(np.all(links["src"] != links["dst"]), "a link loops on one node")
    c.check(np.all(links["link_class"] < len(classes)), "a link class index is out of range")
    c.check(len(set(classes)) == len(classes), "/link_classes are not unique")
    c.check(np.all(links["capacity_bps"] > 0), "a link capacity is not positive")
    c.check(np.all(links["latency_ps"] >= 0), "a link latency is negative")
    c.check(np.all(links["bytes"] >= 0), "a link carried negative bytes")
    u = links["utilization"]
    c.check(np.all(np.isfinite(u)) and np.all(u >= 0) and np.all(u <= 1 + TOLERANCE),
            f"link utilisation outside [0, 1]: min {u.min()}, max {u.max()}")
    if end_ps > 0:
        seconds = end_ps * 1e-12
        expected = links["bytes"] * 8.0 / (links["capacity_bps"].astype(np.float64) * seconds)
        c.check(np.allclose(u, expected, rtol=1e-9, atol=1e-12),
                "link utilisation is not bytes * 8 / (capacity * end of run)")

    # paths: CSR of link ids
    c.check(len(offsets) == len(latency) + 1, "/paths/offsets is not one longer than latency_ps")
    c.check(len(offsets) > 0 and offsets[0] == 0 and offsets[-1] == len(path_links),
            "/paths/offsets do not start at 0 and end at len(/paths/links)")
    c.check(np.all(np.diff(offsets.astype(np.int64)) > 0), "a path has no link")
    c.check(np.all(path_links < len(links)), "a path crosses a link that does not exist")
    c.check(np.all(latency >= 0), "a path latency is negative")
    if not c.failures and len(latency) > 0:
        # Consecutive links of one route meet at a node; a route runs from a GPU to a GPU. A
        # union (a pipeline's links, each once, with weights) is a set, not a chain.
        union = f["paths/union"][:]
        c.check(len(union) == len(latency), "/paths/union is not one per path")
        starts = np.zeros(len(path_links) + 1, dtype=bool)
        starts[offsets] = True
        in_union = np.repeat(union.astype(bool), np.diff(offsets.astype(np.int64)))
        # i such that links i and i+1 are consecutive links of one route
        inner = np.nonzero(~starts[1:-1] & ~in_union[:-1])[0]
        c.check(np.all(links["dst"][path_links[inner]] == links["src"][path_links[inner + 1]]),
                "a path is not a chain of links")
        route = ~union.astype(bool)
        first, last = path_links[offsets[:-1]][route], path_links[offsets[1:] - 1][route]
        c.check(np.all(nodes["kind"][links["src"][first]] == b"gpu") and
                np.all(nodes["kind"][links["dst"][last]] == b"gpu"),
                "a path does not run from a GPU to a GPU")
        w = f["paths/weights"][:]
        c.check(np.all(w[~in_union] == 1.0) and np.all(w[in_union] > 0),
                "a route's weights are not 1, or a union's not positive")

    # qps
    c.check(np.array_equal(qps["qp"], np.arange(len(qps))), "/qps ids are not 0..n-1")
    c.check(np.all(qps["src_rank"] < gpus) and np.all(qps["dst_rank"] < gpus),
            "a QP end is not a GPU rank")
    c.check(np.all(qps["src_rank"] != qps["dst_rank"]), "a QP connects a GPU to itself")
    # A QP that never carried data was never routed: its path is NONE.
    c.check(np.all((qps["path"] < len(latency)) | (qps["path"] == NONE)),
            "a QP path does not exist")
    roce = qps["dst_port"] != 0  # NVLink connections carry no RoCEv2 header
    c.check(np.all(qps["dst_port"][roce] == ROCEV2_PORT), "a RoCEv2 QP does not use UDP port 4791")
    c.check(np.all(qps["src_ip"][roce] >> 24 == 10) and np.all(qps["dst_ip"][roce] >> 24 == 10),
            "a QP address is outside 10.0.0.0/8")

    # flows
    if len(flows) > 0:
        c.check(len(np.unique(flows["id"])) == len(flows), "flow ids repeat")
        c.check(np.all(flows["workload"] < len(workloads)), "a flow's workload does not exist")
        c.check(np.all(flows["src_rank"] < gpus) and np.all(flows["dst_rank"] < gpus),
                "a flow end is not a GPU rank")
        c.check(np.all(flows["qp"] < len(qps)), "a flow's QP does not exist")
        c.check(np.all(flows["path"] < len(latency)), "a flow's path does not exist")
        c.check(np.all(flows["src_rank"] == qps["src_rank"][flows["qp"]]) and
                np.all(flows["dst_rank"] == qps["dst_rank"][flows["qp"]]),
                "a flow's ends differ from its QP's")
        c.check(np.all(flows["bytes"] > 0), "a flow carries no bytes")
        c.check(np.all(flows["start_ps"] >= 0), "a flow starts before time 0")
        c.check(np.all(flows["bandwidth_end_ps"] >= flows["start_ps"]),
                "a flow's last byte left before it started")
        c.check(np.all(flows["delivered_ps"] >= flows["bandwidth_end_ps"]),
                "a flow was delivered before its last byte left")
        c.check(np.all(flows["delivered_ps"] <= end_ps), "a flow was delivered after the run")
        # The last byte arrives one path latency after it left the sender, plus its queueing in
        # a model with queues (/congestion); exactly the latency without.
        wait = flows["delivered_ps"] - flows["bandwidth_end_ps"] - latency[flows["path"]]
        if "congestion" in f:
            c.check(bool(np.all(wait >= 0)), "delivery before the last byte plus the path latency")
        else:
            c.check(bool(np.all(wait == 0)), "delivery is not the last byte plus the path latency")
        fct = (flows["delivered_ps"] - flows["start_ps"]) * 1e-12
        c.check(np.allclose(flows["fct_s"], fct, rtol=1e-12, atol=1e-18),
                "fct_s is not (delivered_ps - start_ps) in seconds")

    # workloads and their figures
    c.check(len(workloads) > 0, "/workloads is empty")
    c.check(np.array_equal(workloads["id"], np.arange(len(workloads))),
            "/workloads ids are not 0..n-1")
    c.check(len(set(workloads["name"])) == len(workloads), "workload names are not unique")
    d = workloads["duration_s"]
    c.check(np.all(d > 0), f"a workload duration is not positive: {d}")
    c.check(np.all(workloads["end_ps"] > workloads["start_ps"]), "a workload ends before it starts")
    c.check(np.all(workloads["end_ps"] <= end_ps), "a workload ends after the run")
    c.check(np.allclose(d, (workloads["end_ps"] - workloads["start_ps"]) * 1e-12, rtol=1e-12),
            "duration_s is not end_ps - start_ps in seconds")
    c.check(np.all(workloads["bytes"] >= 0), "a workload moved negative bytes")
    c.check(np.allclose(workloads["throughput_gbps"], workloads["bytes"] * 8e-9 / d, rtol=1e-9),
            "throughput_gbps is not bytes * 8 / duration")
    moved = workloads["flows"] > 0
    c.check(np.all(workloads["mean_fct_s"][moved] > 0) and
            np.all(workloads["max_fct_s"] >= workloads["mean_fct_s"] * (1 - 1e-12)),
            "FCTs are not 0 < mean <= max")
    c.check(int(f["meta"].attrs["flows_total"]) == int(workloads["flows"].sum()),
            "/meta@flows_total is not the sum of the workloads' flows")
    truncated = int(f["meta"].attrs["flows_truncated"]) == 1
    c.check(truncated == (len(flows) < int(f["meta"].attrs["flows_total"])),
            "/meta@flows_truncated disagrees with the number of flow records")
    if not truncated:
        for w in range(len(workloads)):
            mine = flows[flows["workload"] == w]
            c.check(len(mine) == workloads["flows"][w] and
                    int(mine["bytes"].sum()) == workloads["bytes"][w],
                    f"workload {w}: its flow records do not add up to its flows and bytes")
            if len(mine) > 0:
                c.check(mine["start_ps"].min() >= workloads["start_ps"][w] and
                        mine["delivered_ps"].max() <= workloads["end_ps"][w],
                        f"workload {w}: a flow runs outside the workload's time")
        # Every flow's bytes land on each link of its path times the link's weight (1 on plain
        # paths; a pipeline spreads its bytes over many links).
        weights = f["paths/weights"][:]
        per_path = np.array([weights[offsets[p]:offsets[p + 1]].sum()
                             for p in range(len(offsets) - 1)])
        expected = float(np.dot(flows["bytes"].astype(np.float64), per_path[flows["path"]]))
        c.check(abs(int(links["bytes"].sum()) - expected) <= 0.5 * len(links) + 1e-9 * expected,
                "link bytes are not the flow bytes summed over their (weighted) paths")
    c.check(np.all(figures["workload"] < len(workloads)), "a figure's workload does not exist")
    c.check(np.all(np.isfinite(figures["value"])), "a workload figure is not finite")

    # tiers: one row per link class, consistent with /links
    c.check(len(tiers) == len(classes) and
            all(t == k for t, k in zip(tiers["link_class"], classes)),
            "/tiers rows are not the link classes in order")
    for i, t in enumerate(tiers):
        mine = links[links["link_class"] == i]
        c.check(t["links"] == len(mine), f"tier {text(t['link_class'])}: wrong link count")
        if len(mine) == 0:
            continue
        c.check(0 <= t["mean_utilization"] <= t["max_utilization"] * (1 + TOLERANCE) and
                t["max_utilization"] <= 1 + TOLERANCE,
                f"tier {text(t['link_class'])}: utilisation outside 0 <= mean <= max <= 1")
        c.check(np.isclose(t["max_utilization"], mine["utilization"].max(), rtol=1e-12),
                f"tier {text(t['link_class'])}: max_utilization is not the max over its links")
        c.check(t["max_qps"] == mine["qps"].max(), f"tier {text(t['link_class'])}: max_qps")
        c.check(t["mmr"] == 0 or t["mmr"] >= 1 - TOLERANCE,
                f"tier {text(t['link_class'])}: MMR {t['mmr']} is below 1")
        # The distribution, recomputed from /links (numpy's default quantile is the same
        # linear interpolation), and the MMR among the links QPs crossed.
        for q in (50, 90, 99):
            c.check(np.isclose(t[f"p{q}_utilization"], np.quantile(mine["utilization"], q / 100),
                               rtol=1e-9, atol=1e-15),
                    f"tier {text(t['link_class'])}: p{q}_utilization")
        busy = mine["qps"][mine["qps"] > 0]
        c.check(t["busy_links"] == len(busy), f"tier {text(t['link_class'])}: busy_links")
        c.check(np.isclose(t["busy_mmr"], busy.max() / busy.mean() if len(busy) else 0,
                           rtol=1e-9),
                f"tier {text(t['link_class'])}: busy_mmr")
        c.check(t["busy_mmr"] <= t["mmr"] * (1 + TOLERANCE),
                f"tier {text(t['link_class'])}: busy MMR above the MMR of all links")


def check_tables(f, c):
    """The column tables under /tables: one 1-D dataset per column, all of one length, in the
    order of the group's `columns` attribute, each with a `unit`; nccl-tests rows obey
    algbw = size / time."""
    if "tables" not in f:
        return
    for name, g in f["tables"].items():
        columns = text(g.attrs.get("columns", b"")).split(",")
        c.check("description" in g.attrs, f"/tables/{name} has no description")
        c.check(sorted(columns) == sorted(g.keys()),
                f"/tables/{name}: columns attribute {columns} != datasets {sorted(g.keys())}")
        lengths = {len(g[k]) for k in g.keys()}
        c.check(len(lengths) <= 1, f"/tables/{name}: columns of different lengths {lengths}")
        for k in g.keys():
            c.check(g[k].ndim == 1, f"/tables/{name}/{k} is not 1-D")
            c.check("unit" in g[k].attrs, f"/tables/{name}/{k} has no unit")
        if name == "nccl_tests":
            for half in ("out_of_place", "in_place"):
                t = g[f"time_us_{half}"][:]
                size = g["size_bytes"][:].astype(float)
                c.check(bool(np.all(t > 0)), f"/tables/{name}: a time is not positive")
                c.check(np.allclose(g[f"algbw_{half}"][:], size / t * 1e-3, rtol=1e-9),
                        f"/tables/{name}: algbw_{half} != size / time")


def check_congestion(f, c):
    """/congestion (a network model with queues): one tier row per link class that sums its
    links' rows; series rows grouped by id, in time order, within the run, never negative."""
    if "congestion" not in f:
        return
    g = f["congestion"]
    classes = f["link_classes"][:]
    links, tiers = g["links"][:], g["tiers"][:]
    all_links = f["links"][:]
    c.check(len(links) == len(all_links), "/congestion/links: not one row per link")
    c.check(bool(np.all(links["link"] == np.arange(len(links)))),
            "/congestion/links: rows not in link order")
    c.check(len(tiers) == len(classes) and
            all(t == k for t, k in zip(tiers["link_class"], classes)),
            "/congestion/tiers rows are not the link classes in order")
    end_s = f["meta"].attrs["end_ps"] * 1e-12
    for i, t in enumerate(tiers):
        mine = links[all_links["link_class"] == i]
        c.check(t["pauses"] == mine["pauses"].sum(), f"congestion tier {i}: pauses")
        c.check(len(mine) == 0 or t["max_queue_bytes"] == mine["max_queue_bytes"].max(),
                f"congestion tier {i}: max queue")
        c.check(0 <= t["paused_fraction"] <= 1 + TOLERANCE, f"congestion tier {i}: fraction")
        c.check(np.isclose(t["ecn_marks"], mine["ecn_marks"].sum(), rtol=1e-9),
                f"congestion tier {i}: ECN marks")
    c.check(bool(np.all(links["paused_s"] <= end_s * (1 + TOLERANCE) + 1e-12)),
            "/congestion/links: paused longer than the run")
    for name, bound in (("queue_series", len(all_links)), ("rate_series", None)):
        rows = g[name][:]
        c.check(bool(np.all(rows["value"] >= 0)), f"/congestion/{name}: negative value")
        c.check(bool(np.all(rows["t_ps"] <= f["meta"].attrs["end_ps"])),
                f"/congestion/{name}: sample after the end of the run")
        if bound is not None:
            c.check(bool(np.all(rows["id"] < bound)), f"/congestion/{name}: unknown link")
        for i in np.unique(rows["id"]):
            t = rows["t_ps"][rows["id"] == i]
            c.check(bool(np.all(np.diff(t) > 0)), f"/congestion/{name}: id {i} not in time order")
            c.check(len(t) <= 512, f"/congestion/{name}: id {i} has more than 512 samples")


def check_link_events(f, c):
    """/link_events (a scenario with events:): times in order of cause and effect, counts within
    what the run had."""
    if "link_events" not in f:
        return
    ev = f["link_events"][:]
    end = f["meta"].attrs["end_ps"]
    c.check(bool(np.all(ev["id"] == np.arange(len(ev)))), "/link_events: ids are not the rows")
    c.check(bool(np.all(ev["links"] >= 1)), "/link_events: an event without links")
    applied = ev["applied"] == 1
    c.check(bool(np.all(ev["at_ps"][applied] <= end)), "/link_events: applied after the end")
    conv = ev["converged_ps"] >= 0
    c.check(bool(np.all(ev["converged_ps"][conv] >= ev["at_ps"][conv])),
            "/link_events: converged before it happened")
    c.check(bool(np.all(applied[conv])), "/link_events: converged but never applied")
    qps = len(f["qps"])
    c.check(bool(np.all(ev["qps_rerouted"] + ev["qps_unroutable"] <= qps)),
            "/link_events: more QPs moved than there are")
    c.check(bool(np.all((ev["qps_rerouted"] > 0) | (ev["flows_rerouted"] == 0))),
            "/link_events: flows moved without a QP moving")


def check_differs(f, other_path, c):
    with h5py.File(other_path, "r") as g:
        c.check(not np.array_equal(f["qps"][:], g["qps"][:]),
                f"/qps is the same as in {other_path}")
        c.check(not np.array_equal(f["flows"][:], g["flows"][:]),
                f"/flows is the same as in {other_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--differs-from", metavar="OTHER")
    ap.add_argument("--tables-only", action="store_true")
    args = ap.parse_args()
    c = Checker()
    with h5py.File(args.results, "r") as f:
        check_tables(f, c)
        check_congestion(f, c)
        check_link_events(f, c)
        if args.tables_only:
            c.check("tables" in f, "no /tables")
        elif check_structure(f, c):
            check_meta(f, c)
            check_values(f, c)
            if args.differs_from:
                check_differs(f, args.differs_from, c)
    for message in c.failures:
        print(f"{args.results}: {message}", file=sys.stderr)
    if not c.failures:
        print(f"{args.results}: ok")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())

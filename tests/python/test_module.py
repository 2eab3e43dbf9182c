#!/usr/bin/env python3
"""The rocesim Python package against the command line (run by ctest, label e2e).

Environment: PYTHONPATH holds the built module; ROCESIM_CLI the rocesim executable;
ROCESIM_SOURCE_DIR the source tree. Exits 1 with the failures, 0 with "ok".
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import rocesim

SRC = os.environ["ROCESIM_SOURCE_DIR"]
CLI = os.environ["ROCESIM_CLI"]
SCENARIO = os.path.join(SRC, "scenarios", "quickstart.yaml")
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


with tempfile.TemporaryDirectory() as tmp:
    # The same scenario, values and seed in process and on the command line: the same results.
    values = {"workloads[allreduce].bytes": "16MiB", "routing.scheme": "e-ecmp"}
    run = rocesim.run(SCENARIO, set=values, seed=2)
    cli_h5 = os.path.join(tmp, "cli.h5")
    subprocess.run([CLI, "run", SCENARIO, "--seed", "2", "-q", "-o", cli_h5] +
                   [a for k, v in values.items() for a in ("--set", f"{k}={v}")], check=True)
    mod_h5 = os.path.join(tmp, "module.h5")
    run.write(mod_h5)
    with h5py.File(cli_h5) as a, h5py.File(mod_h5) as b:
        for name in ("workloads", "tiers", "links", "flows", "qps"):
            check(np.array_equal(a[name][:], b[name][:]), f"/{name} differs from the CLI's")
        check(a["meta"].attrs["end_ps"] == b["meta"].attrs["end_ps"], "end differs")
        rows = a["workloads"][:]
    workloads = run.workloads  # a DataFrame
    check(list(workloads["name"]) == [r["name"].decode() for r in rows], "workload names")
    for (_, w), r in zip(workloads.iterrows(), rows):
        check(w["completion_s"] == (r["end_ps"] - r["start_ps"]) * 1e-12,
              f"{w['name']}: completion_s is not the CLI's")
    check(run.seed == 2 and run.name == "quickstart", "name or seed")
    check(len(run.tiers) == 8 and run.tiers["link_class"].iloc[-1] == "spine->leaf", "tiers")
    check("scenario quickstart  (seed 2)" in run.summary, "summary")
    check(run.link_events.empty, "link events of a scenario without events")
    check(run.metrics["end_s"] == run.end_s, "metrics' end_s")

    # The readers: the CLI's results.h5 as DataFrames, the same values as the module's.
    tables = rocesim.read_results(cli_h5)
    check(list(tables["workloads"]["name"]) == list(workloads["name"]), "read_results workloads")
    check(len(tables["flows"]) > 0 and "bytes" in tables["flows"].columns, "read_results flows")
    check(tables["meta"]["seed"] == 2, f"read_results meta {tables['meta'].get('seed')!r}")

    # A scenario as a dict (relative paths from base_dir): the same run as its file.
    quickstart = {  # scenarios/quickstart.yaml as Python data
        "name": "quickstart", "seed": 1, "topology": "../topologies/ai-zone-128.yaml",
        "routing": {"scheme": "ecmp", "hash": "crc32"}, "network": {"model": "maxmin"},
        "workloads": [
            {"name": "allreduce", "type": "ring_allreduce", "ranks": "all", "bytes": "256MiB"},
            {"name": "permutation", "type": "permutation", "ranks": "all", "bytes": "64MiB",
             "qps_per_connection": 4, "after": ["allreduce"]}]}
    as_dict = rocesim.run(quickstart, base_dir=os.path.join(SRC, "scenarios"), set=values, seed=2)
    check(as_dict.metrics == run.metrics, "a dict scenario runs differently from its file")

    # Loaded but not run: results are refused, not empty.
    loaded = rocesim.load(SCENARIO)
    check(not loaded.ran, "load runs")
    try:
        loaded.workloads
        check(False, "results of a run that has not run")
    except ValueError:
        pass

    # Congestion figures of the fluid model: the same in process and in the CLI's results.h5,
    # and among the metrics (a sweep's columns); zeros where nothing congests; none with max-min.
    incast = os.path.join(SRC, "scenarios", "fluid_tcp_incast.yaml")
    fluid = rocesim.run(incast)
    fluid_h5 = os.path.join(tmp, "fluid.h5")
    subprocess.run([CLI, "run", incast, "-q", "-o", fluid_h5], check=True)
    mine, theirs = fluid.congestion, rocesim.read_results(fluid_h5)
    check(list(mine["link_class"]) == list(theirs["congestion_tiers"]["link_class"]),
          "congestion tiers differ from /congestion/tiers")
    for col in ("links", "paused_fraction", "pauses", "max_queue_bytes", "ecn_marks", "drop_bytes"):
        check(np.array_equal(mine[col].to_numpy(dtype=float),
                             theirs["congestion_tiers"][col].to_numpy(dtype=float)),
              f"congestion {col} differs from the CLI's")
    port = mine.set_index("link_class").loc["leaf->nic"]
    check(port["drop_bytes"] > 0 and port["max_queue_bytes"] > 0,
          f"the TCP incast neither queues nor drops at the receiver's port: {dict(port)}")
    check(fluid.metrics["leaf->nic.drop_bytes"] == port["drop_bytes"] and
          fluid.metrics["nic->leaf.pauses"] == mine.set_index("link_class").loc["nic->leaf",
                                                                                  "pauses"],
          "congestion metrics differ from the congestion table")
    check(fluid.metrics["cnps"] == theirs["congestion"]["cnps"], "cnps differ from the CLI's")
    check(len(theirs["congestion_links"]) == len(theirs["links"]) and
          len(theirs["congestion_queue_series"]) > 0, "read_results' congestion tables")
    calm = rocesim.run({"name": "calm", "network": {"model": "fluid"},
                        "topology": {"type": "clos", "racks": 1, "nodes_per_rack": 2,
                                     "node": {"gpus": 1, "nic_speed": "400Gbps"},
                                     "leaf": {"uplinks": 1}, "spine": {"count": 1}},
                        "workloads": [{"name": "one", "type": "flows",
                                       "flows": [{"src": 0, "dst": 1, "bytes": "1MiB"}]}]})
    check(len(calm.congestion) == len(mine) and calm.congestion["pauses"].sum() == 0 and
          calm.congestion["drop_bytes"].sum() == 0 and calm.metrics["leaf->nic.pauses"] == 0,
          "a fluid run without congestion has no zero figures")
    check(run.congestion.empty and "cnps" not in run.metrics, "congestion figures of max-min")

    # A study in process: the same table as `rocesim sweep` writes, at 1 and 2 workers.
    study = os.path.join(SRC, "studies", "routing_schemes.yaml")
    sweep_h5 = os.path.join(tmp, "sweep.h5")
    subprocess.run([CLI, "sweep", study, "-q", "--points", "0-5", "-o", sweep_h5], check=True)
    cli_points = rocesim.read_sweep(sweep_h5)
    for workers in (1, 2):
        mine = rocesim.sweep(study, workers=workers).iloc[:6]
        check(list(mine.columns) == list(cli_points.columns),
              f"sweep columns differ from sweep.h5's: {list(mine.columns)[:6]}")
        check(mine.reset_index(drop=True).equals(cli_points.reset_index(drop=True)),
              f"sweep at {workers} workers differs from sweep.h5's points")
    grid = rocesim.sweep(scenario=SCENARIO, grid={"routing.scheme": ["ecmp", "e-ecmp"]},
                         replicates=2)
    check(list(grid["routing.scheme"]) == ["ecmp", "ecmp", "e-ecmp", "e-ecmp"] and
          list(grid["seed"]) == [1, 2, 1, 2], "a keyword study's points")

# The scaling factor of DOMAIN.md: per-GPU throughput of the larger run over the smaller's.
training = os.path.join(SRC, "scenarios", "training_zero_440m.yaml")
small = rocesim.run(training, set={"workloads[zero1].ranks": "0-7",
                                   "workloads[zero1].deepspeed.gradient_accumulation_steps": 16})
large = rocesim.run(training)
tpg = [float(r.workloads["samples_per_s_per_gpu"].iloc[0]) for r in (small, large)]
factor = rocesim.scaling_factor(small, large)
check(abs(factor - tpg[1] / tpg[0]) < 1e-12, f"scaling factor {factor}, per GPU {tpg}")
check(0.5 < factor <= 1.0, f"scaling factor {factor} from 8 to 16 GPUs")

# A bad value is a rocesim.InputError (a ValueError) that says where and which key.
try:
    rocesim.run(SCENARIO, set={"routing.scheme": "bogus"})
    check(False, "no InputError for a bad scheme")
except rocesim.InputError as e:
    check(isinstance(e, ValueError), "InputError is not a ValueError")
    check(e.key == "routing.scheme", f"key {e.key!r}")
    check("expected one of 'ecmp'" in str(e), f"message {e}")
bad = os.path.join(SRC, "tests", "python", "no-such-scenario.yaml")
try:
    rocesim.run(bad)
    check(False, "no InputError for a missing file")
except rocesim.InputError as e:
    check(e.file == bad, f"file {e.file!r}")

for m in failures:
    print(f"test_module: {m}", file=sys.stderr)
print("ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)

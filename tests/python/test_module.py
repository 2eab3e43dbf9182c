#!/usr/bin/env python3
"""The rocesim Python module against the command line (run by ctest, label e2e).

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
    check([w["name"] for w in run.workloads] == [r["name"].decode() for r in rows],
          "workload names")
    for w, r in zip(run.workloads, rows):
        check(w["completion_s"] == (r["end_ps"] - r["start_ps"]) * 1e-12,
              f"{w['name']}: completion_s is not the CLI's")
    check(run.seed == 2 and run.name == "quickstart", "name or seed")
    check(len(run.tiers) == 8 and run.tiers[-1]["link_class"] == "spine->leaf", "tiers")
    check("scenario quickstart  (seed 2)" in run.summary, "summary")
    check(run.link_events == [], "link events of a scenario without events")

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

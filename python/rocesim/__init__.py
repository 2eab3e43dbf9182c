"""rocesim from Python: load and run scenarios and studies in process, results as pandas
DataFrames, and readers of the files rocesim writes.

    import rocesim
    r = rocesim.run("scenarios/quickstart.yaml", set={"routing.scheme": "e-ecmp"}, seed=2)
    r.workloads                 # DataFrame, one row per workload (times in s, figures)
    r.tiers, r.link_events      # DataFrames; r.metrics: dict; r.summary: text
    r.congestion                # per link class: PFC pauses, queues, ECN marks, drops (fluid)
    r.write("results.h5")       # what `rocesim run` writes

    points = rocesim.sweep("studies/routing_schemes.yaml", workers=2)   # DataFrame of points
    points = rocesim.sweep(scenario="scenarios/quickstart.yaml",
                           grid={"routing.scheme": ["ecmp", "e-ecmp"]}, replicates=3)

    rocesim.read_results("results.h5")["workloads"]     # any results.h5 as DataFrames
    rocesim.read_validation("val/validation.h5")        # rocesim validate's rows
    rocesim.read_sweep("sweep.h5")                      # rocesim sweep's points

A scenario or a study may be a path or a dict (the file's content as Python data; relative
paths in it start at `base_dir`, by default the current directory). A bad value raises
rocesim.InputError (a ValueError) with .file, .line, .column and .key. docs/studies.md.
"""
import builtins
import json
import os

import h5py
import numpy as np
import pandas as pd

from . import _rocesim as _native
from ._rocesim import InputError, __version__, schema

__all__ = ["InputError", "Run", "load", "run", "sweep", "read_results", "read_validation",
           "read_sweep", "scaling_factor", "schema", "__version__"]


class Run:
    """A scenario loaded (checked and built) and, after run(), simulated."""

    def __init__(self, native):
        self._native = native

    def run(self):
        """Simulates (once; other Python threads go on meanwhile) and returns self."""
        self._native.run()
        return self

    @property
    def ran(self):
        return self._native.ran

    @property
    def name(self):
        return self._native.name

    @property
    def seed(self):
        return self._native.seed

    @property
    def scenario(self):
        """The effective scenario (YAML text), every default filled in."""
        return self._native.scenario

    @property
    def end_s(self):
        """Simulated end of the run, s."""
        return self._native.end_s

    @property
    def metrics(self):
        """The run's figures by name, as a sweep's points table has them (docs/studies.md)."""
        return self._native.metrics

    @property
    def workloads(self):
        """One row per workload: name, type, start_s, completion_s, flows, bytes,
        throughput_gbps, mean_fct_s, max_fct_s and the workload's figures and notes."""
        return pd.DataFrame(self._native.workloads)

    @property
    def tiers(self):
        """One row per link class, as /tiers of results.h5."""
        return pd.DataFrame(self._native.tiers)

    @property
    def congestion(self):
        """One row per link class, as /congestion/tiers of results.h5: paused_fraction, pauses,
        max_queue_bytes, ecn_marks, drop_bytes (a model with queues: `network.model: fluid`);
        empty for max-min. The CNPs received by all senders are metrics["cnps"]."""
        return pd.DataFrame(self._native.congestion,
                            columns=["link_class", "links", "paused_fraction", "pauses",
                                     "max_queue_bytes", "ecn_marks", "drop_bytes"])

    @property
    def link_events(self):
        """One row per link event (empty without `events:`)."""
        return pd.DataFrame(self._native.link_events,
                            columns=["what", "at_s", "applied", "converged_s", "qps_rerouted",
                                     "flows_rerouted", "qps_unroutable"])

    @property
    def summary(self):
        """The summary `rocesim run` prints."""
        return self._native.summary

    def write(self, path):
        """Writes results.h5 (docs/output.md), as `rocesim run -o path` does."""
        self._native.write(os.fspath(path))

    def __repr__(self):
        state = f"ran to {self.end_s:.6g} s" if self.ran else "not run"
        return f"<rocesim.Run {self.name!r} seed {self.seed}, {state}>"


def scaling_factor(smaller, larger, workload=None):
    """DOMAIN.md's scaling factor tpg_M / tpg_m of two training runs: the throughput per GPU
    (samples/s per GPU) of the larger configuration over that of the smaller. Each argument is a
    Run; `workload` names the training workload (default: the first)."""
    def per_gpu(r):
        w = r.workloads
        rows = w[w["type"] == "training"] if workload is None else w[w["name"] == workload]
        if rows.empty or "samples_per_s_per_gpu" not in rows:
            raise ValueError("no training workload with a step time in the run")
        return float(rows["samples_per_s_per_gpu"].iloc[0])
    return per_gpu(larger) / per_gpu(smaller)


def _base_dir(base_dir):
    return os.fspath(base_dir) if base_dir is not None else os.getcwd()


def _values(set):
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in (set or {}).items()}


def load(scenario, set=None, seed=None, threads=1, base_dir=None):
    """Loads a scenario without running it: a path, or a dict with a scenario file's content.

    `set`: values over the scenario, keyed by path as `--set` takes them
    ({"workloads[allreduce].bytes": "16MiB"}); `seed` replaces the scenario's; `threads` are
    the engine's threads for this run."""
    if isinstance(scenario, dict):
        native = _native.load_text(json.dumps(scenario), scenario.get("name", "<dict>"),
                                   _base_dir(base_dir), _values(set), seed, threads)
    else:
        native = _native.load(os.fspath(scenario), _values(set), seed, threads)
    return Run(native)


def run(scenario, set=None, seed=None, threads=1, base_dir=None):
    """Loads and runs a scenario (see load); returns the Run."""
    return load(scenario, set=set, seed=seed, threads=threads, base_dir=base_dir).run()


def _study(study, scenario, grid, zip, points, set, seeds, replicates, name, base_dir):
    if study is not None and not isinstance(study, dict):
        if any(v is not None for v in (scenario, grid, zip, points, set, seeds, replicates)):
            raise TypeError("a study file already says scenario, axes, values and seeds")
        return _native.study(os.fspath(study))
    text = dict(study or {})
    for key, value in (("scenario", scenario), ("grid", grid), ("zip", zip), ("points", points),
                       ("set", set), ("seeds", seeds), ("replicates", replicates)):
        if value is not None:
            text[key] = value
    if "scenario" in text:
        text["scenario"] = os.fspath(text["scenario"])
    text.setdefault("name", name or "study")
    return _native.study_text(json.dumps(text), text["name"], _base_dir(base_dir))


def sweep(study=None, *, scenario=None, grid=None, zip=None, points=None, set=None, seeds=None,
          replicates=None, workers=1, name=None, base_dir=None, keep_runs=False):
    """Runs every point of a study and returns its points table as a DataFrame.

    `study`: a study file's path, or a dict with its content; or give its keys as keyword
    arguments (`scenario`, `grid`, `zip`, `points`, `set`, `seeds`, `replicates`; docs/studies.md).
    Columns: point, seed, one per axis (the value as written), then every metric of
    Run.metrics (NaN where a point lacks it), as /points of `rocesim sweep`'s sweep.h5. Points
    run on `workers` threads, each point on one thread, so the table is the same at any count.
    With keep_runs=True, returns (table, runs), the Run of every point in point order."""
    s = _study(study, scenario, grid, zip, points, set, seeds, replicates, name, base_dir)
    listed = s.points
    rows, runs = [], []
    batch = max(1, int(workers)) * 4
    for first in range(0, len(listed), batch):
        chunk = listed[first:first + batch]
        for p, native in builtins.zip(chunk, s.run([p["point"] for p in chunk], int(workers))):
            row = {"point": p["point"], "seed": native.seed}
            row.update({axis: value for axis, value in builtins.zip(s.axes, p["values"])})
            row.update(native.metrics)
            rows.append(row)
            if keep_runs:
                runs.append(Run(native))
    table = pd.DataFrame(rows)
    if not rows:
        table = pd.DataFrame(columns=["point", "seed"] + list(s.axes))
    table.attrs["study"] = s.name
    table.attrs["scenario"] = s.scenario
    return (table, runs) if keep_runs else table



def _frame(data):
    """A DataFrame of an HDF5 compound dataset or a group of column datasets, text decoded."""
    if isinstance(data, h5py.Group):
        order = data.attrs.get("columns", b"")
        order = (order.decode() if isinstance(order, bytes) else str(order)).split(",")
        names = [k for k in order if k in data] + sorted(k for k in data.keys() if k not in order)
        columns = {k: data[k][:] for k in names}
    else:
        array = data[:]
        if array.dtype.names is None:
            return pd.DataFrame({data.name.rsplit("/", 1)[-1]: array})
        columns = {k: array[k] for k in array.dtype.names}
    out = {}
    for key, values in columns.items():
        if values.dtype.kind in "SO":
            values = np.array([v.decode() if isinstance(v, bytes) else v for v in values],
                              dtype=object)
        out[key] = values
    return pd.DataFrame(out)


def _attrs(obj):
    return {k: (v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v)
            for k, v in obj.attrs.items()}


def read_results(path):
    """Every table of a file rocesim wrote (results.h5, validation.h5, nccl-tests output) as a
    dict of DataFrames: the top-level tables (workloads, tiers, flows, links, qps, nodes,
    link_events, ...), each /tables/<name> under its name, and the tables of /congestion
    prefixed "congestion_" (congestion_tiers, congestion_links, congestion_queue_series,
    congestion_rate_series; its attributes, the CNPs, under "congestion"); "meta" holds
    /meta's attributes as a dict (docs/output.md)."""
    out = {}
    with h5py.File(os.fspath(path), "r") as f:
        for key, obj in f.items():
            if key == "meta":
                out["meta"] = _attrs(obj)
            elif key == "tables":
                for name, group in obj.items():
                    out[name] = _frame(group)
            elif key == "congestion":
                out["congestion"] = _attrs(obj)
                for name, table in obj.items():
                    out["congestion_" + name] = _frame(table)
            elif isinstance(obj, h5py.Dataset) and obj.dtype.names is not None:
                out[key] = _frame(obj)
    return out


def read_validation(path, bands=False):
    """`rocesim validate`'s rows (validation.h5): one per measured size, simulated and
    measured times and bus bandwidths, errors, and what NCCL ran (docs/validation.md); with
    bands=True its summary per table and size band instead."""
    return read_results(path)["validation_bands" if bands else "validation"]


def read_sweep(path):
    """`rocesim sweep`'s points table (sweep.h5 /points): point, seed, axes, metrics."""
    with h5py.File(os.fspath(path), "r") as f:
        table = _frame(f["points"])
        table.attrs.update(_attrs(f["meta"]))
    return table

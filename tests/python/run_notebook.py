#!/usr/bin/env python3
"""Executes a notebook of notebooks/ headless, as `make test` does (ctest, label e2e).

    run_notebook.py NOTEBOOK

The notebook runs in its own directory with Debian's python3 kernel (ipykernel); any cell
that raises (its assertions included) fails the test with the cell's error. A committed
notebook must hold no outputs (they would go stale): that fails too. Environment:
ROCESIM_BUILD (the build directory whose rocesim and python/ the notebook uses).
"""
import os
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

path = os.path.abspath(sys.argv[1])
nb = nbformat.read(path, as_version=4)
stale = [i for i, c in enumerate(nb.cells)
         if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
if stale:
    print(f"{path}: cells {stale} hold outputs; clear them before committing "
          "(jupyter nbconvert --clear-output --inplace)", file=sys.stderr)
    sys.exit(1)
# The kernel's start-up gets 300 s instead of nbclient's 60: under a full parallel test run on
# two cores, a kernel once took longer than 60 s to answer and the notebook failed unrun.
client = NotebookClient(nb, timeout=600, startup_timeout=300, kernel_name="python3",
                        resources={"metadata": {"path": os.path.dirname(path)}})
try:
    client.execute()
except CellExecutionError as e:
    print(f"{path}: {e}", file=sys.stderr)
    sys.exit(1)
print(f"{os.path.basename(path)}: {len(nb.cells)} cells ran")

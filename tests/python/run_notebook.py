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
import tempfile

import nbformat
from jupyter_client.manager import KernelManager
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
# The kernel talks over Unix sockets in a directory of its own, not TCP ports: the client picks
# free ports, closes them and lets the kernel bind them, so two notebooks started together could
# both pick a port and one kernel died with "Address already in use" (seen once in CI).
with tempfile.TemporaryDirectory(prefix="rocesim-nb-") as sockets:
    km = KernelManager(kernel_name="python3", transport="ipc",
                       ip=os.path.join(sockets, "kernel"))
    client = NotebookClient(nb, km=km, timeout=600, startup_timeout=300,
                            resources={"metadata": {"path": os.path.dirname(path)}})
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"{path}: {e}", file=sys.stderr)
        sys.exit(1)
print(f"{os.path.basename(path)}: {len(nb.cells)} cells ran")

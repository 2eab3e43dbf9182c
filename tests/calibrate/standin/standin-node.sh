#!/bin/sh
# Runs one rank of an MPI job as if on a node of the stand-in cluster (README.md here):
#
#   mpirun -np 4 standin-node.sh 2 rocesim-bench-standin ARGS...
#
# puts ranks 0-1 on virtual node 0 and ranks 2-3 on node 1 (GPUS_PER_NODE = 2 ranks per node,
# in rank order, as mpirun's default by-slot mapping fills real nodes). It sets
# ROCESIM_STANDIN_NODE for the stand-in CUDA runtime (the node's GPU count and PCI bus ids) and,
# where the process may create a UTS namespace (root, or user namespaces), gives it the host name
# standin-node<k>, so that the bench records one host per virtual node as on a real cluster.
# Elsewhere every rank keeps the machine's host name.
set -eu
per_node=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
node=$((rank / per_node))
export ROCESIM_STANDIN_NODE=$node
if unshare --uts true 2>/dev/null; then
  exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "standin-node$node" "$@"
fi
exec "$@"

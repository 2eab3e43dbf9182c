#!/usr/bin/env python3
"""Writes the peer simulators' reference scenarios as rocesim scenarios.

The reference scenarios (leaf-spine LS(N), permutation / ring step / incast / all-to-all, with
ECMP spines chosen by a SplitMix64 hash) are defined in the peers' README; this script
regenerates the same flows and pins each cross-leaf flow to the same spine with `via`, so that
rocesim and the peers simulate exactly the same flow set.

  reference.py perm 16384 OUTDIR [--bw-gbps 400] [--bytes N] [--seed 1] [--tcp]

writes OUTDIR/<scenario>_N<n>.yaml (topology inline, flows in a CSV beside it). Standard library
only.
"""
import argparse
import os

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def shape(n):
    """(hosts per leaf H, spines S) of LS(n)."""
    if n >= 64:
        return 16, 16
    return n // 4, n // 4


def flows(scenario, n, nbytes, seed):
    rng = SplitMix64(seed)
    if scenario == "perm":
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = rng.next() % i
            p[i], p[j] = p[j], p[i]
        return [(i, p[i], nbytes) for i in range(n)]
    if scenario == "ring":
        return [(i, (i + 1) % n, nbytes) for i in range(n)]
    if scenario == "incast":
        q = list(range(n))
        for i in range(n - 1, 0, -1):
            j = rng.next() % (i + 1)
            q[i], q[j] = q[j], q[i]
        out = []
        for g in range(n // 17):
            for s in range(1, 17):
                out.append((q[17 * g + s], q[17 * g], nbytes))
        return out
    if scenario == "a2a":
        return [(s, d, nbytes) for s in range(n) for d in range(n) if s != d]
    raise SystemExit(f"unknown scenario {scenario}")


DEFAULT_BYTES = {"perm": 16 << 20, "ring": 16 << 20, "incast": 1 << 20, "a2a": 256 << 10}


# The TCP of the peers' ns-3 harness (peers README, section 4): NewReno, MSS 4096 B, initial
# window 10, 4 MiB socket buffers, MinRto 1 ms, DropTail queues of 1000 packets of up to 4200 B
# per port; run by rocesim's fluid model with `transport: tcp`.
NS3_TCP = """network:
  model: fluid
  lossy_limit: 4200000B
  tcp: {congestion_control: newreno, mss: 4096B, initial_window: 10, max_window: 4MiB, min_rto: 1ms}
"""


def write(scenario, n, outdir, bw_gbps=400, nbytes=None, seed=1, max_flows=None, tcp=False):
    nbytes = nbytes or DEFAULT_BYTES[scenario]
    h, s = shape(n)
    os.makedirs(outdir, exist_ok=True)
    stem = f"{scenario}_N{n}" + ("_tcp" if tcp else "")
    csv_path = os.path.join(outdir, stem + ".csv")
    with open(csv_path, "w") as f:
        f.write("src,dst,bytes,via\n")
        for src, dst, b in flows(scenario, n, nbytes, seed):
            if src // h == dst // h:
                f.write(f"{src},{dst},{b},\n")
            else:
                spine = SplitMix64((src << 32) | dst).next() % s
                f.write(f"{src},{dst},{b},spine{spine}\n")
    yaml_path = os.path.join(outdir, stem + ".yaml")
    # The peers' links carry bw_gbps of data; rocesim's carry what RoCEv2 framing leaves of their
    # line rate (4096 of every 4178 bytes at the default MTU), so the line rate that carries
    # exactly bw_gbps is written.
    line_bps = round(bw_gbps * 1e9 * 4178 / 4096)
    with open(yaml_path, "w") as f:
        f.write(f"""# Reference scenario '{scenario}' at N = {n} (peers README): leaf-spine with
# {h} hosts per leaf and {s} spines, {bw_gbps} Gb/s of payload and 1 us on every link, no switch
# latency;
# every cross-leaf flow pinned to the spine of the reference SplitMix64 hash.
name: {stem}
seed: {seed}
topology:
  type: clos
  racks: {n // h}
  nodes_per_rack: {h}
  node: {{gpus: 1, nic_speed: {line_bps}bps, pcie_bandwidth: {bw_gbps}Gbps, pcie_latency: 0ns}}
  leaf: {{uplinks: {s}, uplink_speed: {line_bps}bps, latency: 0ns}}
  spine: {{count: {s}, latency: 0ns}}
  nic_link_latency: 1us
  link_latency: 1us
{NS3_TCP if tcp else ""}workloads:
  - name: {scenario}
    type: flows
    file: {stem}.csv
    transport: {"tcp" if tcp else "rdma"}
output:
  max_flows: {max_flows if max_flows is not None else 100000000}
""")
    return yaml_path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["perm", "ring", "incast", "a2a"])
    ap.add_argument("n", type=int)
    ap.add_argument("outdir")
    ap.add_argument("--bw-gbps", type=int, default=400)
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tcp", action="store_true",
                    help="TCP in the fluid model, with the settings of the peers' ns-3 harness")
    a = ap.parse_args()
    print(write(a.scenario, a.n, a.outdir, a.bw_gbps, a.bytes, a.seed, tcp=a.tcp))


if __name__ == "__main__":
    main()

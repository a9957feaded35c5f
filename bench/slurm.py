#!/usr/bin/env python3
"""What a Slurm cluster on AWS PCS costs forge: stacks/nemo-slurm-p5.toml (a VPC with a NAT
gateway, FSx for Lustre, the PCS cluster, a login node group, a p5 node group and its queue) on
the local emulators — `up`, a no-op `plan`, `drift` and `destroy` — with wall time, the calls
made (PCS's by operation) and the time the waits alone take on the critical path.

Every CREATING/DELETING phase lasts --phase-seconds. `up`'s critical path is four phases deep:
the PCS cluster (CREATING), then the node groups (CREATING, in parallel), then the queue
(CREATING) — the VPC's NAT gateway and FSx are waited for beside it. `destroy` is three deep
the other way round (queue, node groups, cluster), the file system and the NAT gateway beside
it. So wall time / (depth × phase) is forge's overhead over what PCS itself makes anyone wait.

Usage: bench/slurm.py [--phase-seconds 1] [--out bench/slurm-results.md]
"""

import argparse
import collections
import os
import subprocess
import time

from emulator import ROOT, aws_env, calls, emit, running

ACCOUNT = "141421356237"
UP_DEPTH, DESTROY_DEPTH = 3, 3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=1.0)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(args.phase_seconds, "slurm") as (forge, url, work):
        env = aws_env(url, ACCOUNT)
        with open(os.path.join(ROOT, "stacks/nemo-slurm-p5.toml")) as source, open(os.path.join(work, "slurm.toml"), "w") as stack:
            stack.write(source.read())
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: moto with forge's PCS, phases of "
                 f"{args.phase_seconds} s.", "", "`stacks/nemo-slurm-p5.toml` (25 resources):", "",
                 "| command | wall s | critical path of waits s | wall / path | calls | PCS calls | exit |",
                 "|---|---:|---:|---:|---:|---|---:|"]
        runs = ((["up", "slurm.toml", "--yes"], UP_DEPTH), (["plan", "slurm.toml", "--detailed-exitcode"], 0),
                (["drift", "slurm.toml"], 0), (["destroy", "slurm.toml", "--yes"], DESTROY_DEPTH))
        calls(url, ACCOUNT)
        for argv, depth in runs:
            started = time.monotonic()
            done = subprocess.run([forge, *argv], cwd=work, env=env, capture_output=True, text=True)
            wall = time.monotonic() - started
            counted = calls(url, ACCOUNT)
            pcs = collections.Counter({name.split(":", 1)[1]: n for name, n in counted.items() if name.startswith("pcs:")})
            detail = ", ".join(f"{op} {n}" for op, n in sorted(pcs.items())) or "—"
            path = depth * args.phase_seconds
            ratio = f"{wall / path:.2f}" if path else "—"
            lines.append(f"| `forge {argv[0]}` | {wall:.2f} | {path:.1f} | {ratio} | {sum(counted.values())} | {detail} | {done.returncode} |")
            if done.returncode != 0:
                lines.append(f"| | | | | | {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''} | |")
        emit(lines, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The `gcp_vpc` example and the NeMo-on-GKE stack on the local Google emulators (Compute,
GKE, Filestore; the stack's state in Cloud Storage): API calls and wall time of `forge up`, a
no-op `plan`, `drift` and `destroy`. The state's own requests (`storage:`) are listed with the
calls but not counted as writes.

Operations last --operation-seconds each (PENDING for the first half, RUNNING for the second,
then DONE), and --latency-ms is added to every call, so the wall time shows how many operations
and calls stand one after the other. The example's critical path is the network, then its
subnetwork, firewall rule and router side by side: two operations deep. The GKE stack's `up` is
four deep (network, subnetwork, the cluster with its system pool, the A3 pool); its `destroy`
five (the two pools one after the other, as GKE takes one operation per cluster at a time, then
the cluster, the subnetworks, the networks).

Usage: bench/gcp.py [--operation-seconds 1] [--latency-ms 20] [--out bench/gcp-results.md]
"""

import argparse
import os
import subprocess
import time

from emulator import ROOT, calls, control, emit, gcs_bucket, running
PROJECT = "forge-bench"
# stack file, its project line, how many operations deep `up` and `destroy` are
STACKS = (("examples/gcp-vpc.toml", 'project = "my-project"', 2, 2),
          ("stacks/nemo-gke-a3.toml", 'project = "nemo-training"', 4, 5))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operation-seconds", type=float, default=1.0)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(args.operation_seconds, "gcp") as (forge, url, work):
        env = dict(os.environ, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=f"{url}/compute/v1/",
                   CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER=f"{url}/container/v1/", CLOUDSDK_API_ENDPOINT_OVERRIDES_FILE=f"{url}/file/v1/",
                   CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=f"{url}/storage/v1/", GOOGLE_OAUTH_ACCESS_TOKEN="bench",
                   FORGE_BUNDLE_MIRROR=f"{url}/_forge/bundles", NO_COLOR="1")
        # The NeMo stack's state bucket, in the bench's project.
        gcs_bucket(url, PROJECT, "nemo-training-forge-state")
        control(url, "POST", "/_forge/latency", [{"account": PROJECT, "match": "*", "ms": args.latency_ms}])
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: forge's Compute, GKE and Filestore "
                 f"emulators, operations of {args.operation_seconds} s, {args.latency_ms} ms on every call."]
        for path, project_line, up_depth, destroy_depth in STACKS:
            name = os.path.basename(path)
            with open(os.path.join(ROOT, path)) as source, open(os.path.join(work, name), "w") as stack:
                stack.write(source.read().replace(project_line, f'project = "{PROJECT}"'))
            lines += ["", f"`{path}`:", "", "| command | wall s | calls | writes | operation polls | exit |", "|---|---:|---:|---:|---:|---:|"]
            for argv in (["up", name, "--yes"], ["plan", name, "--detailed-exitcode"], ["drift", name], ["destroy", name, "--yes"]):
                started = time.monotonic()
                done = subprocess.run([forge, *argv], cwd=work, env=env, capture_output=True, text=True)
                wall = time.monotonic() - started
                counted = calls(url, PROJECT)
                polls = sum(n for name_, n in counted.items() if "perations." in name_)
                writes = sum(n for name_, n in counted.items() if not name_.endswith((".get", ".list")) and not name_.startswith("storage:"))
                detail = ", ".join(f"{name_} {n}" for name_, n in sorted(counted.items()) if "perations." not in name_)
                lines.append(f"| `forge {argv[0]}` | {wall:.2f} | {sum(counted.values())} ({detail}) | {writes} | {polls} | {done.returncode} |")
            lines += ["", f"`up` is {up_depth} operations deep ({up_depth * args.operation_seconds:.1f} s of operations on the critical "
                      f"path), `destroy` {destroy_depth} ({destroy_depth * args.operation_seconds:.1f} s); `plan` and `drift` write nothing."]
        emit(lines, args.out)


if __name__ == "__main__":
    main()

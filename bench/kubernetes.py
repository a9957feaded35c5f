#!/usr/bin/env python3
"""What making a cluster workload-ready costs: the NeMo stacks on EKS (p5) and GKE (A3) on the
local emulators (the GKE one with Kueue and its queue, Kueue's bundle from the emulator's mirror
of its release host), `forge up` with and without the readiness wait, a no-op `plan` and `destroy`,
with the requests each cluster's Kubernetes API server answered (by method) beside the wall
time. Each emulated cluster runs its own API server over TLS; its Nodes appear when their node
group or pool is up, and their devices once the device plugin's DaemonSet has rolled out
(half a second after it is applied).

The cloud's own critical path is set by --phase-seconds (every CREATING/DELETING phase): the
Kubernetes objects go in while the node groups are still being made, so `up` without the wait
should cost no more than a few requests' worth beyond the cloud's path; the wait itself ends
when the last node reports its devices.

Usage: bench/kubernetes.py [--phase-seconds 1] [--out bench/kubernetes-results.md]
"""

import argparse
import collections
import os
import subprocess
import time

from emulator import ROOT, aws_env, control, emit, gcs_bucket, running

ACCOUNT = "314159265358"
PROJECT = "forge-k8s-bench"
# stack file, the line to point it at the bench's project (GCP), the API server's key
STACKS = (("stacks/nemo-eks-p5.toml", None, f"eks/{ACCOUNT}/us-west-2/nemo"),
          ("stacks/nemo-gke-a3.toml", 'project = "nemo-training"', f"gke/{PROJECT}/us-central1/nemo"))


def api_requests(url, key):
    """The requests cluster `key`'s API server answered so far, by method."""
    try:
        log = control(url, "GET", f"/_forge/kubernetes/requests?cluster={key}")
    except Exception:
        return collections.Counter()
    return collections.Counter(r["method"] for r in log)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=1.0)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(args.phase_seconds, "k8s") as (forge, url, work):
        env = aws_env(url, ACCOUNT, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=f"{url}/compute/v1/",
                      CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER=f"{url}/container/v1/", CLOUDSDK_API_ENDPOINT_OVERRIDES_FILE=f"{url}/file/v1/",
                      CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE=f"{url}/storage/v1/", GOOGLE_OAUTH_ACCESS_TOKEN="bench",
                      FORGE_BUNDLE_MIRROR=f"{url}/_forge/bundles")
        gcs_bucket(url, PROJECT, "nemo-training-forge-state")
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulators: moto with forge's EKS phases and "
                 f"forge's GKE, phases of {args.phase_seconds} s; one emulated Kubernetes API server per cluster."]
        for path, project_line, key in STACKS:
            name = os.path.basename(path)
            with open(os.path.join(ROOT, path)) as source, open(os.path.join(work, name), "w") as stack:
                text = source.read()
                stack.write(text.replace(project_line, f'project = "{PROJECT}"') if project_line else text)
            lines += ["", f"`{path}`:", "", "| command | wall s | API server requests | exit |", "|---|---:|---|---:|"]
            runs = (["up", name, "--yes", "--no-wait-ready"], ["destroy", name, "--yes"],
                    ["up", name, "--yes"], ["plan", name, "--detailed-exitcode"], ["destroy", name, "--yes"])
            for argv in runs:
                before = api_requests(url, key)
                started = time.monotonic()
                done = subprocess.run([forge, *argv], cwd=work, env=env, capture_output=True, text=True)
                wall = time.monotonic() - started
                # A destroyed cluster's server is gone with its log: what it answered before that.
                after = api_requests(url, key) if argv[0] != "destroy" else collections.Counter()
                made = after - before if argv[0] != "destroy" else collections.Counter()
                counted = ", ".join(f"{m} {n}" for m, n in sorted(made.items())) or "—"
                lines.append(f"| `forge {' '.join(argv[:1] + argv[3:])}` | {wall:.2f} | {sum(made.values())} ({counted}) | {done.returncode} |")
                if done.returncode != 0:
                    lines.append(f"| | | {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''} | |")
                ready = [line for line in done.stderr.splitlines() if line.startswith("Ready:")]
                if ready:
                    lines += [f"| | | {line} | |" for line in ready]
        emit(lines, args.out)


if __name__ == "__main__":
    main()

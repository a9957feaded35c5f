#!/usr/bin/env python3
"""The `gcp_vpc` example on the local Google Compute emulator: API calls and wall time of
`forge up`, a no-op `plan`, `drift` and `destroy`.

Compute operations last --operation-seconds each (PENDING for the first half, RUNNING for the
second, then DONE), and --latency-ms is added to every call, so the wall time shows how many
operations and calls stand one after the other: the example's critical path is the network,
then its subnetwork, firewall rule and router side by side — two operations deep.

Usage: bench/gcp.py [--operation-seconds 1] [--latency-ms 20] [--out bench/gcp-results.md]
"""

import argparse
import os
import shutil
import subprocess
import tempfile
import time

from emulator import ROOT, calls, control, start
PROJECT = "forge-bench"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--operation-seconds", type=float, default=1.0)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="forge-gcp-bench-")
    with open(os.path.join(ROOT, "examples", "gcp-vpc.toml")) as example:
        text = example.read().replace('project = "my-project"', f'project = "{PROJECT}"')
    with open(os.path.join(work, "gcp-vpc.toml"), "w") as stack:
        stack.write(text)
    forge, launcher, url = start(args.operation_seconds)
    try:
        env = dict(os.environ, CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE=f"{url}/compute/v1/", GOOGLE_OAUTH_ACCESS_TOKEN="bench", NO_COLOR="1")
        control(url, "POST", "/_forge/latency", [{"account": PROJECT, "match": "compute:*", "ms": args.latency_ms}])
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: forge's Compute emulator, "
                 f"operations of {args.operation_seconds} s, {args.latency_ms} ms on every call.", "",
                 "| command | wall s | calls | writes | operation polls | exit |", "|---|---:|---:|---:|---:|---:|"]
        for argv in (["up", "gcp-vpc.toml", "--yes"], ["plan", "gcp-vpc.toml", "--detailed-exitcode"], ["drift", "gcp-vpc.toml"],
                     ["destroy", "gcp-vpc.toml", "--yes"]):
            started = time.monotonic()
            done = subprocess.run([forge, *argv], cwd=work, env=env, capture_output=True, text=True)
            wall = time.monotonic() - started
            counted = calls(url, PROJECT)
            polls = sum(n for name, n in counted.items() if "Operations." in name)
            writes = sum(n for name, n in counted.items() if not name.endswith((".get", ".list")))
            detail = ", ".join(f"{name.split(':', 1)[1]} {n}" for name, n in sorted(counted.items()) if "Operations." not in name)
            lines.append(f"| `forge {' '.join(argv[:1])}` | {wall:.2f} | {sum(counted.values())} ({detail}) | {writes} | {polls} | {done.returncode} |")
        critical = 2 * args.operation_seconds
        lines += ["", f"`up` and `destroy` are each two operations deep ({critical:.1f} s of operations on the critical path); "
                  "`plan` and `drift` read one list per kind and write nothing."]
        report = "\n".join(lines) + "\n"
        print(report)
        if args.out:
            with open(args.out, "w") as out:
                out.write(report)
    finally:
        launcher.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

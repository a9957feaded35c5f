#!/usr/bin/env python3
"""State in S3 and in GCS against the local file: for N `null` resources (10 layers of N/10,
each resource depending on two of the layer before), `forge up` then `forge destroy` with the
state in a bucket on the emulator (moto's S3, and the launcher's Cloud Storage JSON API, each
with --latency-ms added to every storage request) and in `state/`, side by side: storage
requests per apply, wall time, peak memory.

The journal writes one segment per group of intents that start together, so the requests of
an apply grow with the graph's depth (and how calls finish in time), not with N: the depth is
held at 10 layers while N grows tenfold.

With `--parallelism P` below a layer's width, at most P intents are pending at once, so an apply
takes about 2·N/P segment writes instead: `--parallelism 64` shows that side.

S3's writes include one delete per folded segment; GCS leaves folded segments where they are
(its crate deletes only over gRPC), so it makes about half the requests.

Usage: bench/state.py [--sizes 1000,10000] [--latency-ms 20] [--parallelism 10000] [--out bench/state-results.md]
"""

import argparse
import os
import subprocess
import time

from emulator import aws_env, calls, control, emit, gcs_bucket, s3_bucket, running

ACCOUNT = "123456789012"
BUCKET = "forge-bench-state"


BACKENDS = ("local", "s3", "gcs")


def stack(n, backend):
    state = f'[state]\nbackend = "{backend}"\nbucket = "{BUCKET}"\n' if backend != "local" else ""
    return f'[stack]\nname = "bench-{backend}-{n}"\n{state}\n[null_layers.g]\nlayers = 10\nwidth = {n // 10}\n'


def run(forge, argv, cwd, env):
    """Runs forge: (wall seconds, peak resident MB, exit code)."""
    started = time.monotonic()
    proc = subprocess.Popen([forge, *argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=10000, help="forge's --parallelism (default: no limit below a layer's width)")
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(0.1, "state") as (forge, url, work):
        env = aws_env(url, ACCOUNT, "us-east-1", STORAGE_EMULATOR_HOST=url, GOOGLE_OAUTH_ACCESS_TOKEN="bench")
        s3_bucket(url, ACCOUNT, BUCKET, "us-east-1")
        gcs_bucket(url, ACCOUNT, BUCKET)
        control(url, "POST", "/_forge/latency", [{"account": ACCOUNT, "match": "s3:*", "ms": args.latency_ms},
                                                 {"account": ACCOUNT, "match": "storage:*", "ms": args.latency_ms}])
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. S3: moto behind the launcher; GCS: the launcher's JSON API "
                 f"through the google-cloud-storage crate; {args.latency_ms} ms added to every storage request. `null` resources with "
                 f"no delay of their own, in 10 layers; --parallelism {args.parallelism}.", "",
                 "| N | command | local s | local MB | S3 s | S3 MB | S3 requests (writes) | GCS s | GCS MB | GCS requests (writes) |",
                 "|---:|---|---:|---:|---:|---:|---|---:|---:|---|"]
        per_layer = 0.0
        for n in [int(s) for s in args.sizes.split(",")]:
            results = {}
            for backend in BACKENDS:
                path = os.path.join(work, f"{backend}-{n}.toml")
                with open(path, "w") as f:
                    f.write(stack(n, backend))
                calls(url, ACCOUNT)
                for command in ("up", "destroy"):
                    wall, mb, code = run(forge, [command, path, "--yes", "--parallelism", str(args.parallelism)], work, env)
                    if code != 0:
                        raise SystemExit(f"forge {command} ({backend}, N={n}) failed with exit code {code}")
                    counted = calls(url, ACCOUNT)
                    requests = sum(v for k, v in counted.items() if k.startswith(("s3:", "storage:")))
                    writes = sum(v for k, v in counted.items() if k.startswith(("s3:PUT", "s3:DELETE", "storage:objects.insert")))
                    results[(backend, command)] = (wall, mb, requests, writes)
            for command in ("up", "destroy"):
                lw, lm, _, _ = results[("local", command)]
                row = f"| {n:,} | `forge {command}` | {lw:.2f} | {lm:.0f} |"
                for backend in ("s3", "gcs"):
                    wall, mb, requests, writes = results[(backend, command)]
                    per_layer = max(per_layer, writes / 10)
                    row += f" {wall:.2f} | {mb:.0f} | {requests} ({writes}) |"
                lines.append(row)
        lines += ["", "At a fixed depth the requests per apply stay flat as N grows tenfold: one journal segment per group of "
                  "intents that start together, not per resource; they grow with the graph's depth "
                  f"(at most {per_layer:.1f} writes per layer here). S3's writes include one delete per folded segment; GCS "
                  "leaves them (the google-cloud-storage crate deletes only over gRPC)."]
        emit(lines, args.out)


if __name__ == "__main__":
    main()

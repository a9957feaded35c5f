#!/usr/bin/env python3
"""`forge drift` on the local AWS emulator: API calls per stack, and wall time with latency.

Brings every AWS seed stack (stacks/*.toml with an `[aws]` section; ml-platform-eks keeps its
state in an S3 bucket, made here) and every AWS example up in one emulator account, then:
  * drifts each stack alone and reports its calls against its kinds and resources (a batched
    read costs about one call per kind, whatever the number of resources);
  * injects --latency-ms on every call of the account and times `forge drift` of all stacks at
    once (best of --runs) against the limit of one batch round: the longest chain of calls one
    kind makes in sequence (a security group read is two: the groups, then their rules).

Terraform's refresh cannot run here: its AWS provider is downloaded from the registry and these
machines are offline. For scale, the report gives what a refresh of one call per resource at
Terraform's default -parallelism=10 would take at the same latency (a model, not a measurement).

Usage: bench/drift.py [--latency-ms 50] [--runs 3] [--out bench/drift-results.md]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from emulator import ROOT, aws_env, calls, control, emit, s3_bucket, running
ACCOUNT = "210987654321"
# The longest chain of calls one kind's read makes one after the other.
ROUNDS = 2


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(0.2, "drift") as (forge, url, work):
        shutil.copytree(os.path.join(ROOT, "stacks"), os.path.join(work, "stacks"))
        shutil.copytree(os.path.join(ROOT, "examples"), os.path.join(work, "examples"))
        env = aws_env(url, ACCOUNT)
        s3_bucket(url, ACCOUNT, "ml-platform-forge-state", "us-west-2")
        seeds = [f for f in sorted(glob.glob("stacks/*.toml", root_dir=work)) if "\n[aws]" in open(os.path.join(work, f)).read()]
        files = seeds + ["examples/aws-network.toml", "examples/vpc.toml",
                                                                    "examples/efa-launch-template.toml", "examples/eks-iam.toml",
                                                                    "examples/cfn-nodegroup/stack.toml"]

        def run(*argv):
            return subprocess.run([forge, *argv], cwd=work, env=env, capture_output=True, text=True)

        for f in files:
            print(f"up {f}...", file=sys.stderr)
            done = run("up", f, "--yes")
            if done.returncode != 0:
                sys.exit(f"forge up {f} failed:\n{done.stderr}")
        calls(url, ACCOUNT)
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: moto 5.2.5 with forge's launcher.", ""]
        lines += ["| stack | resources | kinds | drift calls | writes | exit |", "|---|---:|---:|---:|---:|---:|"]
        resources = 0
        for f in files:
            done = run("drift", f, "--json")
            report = json.loads(done.stdout)["stacks"][0]
            counted = calls(url, ACCOUNT)
            writes = sum(n for name, n in counted.items() if not any(name.split(":", 1)[1].startswith(r) for r in ("Describe", "List", "Get", "GET ")))
            resources += report["resources_read"]
            lines.append(f"| {report['stack']} | {report['resources_read']} | {report['kinds_read']} | {sum(counted.values())} | {writes} | {done.returncode} |")

        def timed(latency_ms):
            control(url, "POST", "/_forge/latency", [{"account": ACCOUNT, "match": "*", "ms": latency_ms}])
            walls = []
            for _ in range(args.runs):
                started = time.monotonic()
                done = run("drift", *files, "--json")
                walls.append(time.monotonic() - started)
            control(url, "POST", "/_forge/latency", [])
            return min(walls), walls, done.returncode, sum(calls(url, ACCOUNT).values()) // args.runs

        base, _, _, _ = timed(0)
        best, walls, code, total_calls = timed(args.latency_ms)
        added = best - base
        limit = ROUNDS * args.latency_ms / 1000
        per_resource = resources * args.latency_ms / 1000
        terraform_model = -(-resources // 10) * args.latency_ms / 1000
        lines += ["", f"All {len(files)} stacks in one `forge drift` run, {args.latency_ms} ms injected on every call "
                  f"(exit {code}, {total_calls} calls for {resources} resources). The same run without latency takes "
                  f"{base:.2f} s (start-up, loading and expanding {len(files)} stack files, the SDK clients); what the "
                  "latency adds is the cost of the reads:", ""]
        lines += ["| | latency added, s | rounds of one call |", "|---|---:|---:|"]
        lines.append(f"| forge drift (best of {args.runs}: {best:.2f} s wall; all: {', '.join(f'{w:.2f}' for w in walls)}) | {added:.2f} | {added * 1000 / args.latency_ms:.1f} |")
        lines.append(f"| limit: one batch round ({ROUNDS} calls in sequence) | {limit:.2f} | {ROUNDS} |")
        lines.append(f"| model: one call per resource, one at a time | {per_resource:.2f} | {resources} |")
        lines.append(f"| model: one call per resource at Terraform's -parallelism=10 (not run: no provider offline) | {terraform_model:.2f} | {-(-resources // 10)} |")
        emit(lines, args.out)


if __name__ == "__main__":
    main()

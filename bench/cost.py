#!/usr/bin/env python3
"""What pricing adds to `forge plan`, on the local emulators: price calls and wall time.

For each AWS seed stack (stacks/*.toml with an `[aws]` section and a local state, but the one
on an existing cluster, which needs that cluster) and the GKE seed, a refresh-free plan (`--refresh=false`: nothing recorded, so the plan itself makes no
cloud call and what remains is start-up, the plan and the prices):
  * `--no-cost`: no price call;
  * cold: an empty price cache, --latency-ms injected on every price call (the Price List API
    and the Billing Catalog answer from one region, far from most stacks);
  * warm: the cache the cold run filled, the same latency (no call is expected).
Each is the best of --runs. The limit a cold plan can reach is one round of price calls at that
latency: forge asks all its AWS questions at once and each Google service's SKUs once.

Usage: bench/cost.py [--latency-ms 100] [--runs 3] [--out bench/cost-results.md]
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

from emulator import ROOT, aws_env, control, emit, gcs_bucket, running

ACCOUNT = "310987654321"
PROJECT = "cost-bench"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(0.2, "cost") as (forge, url, work):
        shutil.copytree(os.path.join(ROOT, "stacks"), os.path.join(work, "stacks"))
        cache = os.path.join(work, "cache")
        google = {
            f"CLOUDSDK_API_ENDPOINT_OVERRIDES_{service.upper()}": f"{url}/{service}/v1/"
            for service in ("compute", "container", "file", "storage", "cloudbilling")
        }
        env = aws_env(url, ACCOUNT, XDG_CACHE_HOME=cache, GOOGLE_OAUTH_ACCESS_TOKEN="bench", FORGE_BUNDLE_MIRROR=f"{url}/_forge/bundles", **google)
        gcp_seed = os.path.join(work, "stacks", "nemo-gke-a3.toml")
        with open(gcp_seed) as f:
            text = f.read().replace("nemo-training", PROJECT)
        with open(gcp_seed, "w") as f:
            f.write(text)
        gcs_bucket(url, PROJECT, f"{PROJECT}-forge-state")
        seeds = [f for f in sorted(glob.glob("stacks/*.toml", root_dir=work))
                 if "\n[aws]" in open(os.path.join(work, f)).read() and "bucket" not in open(os.path.join(work, f)).read()
                 and "existing" not in f]
        seeds.append("stacks/nemo-gke-a3.toml")

        def plan(f, *extra):
            started = time.perf_counter()
            done = subprocess.run([forge, "plan", f, "--refresh=false", *extra], cwd=work, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"forge plan {f} failed:\n{done.stderr}")
            return time.perf_counter() - started, done.stderr

        def price_calls():
            # The Catalog's calls name no project: they are counted under no account.
            counted = control(url, "GET", "/_forge/calls")
            control(url, "POST", "/_forge/reset", {})
            return sum(n for name, n in counted.items() if name.startswith(("pricing:", "cloudbilling:")))

        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: moto 5.2.5 with forge's launcher.",
                 f"{args.latency_ms} ms injected on every price call; best of {args.runs} runs each.", "",
                 "| stack | resources priced | `--no-cost`, s | cold cache, s | price calls | warm cache, s | price calls | cold − no-cost, s | limit: one round, s |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        rule = [{"match": "pricing:*", "ms": args.latency_ms}, {"match": "cloudbilling:*", "ms": args.latency_ms}]
        control(url, "POST", "/_forge/latency", rule)
        for f in seeds:
            print(f"plan {f}...", file=sys.stderr)
            bare = min(plan(f, "--no-cost")[0] for _ in range(args.runs))
            price_calls()
            colds, cold_calls, priced = [], 0, 0
            for _ in range(args.runs):
                shutil.rmtree(cache, ignore_errors=True)
                wall, _ = plan(f)
                colds.append(wall)
                cold_calls = price_calls()
            # What the cache now holds, read as JSON: the resources priced.
            done = subprocess.run([forge, "plan", f, "--refresh=false", "--json"], cwd=work, env=env, capture_output=True, text=True)
            priced = sum(line["hourly"] is not None for line in json.loads(done.stdout)["cost"]["after"]["resources"])
            warms = [plan(f)[0] for _ in range(args.runs)]
            warm_calls = price_calls()
            lines.append(f"| {os.path.basename(f)[:-5]} | {priced} | {bare:.2f} | {min(colds):.2f} | {cold_calls} | {min(warms):.2f} | "
                         f"{warm_calls} | {min(colds) - bare:.2f} | {args.latency_ms / 1000:.2f} |")
        control(url, "POST", "/_forge/latency", [])
        lines += ["", "A cold plan's price calls run at once: what they add stays near one round of the injected "
                  "latency whatever the number of node groups and services. A warm cache makes no call."]
        emit(lines, args.out)


if __name__ == "__main__":
    main()

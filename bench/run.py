#!/usr/bin/env python3
"""forge against Terraform on identical layered graphs, measured side by side in one run.

For each size N it writes the same layered DAG twice: `null` blocks for forge and
`terraform_data` resources for Terraform (built into Terraform, so no provider is downloaded).
Node j of layer i depends on nodes j and j+1 (wrapping) of layer i-1. It then times plan on an
empty state, apply, a no-op plan and destroy, with each process's peak RSS. A second scenario
measures apply makespan of a layers x width graph whose every node takes `--delay-ms` against
its critical path (layers x delay).

Terraform is optional: where it is not installed the forge columns are still reported. Its apply
grows quadratically (221 s at N=2,000 on these machines), so by default it only runs up to
--terraform-max resources.

Usage: bench/run.py [--sizes 1000,10000] [--terraform-max 1000] [--out bench/results.md]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shape(n):
    """(layers, width) for n nodes: width 100 (or n when smaller)."""
    width = min(100, n)
    return max(1, n // width), width


def parents(i, j, width):
    if i == 0:
        return []
    deps = [(i - 1, j)]
    if width > 1:
        deps.append((i - 1, (j + 1) % width))
    return deps


def forge_stack(layers, width, delay_ms):
    out = ['[stack]\nname = "bench"\n']
    for i in range(layers):
        for j in range(width):
            deps = ", ".join(f'"null.n{a}_{b}"' for a, b in parents(i, j, width))
            out.append(f'[null.n{i}_{j}]\ntriggers = {{ layer = {i}, node = {j} }}\ndelay_ms = {delay_ms}\ndepends_on = [{deps}]\n')
    return "".join(out)


def terraform_config(layers, width, delay_ms):
    out = []
    for i in range(layers):
        for j in range(width):
            deps = ", ".join(f"terraform_data.n{a}_{b}" for a, b in parents(i, j, width))
            sleep = f'\n  provisioner "local-exec" {{\n    command = "sleep {delay_ms / 1000}"\n  }}' if delay_ms else ""
            out.append(f'resource "terraform_data" "n{i}_{j}" {{\n  input = {{ layer = {i}, node = {j} }}\n  depends_on = [{deps}]{sleep}\n}}\n')
    return "".join(out)


def measure(cmd, cwd):
    """Runs cmd; returns (seconds, peak RSS in MB, stderr text)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1", "TF_IN_AUTOMATION": "1"})
    stderr = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(cmd)} failed ({code}):\n{stderr[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, stderr


PHASES = [("plan (empty state)", "plan"), ("apply", "apply"), ("no-op plan", "noop"), ("destroy", "destroy")]


def run_forge(forge, layers, width, delay_ms=0):
    d = tempfile.mkdtemp(prefix="forge-bench-")
    with open(os.path.join(d, "bench.toml"), "w") as f:
        f.write(forge_stack(layers, width, delay_ms))
    cmds = {
        "plan": [forge, "plan", "bench.toml"],
        "apply": [forge, "up", "bench.toml", "--yes", "--parallelism", "64"],
        "noop": [forge, "plan", "bench.toml"],
        "destroy": [forge, "destroy", "bench.toml", "--yes", "--parallelism", "64"],
    }
    results = {k: measure(c, d) for k, c in cmds.items()}
    shutil.rmtree(d)
    return results


def run_terraform(layers, width, delay_ms=0):
    d = tempfile.mkdtemp(prefix="tf-bench-")
    with open(os.path.join(d, "main.tf"), "w") as f:
        f.write(terraform_config(layers, width, delay_ms))
    measure(["terraform", "init", "-input=false"], d)
    cmds = {
        "plan": ["terraform", "plan", "-input=false"],
        "apply": ["terraform", "apply", "-auto-approve", "-input=false"],
        "noop": ["terraform", "plan", "-input=false"],
        "destroy": ["terraform", "destroy", "-auto-approve", "-input=false"],
    }
    results = {k: measure(c, d) for k, c in cmds.items()}
    shutil.rmtree(d)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated resource counts")
    parser.add_argument("--terraform-max", type=int, default=1000, help="largest N to run Terraform on")
    parser.add_argument("--makespan", default="4x40x500", help="LAYERSxWIDTHxDELAY_MS for the makespan scenario")
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    subprocess.run(["cargo", "build", "--release", "--quiet", "--no-default-features"], cwd=ROOT, check=True)
    forge = os.path.join(ROOT, "target", "release", "forge")
    terraform = shutil.which("terraform")
    tf_version = subprocess.run(["terraform", "version"], capture_output=True, text=True).stdout.splitlines()[0] if terraform else None
    lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Terraform: {tf_version or 'not installed (forge columns only)'}.", ""]
    lines += ["| N | phase | forge s | forge MB | Terraform s | Terraform MB | speed-up |", "|---|---|---:|---:|---:|---:|---:|"]
    per_resource = {}
    for n in [int(s) for s in args.sizes.split(",")]:
        layers, width = shape(n)
        n = layers * width
        print(f"N={n} ({layers} layers x {width}) forge...", file=sys.stderr)
        f = run_forge(forge, layers, width)
        t = None
        if terraform and n <= args.terraform_max:
            print(f"N={n} terraform...", file=sys.stderr)
            t = run_terraform(layers, width)
        for label, key in PHASES:
            fs, fm, _ = f[key]
            per_resource.setdefault(key, []).append((n, fs / n * 1e6))
            if t:
                ts, tm, _ = t[key]
                lines.append(f"| {n:,} | {label} | {fs:.2f} | {fm:.0f} | {ts:.2f} | {tm:.0f} | {ts / fs:.0f}x |")
            else:
                why = "not installed" if not terraform else f"skipped (N > --terraform-max {args.terraform_max})"
                lines.append(f"| {n:,} | {label} | {fs:.2f} | {fm:.0f} | {why} | | |")
    lines += ["", "Linearity (forge, microseconds per resource): " + "; ".join(f"{k}: " + ", ".join(f"N={n:,} {us:.0f}" for n, us in v) for k, v in per_resource.items())]

    layers, width, delay = (int(x) for x in args.makespan.split("x"))
    critical = layers * delay / 1000
    print(f"makespan {layers}x{width} @ {delay} ms forge...", file=sys.stderr)
    f = run_forge(forge, layers, width, delay)
    reported = re.search(r"Apply complete: .* in ([0-9.]+)s", f["apply"][2])
    makespan = float(reported.group(1)) if reported else f["apply"][0]
    lines += ["", f"Makespan of a {layers}x{width} layered graph, {delay} ms per node, critical path {critical:.1f} s:", ""]
    lines += ["| tool | apply wall s | apply makespan s | over critical path |", "|---|---:|---:|---:|"]
    lines.append(f"| forge (--parallelism 64) | {f['apply'][0]:.2f} | {makespan:.2f} | {100 * (makespan / critical - 1):+.1f}% |")
    if terraform:
        print("makespan terraform...", file=sys.stderr)
        t = run_terraform(layers, width, delay)
        lines.append(f"| Terraform (-parallelism=10) | {t['apply'][0]:.2f} | {t['apply'][0]:.2f} | {100 * (t['apply'][0] / critical - 1):+.1f}% |")
    lines += ["", "The benches on real kinds, each on the local emulators, report beside this file: large stacks "
              "(large-results.md), the cloud's rate limits (throttle-results.md), drift (drift-results.md), remote state "
              "(state-results.md), Google Cloud (gcp-results.md), Kubernetes readiness (kubernetes-results.md), Slurm on PCS "
              "(slurm-results.md)."]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as out:
            out.write(report)


if __name__ == "__main__":
    main()

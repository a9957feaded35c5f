#!/usr/bin/env python3
"""forge at the cloud's rate limits: the emulator throttles EC2 as EC2 does — a token bucket per
account and action, 50 at once and 5 a second for a mutating action, 100 and 20 for a
non-mutating one — with the refill rates multiplied by --scale so a run takes seconds, not
minutes. A generated stack of --size real objects (bench/large.py's: VPCs, subnets, security
groups with an ingress rule each, placement groups) goes up and is destroyed:

  * by forge pacing its calls to the same documented buckets (`--api-rate <scale>`, its
    default being the real rates), with its default --parallelism;
  * by forge without pacing (`--api-rate off`) at a fixed --parallelism 10, Terraform's default;
  * by forge without pacing and without a bound on calls in flight, as Pulumi sends them.

For each: wall time, calls, calls throttled, resources failed, and the time the buckets allow —
for each action, its calls past the burst at its refill rate; the longest of them, as the
actions' buckets refill side by side — and the wall time as a multiple of it.

Then `forge drift` over --stacks stacks at once (one process, one budget per action) under the
same buckets: what pacing saves a nightly drift check of many stacks sharing an account.

With --groups N, instead: a VPC and N security groups (one ingress rule each) at EC2's real
rates (--scale 1), paced by forge's defaults, up and destroyed --repeat times: how close each run
comes to the buckets' bound, with the throttled calls' retries served before the queue.

Usage: bench/throttle.py [--size 1000] [--scale 5] [--stacks 50] [--drift-size 100] [--out bench/throttle-results.md]
       bench/throttle.py --groups 150 --repeat 3 [--out FILE]
"""

import argparse
import collections
import fnmatch
import os
import re
import subprocess
import time

from emulator import aws_env, calls, control, emit, running
from large import stack

# EC2's documented buckets (docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html):
# (pattern, burst, refill per second); the first pattern an action matches is its class.
EC2 = [("ec2:Describe*", 100, 20), ("ec2:*", 50, 5)]


def bucket_rules(scale):
    """The emulator's rules: each EC2 action its own bucket of its class's size."""
    return [{"match": m, "class": m, "burst": b, "refill": r * scale, "per_action": True} for m, b, r in EC2]


def bucket_seconds(counted, scale):
    """The shortest time EC2's buckets allow for the calls that went through: per action, the
    calls past its burst at its refill rate; the slowest action, as they refill side by side."""
    per_action = collections.Counter({k: v for k, v in counted.items() if k.startswith("ec2:")})
    for name, n in counted.items():
        if name.startswith("throttled:"):
            per_action[name.split(":", 1)[1]] -= n
    longest = 0.0
    for name, n in per_action.items():
        _, burst, refill = next(c for c in EC2 if fnmatch.fnmatchcase(name, c[0]))
        longest = max(longest, max(0, n - burst) / (refill * scale))
    return longest


def warm_up(forge, url, work):
    """An unmeasured up and destroy of a small stack in an account of its own: a fresh
    emulator's first calls build moto's backends, which added about 8 s to the first `up`
    measured (bench/throttle-results.md)."""
    with open(os.path.join(work, "warm.toml"), "w") as f:
        f.write(stack(100).replace('name = "large"', 'name = "warm"'))
    env = aws_env(url, "999999999999")
    for command in (["up", "warm.toml", "--yes"], ["destroy", "warm.toml", "--yes"]):
        run(forge, [*command, "--api-rate", "off"], work, env)


def groups_stack(name, n):
    """A VPC and n security groups, each with one ingress rule."""
    lines = [f'[stack]\nname = "{name}"\n\n[aws]\nregion = "us-west-2"\n', '[aws_vpc.main]\ncidr_block = "10.0.0.0/16"\n']
    for g in range(n):
        lines.append(f'[aws_security_group.g{g}]\nname = "g{g}"\nvpc_id = "${{aws_vpc.main.id}}"\n'
                     f'ingress = [{{ protocol = "tcp", from_port = {1000 + g}, to_port = {1000 + g}, cidr_blocks = ["10.0.0.0/16"] }}]\n')
    return "\n".join(lines)


def groups_rounds(forge, url, work, n, repeat):
    """--groups: rounds of up and destroy of groups_stack at EC2's real rates, paced by forge's
    defaults; each run's wall time against the buckets' bound and 1.15 x the bound + 1.5 s."""
    warm_up(forge, url, work)
    control(url, "POST", "/_forge/buckets", bucket_rules(1))
    lines = [f"Machine: {os.cpu_count()} cores. forge: release build, default pacing and --parallelism. Emulator: moto with "
             f"EC2's buckets per account and action at their real rates (mutating 50 / 5 per s, non-mutating 100 / 20 per s). "
             f"Stack: a VPC and {n} security groups, one ingress rule each.", "",
             "| round | command | wall s | bucket s | wall / bucket | within 1.15× + 1.5 s | calls | throttled | exit |",
             "|---:|---|---:|---:|---:|---|---:|---:|---:|"]
    for r in range(repeat):
        account, name = f"{161803398874 + r:012d}", f"groups{r}"
        with open(os.path.join(work, name + ".toml"), "w") as f:
            f.write(groups_stack(name, n))
        env = aws_env(url, account)
        calls(url, account)
        for command in (["up", name + ".toml", "--yes"], ["destroy", name + ".toml", "--yes"]):
            code, wall, _ = run(forge, command, work, env)
            counted = calls(url, account)
            throttled = sum(v for k, v in counted.items() if k.startswith("throttled:"))
            made = sum(v for k, v in counted.items() if not k.startswith(("throttled:", "fault:")))
            allowed = bucket_seconds(counted, 1)
            within = "yes" if wall <= 1.15 * allowed + 1.5 else "**no**"
            lines.append(f"| {r + 1} | `forge {command[0]}` | {wall:.1f} | {allowed:.1f} | {wall / allowed:.2f}× | {within} | "
                         f"{made:,} | {throttled:,} | {code} |")
        time.sleep(10)  # the next round's account has full buckets anyway; let the machine settle
    return lines


def run(forge, argv, cwd, env):
    """(exit code, wall s, resources failed) of one forge command."""
    started = time.monotonic()
    done = subprocess.run([forge, *argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    failed = re.search(r"(\d+) resource\(s\) failed", done.stderr)
    if done.returncode not in (0, 2):
        print(done.stderr[-1500:])
    return done.returncode, wall, int(failed.group(1)) if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--scale", type=float, default=5, help="refill rates times this (both the emulator's and forge's)")
    parser.add_argument("--parallelism", type=int, help="forge's --parallelism when paced (default: forge's own)")
    parser.add_argument("--paced-only", action="store_true", help="leave out the unpaced ways")
    parser.add_argument("--stacks", type=int, default=50, help="stacks checked at once by one `forge drift` (0: no drift run)")
    parser.add_argument("--drift-size", type=int, default=100, help="objects in each of those stacks")
    parser.add_argument("--groups", type=int, help="instead: a VPC and this many security groups at EC2's real rates")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of up and destroy with --groups")
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()
    if args.groups:
        with running(0, "throttle") as (forge, url, work):
            emit(groups_rounds(forge, url, work, args.groups, args.repeat), args.out)
        return

    paced = ["--api-rate", f"{args.scale:g}"] + (["--parallelism", str(args.parallelism)] if args.parallelism else [])
    ways = [(f"paced, --parallelism {args.parallelism or 'default'}", paced),
            ("unpaced, --parallelism 10", ["--api-rate", "off", "--parallelism", "10"]),
            ("unpaced, unbounded", ["--api-rate", "off", "--parallelism", "65535"])]
    with running(0, "throttle") as (forge, url, work):
        warm_up(forge, url, work)
        control(url, "POST", "/_forge/buckets", bucket_rules(args.scale))
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build. Emulator: moto with EC2's buckets per account and "
                 f"action (mutating 50 / 5 per s, non-mutating 100 / 20 per s), refill rates ×{args.scale:g}. "
                 f"Stack: {args.size:,} objects (bench/large.py's).", "",
                 "| way | command | wall s | bucket s | wall / bucket | calls | throttled | throttled % | failed | exit |",
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for i, (label, flags) in enumerate(ways[:1] if args.paced_only else ways):
            account, name = f"{271828182845 + i:012d}", f"large{i}"
            with open(os.path.join(work, name + ".toml"), "w") as f:
                f.write(stack(args.size).replace('name = "large"', f'name = "{name}"'))
            env = aws_env(url, account)
            calls(url, account)
            for command in (["up", name + ".toml", "--yes"], ["destroy", name + ".toml", "--yes"]):
                code, wall, failed = run(forge, [*command, *flags], work, env)
                counted = calls(url, account)
                throttled = sum(v for k, v in counted.items() if k.startswith("throttled:"))
                made = sum(v for k, v in counted.items() if not k.startswith(("throttled:", "fault:")))
                allowed = bucket_seconds(counted, args.scale)
                lines.append(f"| {label} | `forge {command[0]}` | {wall:.1f} | {allowed:.1f} | {wall / allowed:.2f}× | {made:,} | "
                             f"{throttled:,} | {throttled / made:.1%} | {failed} | {code} |")
            if code != 0:  # what an unpaced run left behind goes, so the next way starts clean
                run(forge, ["destroy", name + ".toml", "--yes"], work, env)
        if not args.stacks:
            emit(lines, args.out)
            return
        emit(lines, None)

        # Drift: --stacks stacks of --drift-size objects, one account, checked by one process.
        account, n = "314159265358", args.stacks
        env = aws_env(url, account)
        files = []
        for s in range(n):
            name = f"drift{s}.toml"
            body = stack(args.drift_size).replace('name = "large"', f'name = "drift{s}"').replace('"v0-', f'"d{s}-v0-')
            with open(os.path.join(work, name), "w") as f:
                f.write(body)
            files.append(name)
        control(url, "POST", "/_forge/buckets", [])
        for name in files:
            code, _, _ = run(forge, ["up", name, "--yes"], work, env)
            assert code == 0, name
        control(url, "POST", "/_forge/buckets", bucket_rules(args.scale))
        lines += ["", f"`forge drift` over {n} stacks of {args.drift_size} objects at once (one process), same buckets:", "",
                  "| way | wall s | calls | throttled | throttled % | exit |", "|---|---:|---:|---:|---:|---:|"]
        for label, flags in ways:
            time.sleep(100 / (20 * args.scale))  # the buckets fill again between ways
            calls(url, account)
            code, wall, _ = run(forge, ["drift", *files, *flags], work, env)
            counted = calls(url, account)
            throttled = sum(v for k, v in counted.items() if k.startswith("throttled:"))
            made = sum(v for k, v in counted.items() if not k.startswith(("throttled:", "fault:")))
            lines.append(f"| {label} | {wall:.1f} | {made:,} | {throttled:,} | {throttled / max(made, 1):.1%} | {code} |")
        emit(lines, args.out)


if __name__ == "__main__":
    main()

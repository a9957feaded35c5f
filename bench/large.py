#!/usr/bin/env python3
"""forge on large stacks of real AWS kinds on the local emulator (moto): a generated stack of N
objects — VPCs, subnets, security groups with an ingress rule each, placement groups, in the
proportions of a platform team's shared networking — through `up`, a no-op `plan`, `drift` and
`destroy`. For each: wall time, the calls the emulator answered, the CPU time forge itself
used (user + system, from the kernel's accounting of the child process) and its peak memory.

The CPU share says how much of the wall time is forge's own work: the rest is the emulator
answering (moto, single process, on the same 2 cores) and the waits between calls. The emulator
throttles nothing here, so forge runs with `--api-rate off`: at EC2's real rates 600 security
groups alone take two minutes (bench/throttle.py measures that side).

Usage: bench/large.py [--sizes 1000,5000] [--parallelism 64] [--out bench/large-results.md]
"""

import argparse
import os
import subprocess
import time

from emulator import aws_env, calls, emit, running

ACCOUNT = "161803398874"


def stack(n):
    """A stack of about n objects: one VPC per 1,000 (at most 10% subnets, 60% security groups,
    the rest placement groups in each)."""
    lines = ['[stack]\nname = "large"\n\n[aws]\nregion = "us-west-2"\n']
    vpcs = max(1, n // 1000)
    per_vpc = n // vpcs
    for v in range(vpcs):
        lines.append(f'[aws_vpc.v{v}]\ncidr_block = "10.{v}.0.0/16"\n')
        subnets, groups = min(100, per_vpc // 10), per_vpc * 6 // 10
        places = per_vpc - 1 - subnets - groups
        for s in range(subnets):
            lines.append(f'[aws_subnet.v{v}_s{s}]\nvpc_id = "${{aws_vpc.v{v}.id}}"\ncidr_block = "10.{v}.{s}.0/24"\n'
                         f'availability_zone = "us-west-2{"abc"[s % 3]}"\n')
        for g in range(groups):
            lines.append(f'[aws_security_group.v{v}_g{g}]\nname = "v{v}-g{g}"\nvpc_id = "${{aws_vpc.v{v}.id}}"\n'
                         f'ingress = [{{ protocol = "tcp", from_port = {1000 + g}, to_port = {1000 + g}, cidr_blocks = ["10.{v}.0.0/16"] }}]\n')
        for p in range(places):
            lines.append(f'[aws_placement_group.v{v}_p{p}]\nname = "v{v}-p{p}"\n')
    return "\n".join(lines)


def run(forge, argv, cwd, env):
    """(exit code, wall s, forge's CPU s, peak MB) of one forge command."""
    started = time.monotonic()
    child = subprocess.Popen([forge, *argv], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 2):
        print(stderr.decode(errors="replace")[-2000:])
    return code, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000")
    parser.add_argument("--parallelism", type=int, default=64, help="forge's --parallelism (its default: 64)")
    parser.add_argument("--out", help="also write the report (Markdown) to this file")
    args = parser.parse_args()

    with running(0, "large") as (forge, url, work):
        env = aws_env(url, ACCOUNT)
        lines = [f"Machine: {os.cpu_count()} cores. forge: release build, --parallelism {args.parallelism}, --api-rate off. Emulator: moto, "
                 "no phases (objects exist at once); its answers share the machine with forge.", "",
                 "| N | command | wall s | calls | forge CPU s | forge share | forge peak MB | exit |",
                 "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for n in (int(s) for s in args.sizes.split(",")):
            with open(os.path.join(work, "large.toml"), "w") as f:
                f.write(stack(n))
            calls(url, ACCOUNT)
            for argv in (["up", "large.toml", "--yes"], ["plan", "large.toml", "--detailed-exitcode"], ["drift", "large.toml"],
                         ["destroy", "large.toml", "--yes"]):
                code, wall, cpu, peak = run(forge, [*argv, "--parallelism", str(args.parallelism), "--api-rate", "off"], work, env)
                made = sum(calls(url, ACCOUNT).values())
                lines.append(f"| {n:,} | `forge {argv[0]}` | {wall:.2f} | {made:,} | {cpu:.2f} | {cpu / wall:.0%} | {peak:.0f} | {code} |")
        emit(lines, args.out)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""moto 5.2.5 in server mode, with the gaps forge's tests need filled in, and the Google Cloud
APIs forge calls (Compute, GKE, Filestore, Cloud Storage) on the same port.

Serves moto's own WSGI app (as moto.server.ThreadedMotoServer does) behind a middleware, and
patches moto (never the installed files) where it lacks what forge calls; Google's paths
(/compute/v1/..., /container/v1/..., /file/v1/..., /storage/v1/...) go to emulators of their own. The package
next to this file does it, one module per topic, each listing in its docstring the gaps it fills
or what it emulates:
  emulator/__init__.py              the environment moto reads: AWS-managed IAM policies, no
                                    MOTO_ACCOUNT_ID;
  emulator/phases.py                statuses that change over time (the phase machinery, the
                                    phases' model names, how long they last);
  emulator/ec2.py                   placement groups, CreateSecurityGroup's VPC check, NAT
                                    gateway phases;
  emulator/instance_types.py        the GPU and Trainium types' network cards, EFA, GPUs,
                                    Neuron devices and architectures (p6e-gb200 added), their
                                    us-west-2 offerings, and the network interfaces EC2 refuses;
  emulator/capacity.py              EC2 Capacity Blocks for ML (offerings, purchases, extensions,
                                    a clock per account) and capacity reservations, which moto
                                    lacks;
  emulator/autoscaling.py           the Auto Scaling group behind each EKS managed node group,
                                    its scheduled actions run on the account's clock;
  emulator/eks.py                   cluster, node group and add-on phases, the cluster security
                                    group, updates, add-ons, tags, node groups whose launch
                                    template's interfaces fail to launch (CREATE_FAILED);
  emulator/fsx.py                   FSx for Lustre file systems, data repository associations;
  emulator/efs.py                   EFS file system and mount target phases, UpdateFileSystem;
  emulator/iam.py                   ListInstanceProfileTags, an OIDC provider's client ids;
  emulator/cloudformation.py        stack phases, failures and rollbacks; requests (token
                                    retries, "No updates", template and parameter checks, tags);
  emulator/cloudformation_types.py  resource types: security groups and their rules, launch
                                    templates, placement groups, EKS node groups;
  emulator/kubernetes.py            a Kubernetes API server per emulated EKS or GKE cluster;
  emulator/pcs.py                   AWS Parallel Computing Service (moto has none): clusters,
                                    compute node groups, queues, checked against moto's EC2
                                    and IAM;
  emulator/bundles.py               a mirror of the Kubernetes bundles' release hosts;
  emulator/gcp.py                   what the Google APIs share: projects, error bodies,
                                    operations, requestId replay, names, labels, pages, enums;
  emulator/gcp_compute.py           Compute Engine: networks (RDMA network profiles too),
                                    subnetworks, firewalls, routers with Cloud NAT, resource
                                    policies, global, region and zone operations;
  emulator/gcp_reservations.py      calendar-mode future reservations and the reservations they
                                    deliver, on the project's clock;
  emulator/gcp_container.py         GKE: clusters, node pools (multi-network, GPUs, compact
                                    placement, stockouts), operations, one at a time per cluster;
  emulator/gcp_filestore.py         Filestore: instances by tier, long-running operations;
  emulator/gcs.py                   Cloud Storage: buckets, objects with generations and
                                    preconditions, media and multipart uploads, lists;
  emulator/compute_filter.py        Compute's list filters;
  emulator/aws_model.py             every AWS request held to botocore's model of its service,
                                    answered with the service's own validation error;
  emulator/google_model.py          every Google request held to its API's discovery document;
  emulator/harness.py               the middleware: accounts (Google: projects), request
                                    counter, faults, latency, operation seconds, the models'
                                    checks and the violations they and emulator defects record.

`--phase-seconds` (or POST /_forge/phases {"seconds": s}) sets how long every phase, and every
Google operation, lasts; 0 makes them immediate.

Usage: launcher.py [--port 0] [--phase-seconds 1.0] [--exit-with-stdin]
Prints `port=<port>` on stdout once listening, then serves until killed.
"""

import argparse
import logging
import os
import sys
import threading

# Importing a module applies its patches, in this order: later patches build on earlier ones.
# The package sets the environment moto reads before any of them imports moto.
import emulator.phases
import emulator.ec2
import emulator.instance_types
import emulator.capacity
import emulator.eks
import emulator.fsx
import emulator.efs
import emulator.iam
import emulator.cloudformation
import emulator.cloudformation_types
import emulator.harness
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--phase-seconds", type=float, default=1.0, help="how long pending/deleting phases last")
    parser.add_argument("--exit-with-stdin", action="store_true", help="exit when standard input closes (the test process that started it is gone)")
    args = parser.parse_args()
    emulator.phases.set_phase_seconds(args.phase_seconds)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = emulator.harness.Harness(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    if args.exit_with_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print(f"port={server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

"""Smoke test of the Auto Scaling group behind each EKS managed node group and of its scheduled
actions as the launcher serves them (emulator/autoscaling.py, emulator/eks.py): the group EKS
names `eks-<node group>-<id>`, with the node group's sizes, subnets and EKS's tags, deleted
with the node group; scheduled actions per group, held to the API's rules (an unknown group,
no size, contradicting sizes, a start in the past, an unknown action to delete); one-time
actions run by the account's clock (POST /_forge/clock), the node group and its Nodes
following its group, a failed one recorded as a failed scaling activity; calls counted by
action and faults in Auto Scaling's format; a node group on a
Capacity Block with Nodes only while the block is active, at most its instances; no request
outside botocore's model. Runs with the venv's boto3: `python -m unittest`."""

import base64
import datetime
import json
import ssl
import time
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .launched import Launched

UTC = datetime.timezone.utc
DEC_1 = datetime.datetime(2026, 12, 1, tzinfo=UTC)


def iso(when):
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


class NodegroupAutoScaling(Launched):
    def client(self, service, account):
        return boto3.client(service, endpoint_url=self.url, region_name="us-west-2", aws_access_key_id=account, aws_secret_access_key="x",
                            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def control(self, path, payload=None):
        data = json.dumps(payload).encode() if payload is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")) as r:
            return json.loads(r.read())

    def clock(self, account, **payload):
        return self.control(f"/_forge/clock?account={account}", payload)

    def wait_for(self, read, want, seconds=3.0):
        """Poll `read` until it returns `want` (phases last 0.4 s here)."""
        deadline = time.monotonic() + seconds
        while (value := read()) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(value, want)

    def error(self, call, **kwargs):
        with self.assertRaises(ClientError) as raised:
            call(**kwargs)
        return raised.exception.response["Error"]["Code"], raised.exception.response["Error"]["Message"]

    def nodes(self, eks, group):
        """The Nodes of node group `group` of cluster `c`, read from its API server over TLS."""
        cluster = eks.describe_cluster(name="c")["cluster"]
        context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificateAuthority"]["data"]).decode())
        request = urllib.request.Request(cluster["endpoint"] + f"/api/v1/nodes?labelSelector=eks.amazonaws.com/nodegroup%3D{group}",
                                         headers={"Authorization": "Bearer k8s-aws-v1.x"})
        with urllib.request.urlopen(request, context=context) as answer:
            return json.loads(answer.read())["items"]

    def cluster(self, account, zones="ab"):
        """An ACTIVE cluster `c` of the account over a subnet in each of `zones`, its clock at
        DEC_1; (ec2, eks, autoscaling, role, {zone: subnet})."""
        self.clock(account, now=iso(DEC_1))
        ec2, eks, autoscaling = self.client("ec2", account), self.client("eks", account), self.client("autoscaling", account)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        subnets = {z: ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-west-2{z}")["Subnet"]["SubnetId"] for i, z in enumerate(zones)}
        role = f"arn:aws:iam::{account}:role/eks"
        eks.create_cluster(name="c", version="1.31", roleArn=role, resourcesVpcConfig={"subnetIds": list(subnets.values())})
        self.wait_for(lambda: eks.describe_cluster(name="c")["cluster"]["status"], "ACTIVE")
        return ec2, eks, autoscaling, role, subnets

    def test_node_group_auto_scaling_group_and_scheduled_actions(self):
        account = "730000000001"
        ec2, eks, autoscaling, role, subnets = self.cluster(account)
        for name, desired in (("ng", 1), ("other", 0)):
            eks.create_nodegroup(clusterName="c", nodegroupName=name, nodeRole=role, subnets=list(subnets.values()),
                                 scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": desired}, instanceTypes=["m5.large"])
        nodegroup = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="ng")["nodegroup"]  # noqa: E731
        created = nodegroup()
        (asg_name,) = [g["name"] for g in created["resources"]["autoScalingGroups"]]
        other_asg = eks.describe_nodegroup(clusterName="c", nodegroupName="other")["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        self.assertEqual(asg_name, f"eks-ng-{created['nodegroupArn'].rsplit('/', 1)[1]}")
        group = lambda name=asg_name: autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]  # noqa: E731
        (described,) = group()
        self.assertEqual((described["MinSize"], described["MaxSize"], described["DesiredCapacity"], described["Instances"]), (0, 4, 1, []))
        self.assertEqual(set(described["VPCZoneIdentifier"].split(",")), set(subnets.values()))
        self.assertEqual({t["Key"]: t["Value"] for t in described["Tags"]},
                         {"eks:cluster-name": "c", "eks:nodegroup-name": "ng", "k8s.io/cluster-autoscaler/enabled": "true",
                          "k8s.io/cluster-autoscaler/c": "owned", "kubernetes.io/cluster/c": "owned"})
        self.assertIn(asg_name, [g["AutoScalingGroupName"] for g in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]])
        self.assertEqual(len(self.nodes(eks, "ng")), 1)

        # EKS's scaling changes are the group's.
        self.wait_for(lambda: nodegroup()["status"], "ACTIVE")
        eks.update_nodegroup_config(clusterName="c", nodegroupName="ng", scalingConfig={"minSize": 1, "desiredSize": 2})
        self.assertEqual([(g["MinSize"], g["MaxSize"], g["DesiredCapacity"]) for g in group()], [(1, 4, 2)])
        self.assertEqual(len(self.nodes(eks, "ng")), 2)

        # The API's rules.
        put = autoscaling.put_scheduled_update_group_action
        hour = datetime.timedelta(hours=1)
        self.assertEqual(self.error(put, AutoScalingGroupName=asg_name, ScheduledActionName="late", StartTime=DEC_1 - hour, DesiredCapacity=1),
                         ("ValidationError", "Given start time is in the past"))
        self.assertEqual(self.error(put, AutoScalingGroupName="nope", ScheduledActionName="start", StartTime=DEC_1 + hour, DesiredCapacity=1),
                         ("ValidationError", "AutoScalingGroup name not found - null"))
        self.assertEqual(self.error(put, AutoScalingGroupName=asg_name, ScheduledActionName="empty", StartTime=DEC_1 + hour)[0], "ValidationError")
        self.assertEqual(self.error(put, AutoScalingGroupName=asg_name, ScheduledActionName="odd", StartTime=DEC_1 + hour, MinSize=2, MaxSize=0, DesiredCapacity=0),
                         ("ValidationError", "Desired capacity must be greater than or equal to min size"))

        # Actions per group: both groups may have a `start`.
        put(AutoScalingGroupName=asg_name, ScheduledActionName="start", StartTime=DEC_1 + hour, DesiredCapacity=3)
        put(AutoScalingGroupName=asg_name, ScheduledActionName="stop", StartTime=DEC_1 + 3 * hour, MinSize=0, DesiredCapacity=0)
        put(AutoScalingGroupName=other_asg, ScheduledActionName="start", StartTime=DEC_1 + hour, DesiredCapacity=1)
        put(AutoScalingGroupName=asg_name, ScheduledActionName="start", MaxSize=3)  # changes what it gives, keeps the rest
        actions = lambda name=asg_name, **more: autoscaling.describe_scheduled_actions(AutoScalingGroupName=name, **more)["ScheduledUpdateGroupActions"]  # noqa: E731
        mine = {a["ScheduledActionName"]: a for a in actions()}
        self.assertEqual(set(mine), {"start", "stop"})
        self.assertEqual((mine["start"]["StartTime"].astimezone(UTC), mine["start"]["DesiredCapacity"], mine["start"]["MaxSize"]), (DEC_1 + hour, 3, 3))
        self.assertNotIn("MinSize", mine["start"])
        self.assertTrue(mine["start"]["ScheduledActionARN"].endswith(f":autoScalingGroupName/{asg_name}:scheduledActionName/start"), mine["start"])
        self.assertEqual([a["ScheduledActionName"] for a in actions(ScheduledActionNames=["stop", "unknown"])], ["stop"])
        self.assertEqual(sorted(a["AutoScalingGroupName"] for a in autoscaling.describe_scheduled_actions(ScheduledActionNames=["start"])["ScheduledUpdateGroupActions"]),
                         sorted([asg_name, other_asg]))
        self.assertEqual([a["ScheduledActionName"] for a in actions(EndTime=DEC_1 + 2 * hour)], ["start"])
        first = autoscaling.describe_scheduled_actions(AutoScalingGroupName=asg_name, MaxRecords=1)
        self.assertEqual(len(first["ScheduledUpdateGroupActions"]), 1)
        rest = autoscaling.describe_scheduled_actions(AutoScalingGroupName=asg_name, MaxRecords=1, NextToken=first["NextToken"])
        self.assertEqual({a["ScheduledActionName"] for a in first["ScheduledUpdateGroupActions"] + rest["ScheduledUpdateGroupActions"]}, {"start", "stop"})

        # Nothing runs before its time; the clock past `start` runs it, on each group.
        self.clock(account, advance_seconds=3599)
        self.assertEqual(group()[0]["DesiredCapacity"], 2)
        self.clock(account, advance_seconds=2)
        self.assertEqual([(g["MinSize"], g["MaxSize"], g["DesiredCapacity"]) for g in group()], [(1, 3, 3)])
        self.assertEqual(nodegroup()["scalingConfig"], {"minSize": 1, "maxSize": 3, "desiredSize": 3})
        self.assertEqual(len(self.nodes(eks, "ng")), 3)
        self.assertEqual([a["ScheduledActionName"] for a in actions()], ["stop"])
        self.assertEqual(actions(other_asg), [])
        self.assertEqual(group(other_asg)[0]["DesiredCapacity"], 1)
        self.assertEqual(len(self.nodes(eks, "other")), 1)
        (ran,) = autoscaling.describe_scaling_activities(AutoScalingGroupName=asg_name)["Activities"]
        self.assertEqual((ran["StatusCode"], ran["StartTime"].astimezone(UTC)), ("Successful", DEC_1 + hour))
        self.assertIn("changing the desired capacity from 2 to 3", ran["Cause"])

        # An action whose sizes the group cannot take fails: the group keeps its sizes.
        put(AutoScalingGroupName=asg_name, ScheduledActionName="too-many", StartTime=DEC_1 + 2 * hour, DesiredCapacity=9)
        self.clock(account, now=iso(DEC_1 + 2 * hour))
        self.assertEqual([(g["MinSize"], g["MaxSize"], g["DesiredCapacity"]) for g in group()], [(1, 3, 3)])
        self.assertEqual([a["ScheduledActionName"] for a in actions()], ["stop"])
        failed = autoscaling.describe_scaling_activities(AutoScalingGroupName=asg_name)["Activities"][0]
        self.assertEqual((failed["StatusCode"], failed["StatusMessage"]), ("Failed", "Desired capacity:9 must be between the specified min size:1 and max size:3"))
        self.assertEqual(len(autoscaling.describe_scaling_activities(AutoScalingGroupName=asg_name, Filters=[{"Name": "Status", "Values": ["Successful"]}])["Activities"]), 1)

        # Deleting: an unknown action is refused; the node group takes its group and actions.
        self.assertEqual(self.error(autoscaling.delete_scheduled_action, AutoScalingGroupName=asg_name, ScheduledActionName="start"),
                         ("ValidationError", "Scheduled action name not found"))
        put(AutoScalingGroupName=other_asg, ScheduledActionName="later", StartTime=DEC_1 + 5 * hour, DesiredCapacity=0)
        eks.delete_nodegroup(clusterName="c", nodegroupName="ng")
        self.assertEqual(group(), [])
        self.assertEqual(actions(), [])
        self.assertEqual(self.nodes(eks, "ng"), [])
        self.assertEqual([a["ScheduledActionName"] for a in actions(other_asg)], ["later"])
        self.assertEqual(autoscaling.describe_scaling_activities(AutoScalingGroupName=asg_name)["Activities"], [])
        self.assertEqual(len(autoscaling.describe_scaling_activities(AutoScalingGroupName=asg_name, IncludeDeletedGroups=True)["Activities"]), 2)
        self.assertEqual(self.error(put, AutoScalingGroupName=asg_name, ScheduledActionName="start", StartTime=DEC_1 + 5 * hour, DesiredCapacity=1)[0], "ValidationError")
        # Calls are counted by action, and faults answer in Auto Scaling's own format.
        calls = self.control(f"/_forge/calls?account={account}")
        self.assertEqual((calls["autoscaling:PutScheduledUpdateGroupAction"], calls["autoscaling:DeleteScheduledAction"]), (11, 1))
        self.control(f"/_forge/faults?account={account}", [{"match": "autoscaling:DescribeScheduledActions", "account": account}])
        try:
            self.assertEqual(self.error(autoscaling.describe_scheduled_actions)[0], "Throttling")
        finally:
            self.control(f"/_forge/faults?account={account}", [])
        self.assertEqual(self.control(f"/_forge/violations?account={account}"), [])
        self.assertEqual(self.control("/_forge/models")["autoscaling"]["protocol"], "query")

    def test_capacity_block_node_group(self):
        account = "730000000002"
        ec2, eks, autoscaling, role, subnets = self.cluster(account, zones="abcd")
        offering = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24)["CapacityBlockOfferings"][0]
        start, end = offering["StartDate"].astimezone(UTC), offering["EndDate"].astimezone(UTC)
        block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offering["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX")["CapacityReservation"]
        template = ec2.create_launch_template(LaunchTemplateName="cb", LaunchTemplateData={
            "InstanceType": "p5.48xlarge", "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": block["CapacityReservationId"]}}})["LaunchTemplate"]
        eks.create_nodegroup(clusterName="c", nodegroupName="gpu", nodeRole=role, subnets=[subnets[block["AvailabilityZone"][-1]]], capacityType="CAPACITY_BLOCK",
                             scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 0}, launchTemplate={"id": template["LaunchTemplateId"], "version": "1"})
        asg_name = eks.describe_nodegroup(clusterName="c", nodegroupName="gpu")["nodegroup"]["resources"]["autoScalingGroups"][0]["name"]
        (described,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[asg_name])["AutoScalingGroups"]
        self.assertEqual(described["LaunchTemplate"]["LaunchTemplateId"], template["LaunchTemplateId"])
        put = autoscaling.put_scheduled_update_group_action
        half_hour = datetime.timedelta(minutes=30)
        # Desired 2 before the block starts, 4 (more than the block holds) at its start, 0 half an
        # hour before its end, 2 again after it.
        put(AutoScalingGroupName=asg_name, ScheduledActionName="early", StartTime=start - 2 * half_hour, DesiredCapacity=2)
        put(AutoScalingGroupName=asg_name, ScheduledActionName="start", StartTime=start, DesiredCapacity=4)
        put(AutoScalingGroupName=asg_name, ScheduledActionName="stop", StartTime=end - half_hour, DesiredCapacity=0)
        put(AutoScalingGroupName=asg_name, ScheduledActionName="after", StartTime=end + half_hour, DesiredCapacity=2)
        desired = lambda: eks.describe_nodegroup(clusterName="c", nodegroupName="gpu")["nodegroup"]["scalingConfig"]["desiredSize"]  # noqa: E731

        self.clock(account, now=iso(start - half_hour))
        self.assertEqual((desired(), len(self.nodes(eks, "gpu"))), (2, 0))  # the block is not active yet
        self.clock(account, now=iso(start + datetime.timedelta(seconds=1)))
        nodes = self.nodes(eks, "gpu")
        self.assertEqual((desired(), len(nodes)), (4, 2))  # at most the block's instances
        self.assertEqual({n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}, {block["AvailabilityZone"]})
        self.clock(account, now=iso(end - half_hour))
        self.assertEqual((desired(), len(self.nodes(eks, "gpu"))), (0, 0))
        self.clock(account, now=iso(end + 2 * half_hour))
        self.assertEqual((desired(), len(self.nodes(eks, "gpu"))), (2, 0))  # the block expired
        self.assertEqual(autoscaling.describe_scheduled_actions(AutoScalingGroupName=asg_name)["ScheduledUpdateGroupActions"], [])
        self.assertEqual(self.control(f"/_forge/violations?account={account}"), [])

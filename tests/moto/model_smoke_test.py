"""Smoke test of the launcher's model checks (emulator/aws_model.py, wired in harness.py): a
request that breaks a rule of its service's botocore model answers that service's own
validation error in its protocol's format, valid calls through boto3 pass, and every violation,
and every 500 moto answers itself, is listed by GET /_forge/violations. Raw requests stand in for
what boto3 refuses to send; the middleware reads the account and service from the SigV4
credential scope only. `python -m unittest`."""

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from .launched import Launched


class Models(Launched):
    def client(self, service, account):
        return boto3.client(service, endpoint_url=self.url, region_name="us-west-2", aws_access_key_id=account, aws_secret_access_key="x",
                            config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))

    def raw(self, service, account, method, path, body=b"", headers=None):
        """`method path` as an SDK of `account` would send it to `service`: (status, headers, body)."""
        auth = f"AWS4-HMAC-SHA256 Credential={account}/20250101/us-west-2/{service}/aws4_request, SignedHeaders=host, Signature=0"
        request = urllib.request.Request(self.url + path, data=body or None, method=method, headers={"Authorization": auth, **(headers or {})})
        try:
            with urllib.request.urlopen(request) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def form(self, service, account, **params):
        body = urllib.parse.urlencode(params).encode()
        return self.raw(service, account, "POST", "/", body, {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})

    def violations(self, account=None):
        with urllib.request.urlopen(self.url + "/_forge/violations" + (f"?account={account}" if account else "")) as r:
            return json.loads(r.read())

    def error(self, call, **kwargs):
        with self.assertRaises(ClientError) as caught:
            call(**kwargs)
        response = caught.exception.response
        return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Message"]

    def test_ec2_answers_unknown_missing_and_invalid_parameters_one_at_a_time(self):
        account, version = "301000000001", "2016-11-15"
        status, _, body = self.form("ec2", account, Action="DescribeVpcs", Version=version, Bogus="1")
        self.assertEqual(status, 400)
        self.assertRegex(body, r"^<Response><Errors><Error><Code>UnknownParameter</Code><Message>The parameter Bogus is not recognized</Message>")
        status, _, body = self.form("ec2", account, Action="DeleteVpc", Version=version)
        self.assertIn("<Code>MissingParameter</Code><Message>The request must contain the parameter VpcId</Message>", body)
        status, _, body = self.form("ec2", account, Action="DescribeVpcs", Version=version, MaxResults="many")
        self.assertIn("<Code>InvalidParameterValue</Code><Message>Value (many) for parameter MaxResults is invalid.", body)
        status, _, body = self.form("ec2", account, Action="DescribeNothing", Version=version)
        self.assertEqual((status, re.search(r"<Code>(\w+)</Code>", body)[1]), (400, "InvalidAction"))
        # EC2's names: `Filter.N.Value.M` for the member Filters[].Values[].
        status, _, body = self.form("ec2", account, Action="DescribeVpcs", Version=version, **{"Filter.1.Name": "tag:k", "Filter.1.Value.1": "v"})
        self.assertEqual(status, 200, body)
        code, status, message = self.error(self.client("ec2", account).create_placement_group, GroupName="g", Strategy="bogus")
        self.assertEqual((code, status), ("InvalidParameterValue", 400))
        self.assertIn("Strategy", message)

    def test_query_services_answer_validation_error(self):
        account = "301000000002"
        status, _, body = self.form("iam", account, Action="CreateRole", Version="2010-05-08", RoleName="r")
        self.assertEqual(status, 400)
        self.assertIn("<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>1 validation error detected: "
                      "Value null at 'assumeRolePolicyDocument' failed to satisfy constraint: Member must not be null</Message>", body)
        iam = self.client("iam", account)
        code, status, message = self.error(iam.create_role, RoleName="bad name", AssumeRolePolicyDocument="{}")
        self.assertEqual((code, status), ("ValidationError", 400))
        self.assertIn("Value 'bad name' at 'roleName' failed to satisfy constraint: Member must satisfy regular expression pattern", message)
        code, _, message = self.error(iam.create_role, RoleName="r", AssumeRolePolicyDocument="{}", Tags=[{"Key": "k" * 129, "Value": "v"}])
        self.assertIn("at 'tags.1.member.key' failed to satisfy constraint: Member must have length less than or equal to 128", message)
        cloudformation = self.client("cloudformation", account)
        code, status, message = self.error(cloudformation.create_stack, StackName="s", TemplateBody="{}", Capabilities=["CAPABILITY_ALL"])
        self.assertEqual((code, status), ("ValidationError", 400))
        self.assertIn("Value 'CAPABILITY_ALL' at 'capabilities.1.member' failed to satisfy constraint: Member must satisfy enum value set", message)

    def test_json_services_answer_validation_exception(self):
        account = "301000000003"
        fsx = self.client("fsx", account)
        code, status, message = self.error(fsx.create_file_system, FileSystemType="LUSTRX", StorageCapacity=1200, SubnetIds=["subnet-12345678"])
        self.assertEqual((code, status), ("ValidationException", 400))
        self.assertIn("Value 'LUSTRX' at 'fileSystemType' failed to satisfy constraint: Member must satisfy enum value set: [WINDOWS, LUSTRE",
                      message)
        headers = {"X-Amz-Target": "AWSSimbaAPIService_v20180301.DescribeFileSystems", "Content-Type": "application/x-amz-json-1.1"}
        status, _, body = self.raw("fsx", account, "POST", "/", b'{"Bogus": 1}', headers)
        self.assertEqual((status, json.loads(body)["__type"]), (400, "ValidationException"))
        self.assertIn("at 'Bogus' failed to satisfy constraint: Member must be a parameter of DescribeFileSystems", body)
        headers["X-Amz-Target"] = "AWSSimbaAPIService_v20180301.DescribeNothing"
        status, _, body = self.raw("fsx", account, "POST", "/", b"{}", headers)
        self.assertEqual((status, json.loads(body)["__type"]), (400, "UnknownOperationException"))

    def test_rest_json_services_answer_their_own_error_in_its_header(self):
        account = "301000000004"
        eks = self.client("eks", account)
        vpc = {"subnetIds": ["subnet-1"]}
        code, status, message = self.error(eks.create_cluster, name="x" * 101, roleArn="arn:aws:iam::301000000004:role/r", resourcesVpcConfig=vpc)
        self.assertEqual((code, status), ("InvalidParameterException", 400))
        self.assertIn("at 'name' failed to satisfy constraint: Member must have length less than or equal to 100", message)
        code, _, message = self.error(eks.create_cluster, name="-bad", roleArn="arn:aws:iam::301000000004:role/r", resourcesVpcConfig=vpc)
        self.assertIn("Value '-bad' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: "
                      r"^[0-9A-Za-z][A-Za-z0-9\-_]*", message)
        status, headers, body = self.raw("eks", account, "GET", "/clusters/c/nothing/here/at/all")
        self.assertEqual((status, headers["x-amzn-ErrorType"]), (404, "UnknownOperationException"))
        # EFS has a ValidationException of its own, with EFS's ErrorCode and Message.
        status, headers, body = self.raw("elasticfilesystem", account, "GET", "/2015-02-01/file-systems?Bogus=1")
        self.assertEqual((status, headers["x-amzn-ErrorType"], json.loads(body)["ErrorCode"]), (400, "ValidationException", "ValidationException"))
        self.assertIn("at 'Bogus'", json.loads(body)["Message"])
        code, _, message = self.error(self.client("efs", account).create_file_system, CreationToken="t", PerformanceMode="fast")
        self.assertEqual(code, "ValidationException")
        self.assertIn("at 'performanceMode'", message)

    def test_s3_requests_are_matched_to_operations_and_their_headers_checked(self):
        account = "301000000005"
        s3 = self.client("s3", account)
        s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        code, status, message = self.error(s3.put_object, Bucket="models", Key="a/b", Body=b"x", ServerSideEncryption="bogus")
        self.assertEqual((code, status), ("InvalidArgument", 400))
        self.assertIn("at 'serverSideEncryption'", message)
        status, _, body = self.raw("s3", account, "PATCH", "/models/a")
        self.assertEqual((status, re.search(r"<Code>(\w+)</Code>", body)[1]), (405, "MethodNotAllowed"))

    def test_valid_calls_pass_in_every_protocol(self):
        account = "301000000006"
        ec2 = self.client("ec2", account)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [{"Key": "k", "Value": "v"}]}])
        vpc_id = vpc["Vpc"]["VpcId"]
        ec2.describe_vpcs(Filters=[{"Name": "tag:k", "Values": ["v"]}], VpcIds=[vpc_id])
        ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
        subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        iam = self.client("iam", account)
        iam.create_role(RoleName="AWSPCS-ok", Path="/", AssumeRolePolicyDocument="{}", Tags=[{"Key": "a", "Value": "b"}])
        iam.list_roles(MaxItems=10)
        self.client("cloudformation", account).describe_stacks()
        self.client("sts", account).get_caller_identity()
        self.client("fsx", account).describe_file_systems(MaxResults=5)
        eks = self.client("eks", account)
        eks.list_clusters(maxResults=10)
        eks.describe_addon_versions(kubernetesVersion="1.31", addonName="vpc-cni")
        efs = self.client("efs", account)
        fs = efs.create_file_system(CreationToken="ok", Encrypted=True, Tags=[{"Key": "a", "Value": "b"}])["FileSystemId"]
        efs.describe_mount_targets(FileSystemId=fs)
        s3 = self.client("s3", account)
        s3.create_bucket(Bucket="valid-calls", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        s3.put_bucket_versioning(Bucket="valid-calls", VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket="valid-calls", Key="state/a b.json", Body=b"{}", IfNoneMatch="*", ServerSideEncryption="AES256")
        s3.get_object(Bucket="valid-calls", Key="state/a b.json")
        s3.list_objects_v2(Bucket="valid-calls", Prefix="state/")
        s3.delete_object(Bucket="valid-calls", Key="state/a b.json")
        self.assertTrue(subnet.startswith("subnet-"))
        self.assertEqual(self.violations(account), [])

    def test_violations_are_listed_per_account(self):
        account, other = "301000000007", "301000000008"
        iam = self.client("iam", account)
        self.error(iam.create_role, RoleName="bad name", AssumeRolePolicyDocument="{}")
        self.client("iam", other).list_roles()
        [violation] = self.violations(account)
        self.assertEqual({k: violation[k] for k in ("account", "operation", "kind")},
                         {"account": account, "operation": "iam:CreateRole", "kind": "model"})
        self.assertRegex(violation["message"], r"^CreateRole: ValidationError: 1 validation error detected: Value 'bad name' at 'roleName'")
        self.assertEqual(self.violations(other), [])
        self.assertIn(violation, self.violations())

    def test_a_500_moto_answers_itself_is_an_emulator_defect(self):
        account = "301000000009"
        iam = self.client("iam", account)
        with self.assertRaises(ResponseParserError):  # moto 5.2.5 has no GenerateServiceLastAccessedDetails: an HTML 500
            iam.generate_service_last_accessed_details(Arn=f"arn:aws:iam::{account}:role/r")
        [defect] = self.violations(account)
        self.assertEqual((defect["operation"], defect["kind"]), ("iam:GenerateServiceLastAccessedDetails", "emulator defect"))
        self.assertIn("not been implemented", defect["message"])

    def test_injected_faults_are_not_violations(self):
        account = "301000000010"
        rule = json.dumps([{"account": account, "match": "ec2:*", "kind": "5xx"}]).encode()
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/_forge/faults?account={account}", data=rule, method="POST"))
        try:
            code, status, _ = self.error(self.client("ec2", account).describe_vpcs)
            self.assertEqual((code, status), ("InternalError", 500))
        finally:
            urllib.request.urlopen(urllib.request.Request(f"{self.url}/_forge/faults?account={account}", data=b"[]", method="POST"))
        self.assertEqual(self.violations(account), [])

    def test_google_requests_are_recorded_under_their_project(self):
        status, _, _ = self.raw("", "", "GET", "/compute/v1/projects/p-models/global/nothings")
        self.assertEqual(status, 404)
        [violation] = self.violations("p-models")
        self.assertEqual(violation["kind"], "model")

    def test_the_models_loaded_and_their_patterns_are_reported(self):
        self.client("iam", "301000000011").list_roles()
        with urllib.request.urlopen(self.url + "/_forge/models") as r:
            models = json.loads(r.read())
        self.assertEqual(models["iam"]["protocol"], "query")
        self.assertGreater(models["iam"]["patterns"], 30)
        self.assertEqual(models["iam"]["skipped_patterns"], [])  # \p{L}, \p{N}, \p{Z} read as \w, \d, \s

//! CloudFormation stacks: a failed stack names its failing resource; the node group example round
//! trips.

use super::*;

/// A CloudFormation stack whose second resource fails: a security group in a VPC that does
/// not exist.
const FAILING_TEMPLATE: &str = r#"
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  VpcId:
    Type: String
Resources:
  GoodGroup:
    Type: AWS::EC2::SecurityGroup
    Properties:
      GroupDescription: fine
      VpcId: !Ref VpcId
  BadGroup:
    Type: AWS::EC2::SecurityGroup
    DependsOn: GoodGroup
    Properties:
      GroupDescription: in no VPC
      VpcId: vpc-0000000000000dead
Outputs:
  GroupId:
    Value: !Ref GoodGroup
"#;

#[test]
fn a_failed_cloudformation_stack_names_the_failing_resource() {
    let aws = Aws::new();
    aws.write("template.yaml", FAILING_TEMPLATE);
    aws.write(
        "cfn.toml",
        r#"
[stack]
name = "cfn"

[aws]
region = "us-west-2"

[aws_vpc.main]
cidr_block = "10.0.0.0/16"

[aws_cloudformation_stack.groups]
name = "forge-groups"
template_file = "template.yaml"
parameters = { VpcId = "${aws_vpc.main.id}" }

[outputs]
group = "${aws_cloudformation_stack.groups.outputs.GroupId}"
"#,
    );
    let (code, stderr) = aws.forge(&["up", "cfn.toml", "--yes"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("`BadGroup` (AWS::EC2::SecurityGroup) CREATE_FAILED"), "{stderr}");
    assert!(stderr.contains("vpc-0000000000000dead"), "the cloud's reason: {stderr}");
    assert!(stderr.contains("ROLLBACK_COMPLETE"), "{stderr}");

    // The rolled-back stack is deleted, so fixing the template and running again succeeds.
    let cfn = aws.cloudformation();
    let live = runtime().block_on(cfn.describe_stacks().send()).unwrap();
    assert!(
        live.stacks()
            .iter()
            .all(|s| s.stack_status().map(aws_sdk_cloudformation::types::StackStatus::as_str) != Some("ROLLBACK_COMPLETE")),
        "{live:?}"
    );
    aws.write(
        "template.yaml",
        &FAILING_TEMPLATE.replace("VpcId: vpc-0000000000000dead", "VpcId: !Ref VpcId"),
    );
    aws.ok(&["up", "cfn.toml", "--yes"]);
    let out = aws.command(&["output", "cfn.toml", "group"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("sg-"));
    let (code, stderr) = aws.forge(&["plan", "cfn.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{stderr}");

    // A template edit is an in-place UpdateStack.
    aws.write(
        "template.yaml",
        &FAILING_TEMPLATE
            .replace("VpcId: vpc-0000000000000dead", "VpcId: !Ref VpcId")
            .replace("in no VPC", "now in the VPC"),
    );
    let stderr = aws.ok(&["up", "cfn.toml", "--yes"]);
    assert!(stderr.contains("~ template_file = (text of"), "{stderr}");
    assert_eq!(aws.calls().get("cloudformation:UpdateStack"), Some(&1));
    aws.ok(&["destroy", "cfn.toml", "--yes"]);
    let live = runtime().block_on(cfn.describe_stacks().send()).unwrap();
    assert!(live.stacks().is_empty(), "{live:?}");
}

#[test]
fn the_cloudformation_node_group_example_round_trips() {
    let aws = Aws::new();
    aws.write("nodegroup.yaml", include_str!("../../../examples/cfn-nodegroup/nodegroup.yaml"));
    aws.write("stack.toml", include_str!("../../../examples/cfn-nodegroup/stack.toml"));
    seed_stack_round_trip(&aws, "stack.toml", "bert-cfn-nodegroup", || {
        let out = aws.command(&["output", "stack.toml", "trn_nodegroup"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "trn");
        let group = runtime()
            .block_on(aws.eks().describe_nodegroup().cluster_name("bert-cfn").nodegroup_name("trn").send())
            .unwrap();
        let template = group.nodegroup().unwrap().launch_template().unwrap().id().unwrap().to_owned();
        let nics = runtime()
            .block_on(aws.ec2().describe_launch_template_versions().launch_template_id(&template).send())
            .unwrap();
        let data = nics.launch_template_versions()[0].launch_template_data().unwrap();
        assert_eq!(data.network_interfaces().len(), 8, "one EFA interface per trn1 network card");
    });
}

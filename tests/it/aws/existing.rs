//! `existing = …`: objects another tool made (here: the test, through the SDK) are read, fed to
//! the blocks that refer to them, never written, reported when they change or go, and only
//! forgotten on destroy.

use super::*;

const STACK: &str = include_str!("../../../examples/existing-network.toml");

/// The calls that change an existing VPC or role, none of which forge may make on them.
const WRITES_TO_READ_OBJECTS: &[&str] = &[
    "ec2:CreateTags",
    "ec2:DeleteTags",
    "ec2:ModifyVpcAttribute",
    "ec2:DeleteVpc",
    "iam:TagRole",
    "iam:UntagRole",
    "iam:UpdateRole",
    "iam:UpdateAssumeRolePolicy",
    "iam:AttachRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePolicy",
    "iam:DeleteRolePolicy",
    "iam:DeleteRole",
];

/// A VPC and a role as another tool makes them: a VPC tagged `Name = shared` and `team = ml`,
/// a role trusted by EC2. Returns the VPC's id.
fn made_elsewhere(aws: &Aws, cidr: &str, name: &str) -> String {
    let ec2 = aws.ec2();
    let tags = aws_sdk_ec2::types::TagSpecification::builder()
        .resource_type(aws_sdk_ec2::types::ResourceType::Vpc)
        .tags(aws_sdk_ec2::types::Tag::builder().key("Name").value(name).build())
        .tags(aws_sdk_ec2::types::Tag::builder().key("team").value("ml").build())
        .build();
    let vpc = runtime()
        .block_on(ec2.create_vpc().cidr_block(cidr).tag_specifications(tags).send())
        .unwrap();
    vpc.vpc().unwrap().vpc_id().unwrap().to_owned()
}

fn make_role(aws: &Aws) -> String {
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let role = runtime()
        .block_on(
            aws.iam()
                .create_role()
                .role_name("eks-node-role")
                .assume_role_policy_document(trust)
                .send(),
        )
        .unwrap();
    role.role().unwrap().arn().to_owned()
}

fn vpc_tags(aws: &Aws, id: &str) -> Vec<(String, String)> {
    let out = runtime().block_on(aws.ec2().describe_vpcs().vpc_ids(id).send()).unwrap();
    let mut tags: Vec<(String, String)> = out.vpcs()[0]
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_owned(), t.value().unwrap().to_owned()))
        .collect();
    tags.sort();
    tags
}

#[test]
fn existing_vpc_and_role_are_read_used_and_never_written() {
    let aws = Aws::new();
    let vpc = made_elsewhere(&aws, "10.0.0.0/16", "shared");
    let role_arn = make_role(&aws);
    let tags_before = vpc_tags(&aws, &vpc);
    aws.write("net.toml", STACK);
    let var = format!("vpc={vpc}");

    // The plan lists the reads with what they found, and plans only the stack's own objects.
    let plan = aws.ok(&["plan", "net.toml", "--var", &var]);
    assert!(plan.contains(&format!("<= aws_vpc.shared (aws_vpc, {vpc})")), "{plan}");
    assert!(plan.contains("<= aws_iam_role.nodes (aws_iam_role, eks-node-role)"), "{plan}");
    assert!(plan.contains("Plan: 3 to add, 0 to change, 0 to replace, 0 to destroy."), "{plan}");
    assert!(
        plan.contains("+ tags = { Name = \"gpu-shared\" }"),
        "the VPC's tag is known at plan time: {plan}"
    );

    aws.calls();
    let up = aws.ok(&["up", "net.toml", "--var", &var, "--yes"]);
    let calls = aws.calls();
    let writes: Vec<&&str> = WRITES_TO_READ_OBJECTS.iter().filter(|c| calls.contains_key(**c)).collect();
    assert!(writes.is_empty(), "forge wrote to a read object: {writes:?} in {calls:?}");
    assert!(up.contains("vpc_cidr = \"10.0.0.0/16\""), "{up}");
    assert!(up.contains(&format!("role_arn = \"{role_arn}\"")), "{up}");
    assert_eq!(vpc_tags(&aws, &vpc), tags_before, "the VPC carries no forge tag");
    let subnets = runtime()
        .block_on(aws.ec2().describe_subnets().filters(stack_filter("existing-network")).send())
        .unwrap();
    assert_eq!(subnets.subnets().len(), 1);
    assert_eq!(
        subnets.subnets()[0].vpc_id(),
        Some(vpc.as_str()),
        "the subnet is in the existing VPC"
    );
    let profile = runtime()
        .block_on(aws.iam().get_instance_profile().instance_profile_name("gpu-nodes").send())
        .unwrap();
    assert_eq!(profile.instance_profile().unwrap().roles()[0].role_name(), "eks-node-role");
    let ids = aws.ids("net.toml");
    assert_eq!(ids.get("aws_vpc.shared"), Some(&vpc), "{ids:?}");

    // No changes the second time, and not one mutating call: the two reads cost a
    // DescribeVpcs and a GetRole beside the refresh's one read per kind.
    aws.calls();
    let (code, out) = aws.forge(&["plan", "net.toml", "--var", &var, "--detailed-exitcode"]);
    assert_eq!(code, 0, "{out}");
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty());
    assert_eq!(calls.get("iam:GetRole"), Some(&1), "{calls:?}");
    assert_eq!(
        calls.get("ec2:DescribeVpcs"),
        Some(&1),
        "the look-up; no refresh of a kind only read: {calls:?}"
    );
    assert_eq!(calls.get("iam:ListRoles"), None, "{calls:?}");
    assert_eq!(calls.values().sum::<u64>(), 6, "{calls:?}");

    // A used attribute of the VPC changes outside forge: drift says so (the VPC is not changed
    // back), and `up` passes the new value on to the subnet's tag.
    let rename = aws_sdk_ec2::types::Tag::builder().key("Name").value("shared-2").build();
    runtime()
        .block_on(aws.ec2().create_tags().resources(&vpc).tags(rename).send())
        .unwrap();
    let (code, report) = aws.drift(&["net.toml", "--var", &var]);
    assert_eq!(code, 2, "{report:#}");
    let changed = &report["stacks"][0]["read_changed"][0];
    assert_eq!(changed["address"], "aws_vpc.shared", "{report:#}");
    assert_eq!(changed["attributes"][0]["attribute"], "tags.Name");
    assert_eq!(changed["attributes"][0]["applied"], "shared");
    assert_eq!(changed["attributes"][0]["live"], "shared-2");
    aws.calls();
    let up = aws.ok(&["up", "net.toml", "--var", &var, "--yes"]);
    assert!(up.contains("tags.Name = \"gpu-shared\" -> \"gpu-shared-2\""), "{up}");
    let calls = aws.calls();
    assert_eq!(mutating(&calls), ["ec2:CreateTags"], "one tag on the subnet: {calls:?}");
    let (code, report) = aws.drift(&["net.toml", "--var", &var]);
    assert_eq!(code, 0, "the new value is recorded: {report:#}");

    // Destroy removes what forge made and forgets what it read.
    let tags_before = vpc_tags(&aws, &vpc);
    let out = aws.ok(&["destroy", "net.toml", "--var", &var, "--yes"]);
    assert!(out.contains("- aws_vpc.shared (read only: no call)"), "{out}");
    let calls = aws.calls();
    let writes: Vec<&&str> = WRITES_TO_READ_OBJECTS.iter().filter(|c| calls.contains_key(**c)).collect();
    assert!(writes.is_empty(), "destroy wrote to a read object: {writes:?} in {calls:?}");
    assert_eq!(vpc_tags(&aws, &vpc), tags_before);
    runtime().block_on(aws.iam().get_role().role_name("eks-node-role").send()).unwrap();
    assert!(aws.ids("net.toml").is_empty());
}

#[test]
fn existing_must_match_exactly_one_object() {
    let aws = Aws::new();
    let first = made_elsewhere(&aws, "10.1.0.0/16", "one");
    let second = made_elsewhere(&aws, "10.2.0.0/16", "two");
    let stack = |existing: &str| {
        format!(
            "[stack]\nname = \"pick\"\n[aws]\nregion = \"us-west-2\"\n[aws_vpc.shared]\nexisting = {existing}\n[outputs]\ncidr = \"${{aws_vpc.shared.cidr_block}}\"\n"
        )
    };
    let flat = |text: &str| text.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");

    // By tags: both VPCs carry `team = ml`, so the read names both.
    aws.write("pick.toml", &stack("{ tags = { team = \"ml\" } }"));
    let (code, err) = aws.forge(&["plan", "pick.toml"]);
    assert_eq!(code, 1, "{err}");
    let err = flat(&err);
    assert!(err.contains("2 `aws_vpc` objects match the tags { team = \"ml\" }"), "{err}");
    let unbroken = err.replace(' ', "");
    assert!(unbroken.contains(&first) && unbroken.contains(&second), "{err}");
    assert!(err.contains("pick.toml:6"), "the error points at `existing`: {err}");

    // One tag more narrows it to one.
    aws.write("pick.toml", &stack("{ tags = { team = \"ml\", Name = \"two\" } }"));
    let out = aws.ok(&["up", "pick.toml", "--yes"]);
    assert!(out.contains("cidr = \"10.2.0.0/16\""), "{out}");

    // Nothing matches: an error naming the block, before anything is planned.
    aws.write("pick.toml", &stack("\"vpc-0000000000000000f\""));
    let (code, err) = aws.forge(&["plan", "pick.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        flat(&err).contains("`aws_vpc.shared`: no `aws_vpc` matches `vpc-0000000000000000f`"),
        "{err}"
    );

    // The VPC it read is deleted outside forge: drift reports it, and destroy only forgets it.
    aws.write("pick.toml", &stack(&format!("\"{second}\"")));
    aws.ok(&["up", "pick.toml", "--yes"]);
    runtime().block_on(aws.ec2().delete_vpc().vpc_id(&second).send()).unwrap();
    let (code, report) = aws.drift(&["pick.toml"]);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["stacks"][0]["read_gone"][0]["id"], second.as_str(), "{report:#}");
    aws.calls();
    aws.ok(&["destroy", "pick.toml", "--yes"]);
    assert!(mutating(&aws.calls()).is_empty());
    assert!(aws.ids("pick.toml").is_empty());

    // A VPC forge made cannot turn into a read one, at its address or at another, while forge
    // still holds it: the plan would leave it unmanaged, or delete what the stack reads.
    let own = "[stack]\nname = \"pick\"\n[aws]\nregion = \"us-west-2\"\n[aws_vpc.mine]\ncidr_block = \"10.3.0.0/16\"\n";
    aws.write("pick.toml", own);
    aws.ok(&["up", "pick.toml", "--yes"]);
    let mine = aws.ids("pick.toml")["aws_vpc.mine"].clone();
    aws.write(
        "pick.toml",
        &own.replace("cidr_block = \"10.3.0.0/16\"", &format!("existing = \"{mine}\"")),
    );
    let (code, err) = aws.forge(&["plan", "pick.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        flat(&err).contains(&format!("`aws_vpc.mine` is recorded as forge's own aws_vpc ({mine})")),
        "{err}"
    );
    aws.write("pick.toml", &stack(&format!("\"{mine}\"")));
    let (code, err) = aws.forge(&["plan", "pick.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        flat(&err).contains(&format!(
            "`aws_vpc.shared` reads {mine}, which forge made as `aws_vpc.mine` and this plan would delete"
        )),
        "{err}"
    );
    assert!(flat(&err).contains("forge state rm aws_vpc.mine"), "{err}");
}

/// Every kind forge imports takes `existing` by the id `forge import` takes: here a customer
/// managed policy, by ARN, attached to a role forge makes, and left in place by destroy.
#[test]
fn an_existing_policy_is_read_by_arn_and_attached_to_a_role_forge_makes() {
    let aws = Aws::new();
    let document = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;
    let policy = runtime()
        .block_on(aws.iam().create_policy().policy_name("team-read").policy_document(document).send())
        .unwrap();
    let arn = policy.policy().unwrap().arn().unwrap().to_owned();
    aws.write(
        "uses.toml",
        &format!(
            r#"
[stack]
name = "uses"

[aws]
region = "us-west-2"

[aws_iam_policy.shared]
existing = "{arn}"

[aws_iam_role.reader]
name = "uses-team-read"
assume_role_policy = {{ Version = "2012-10-17", Statement = [{{ Effect = "Allow", Principal = {{ Service = "ec2.amazonaws.com" }}, Action = "sts:AssumeRole" }}] }}
managed_policy_arns = ["${{aws_iam_policy.shared.arn}}"]
"#
        ),
    );
    let out = aws.ok(&["up", "uses.toml", "--yes"]);
    assert!(out.contains(&format!("<= aws_iam_policy.shared (aws_iam_policy, {arn})")), "{out}");
    let attached = runtime()
        .block_on(aws.iam().list_attached_role_policies().role_name("uses-team-read").send())
        .unwrap();
    assert_eq!(attached.attached_policies()[0].policy_arn(), Some(arn.as_str()));
    let tags = runtime().block_on(aws.iam().list_policy_tags().policy_arn(&arn).send()).unwrap();
    assert!(tags.tags().is_empty(), "a read leaves no mark: {tags:?}");

    aws.ok(&["destroy", "uses.toml", "--yes"]);
    runtime()
        .block_on(aws.iam().get_policy().policy_arn(&arn).send())
        .expect("the policy stays");
}

//! `forge import`: objects another tool made become the stack's own — read, held to their
//! blocks, marked, recorded — and the next plan shows only the stack's differences.

use super::*;

const STACK: &str = r#"
[stack]
name = "adopt"

[aws]
region = "us-west-2"

[aws_vpc.main]
cidr_block = "10.5.0.0/16"
enable_dns_hostnames = true
tags = { Name = "main", team = "ml" }

[aws_security_group.efa]
name = "efa"
description = "EFA"
vpc_id = "${aws_vpc.main.id}"
ingress = [{ protocol = "-1", self = true }]
egress = [{ protocol = "-1", self = true }]
"#;

/// A VPC and a security group in it, as another tool makes them: (VPC id, group id).
fn made_elsewhere(aws: &Aws, cidr: &str) -> (String, String) {
    let ec2 = aws.ec2();
    runtime().block_on(async {
        let tags = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::Vpc)
            .tags(aws_sdk_ec2::types::Tag::builder().key("Name").value("legacy").build())
            .build();
        let vpc = ec2.create_vpc().cidr_block(cidr).tag_specifications(tags).send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_owned();
        let group = ec2
            .create_security_group()
            .group_name("efa")
            .description("EFA")
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap();
        (vpc, group.group_id().unwrap().to_owned())
    })
}

fn tags_of(aws: &Aws, vpc: &str) -> BTreeMap<String, String> {
    let out = runtime().block_on(aws.ec2().describe_vpcs().vpc_ids(vpc).send()).unwrap();
    out.vpcs()[0]
        .tags()
        .iter()
        .map(|t| (t.key().unwrap().to_owned(), t.value().unwrap().to_owned()))
        .collect()
}

#[test]
fn an_imported_vpc_and_security_group_are_marked_recorded_and_planned_to_the_stack() {
    let aws = Aws::new();
    let (vpc, group) = made_elsewhere(&aws, "10.5.0.0/16");
    aws.write("adopt.toml", STACK);

    // A dry run reads and plans, and writes nothing.
    aws.calls();
    let out = aws.ok(&["import", "adopt.toml", "aws_vpc.main", &vpc, "--dry-run"]);
    assert!(
        out.contains(&format!("Would mark aws_vpc `{vpc}` as forge's `aws_vpc.main`")),
        "{out}"
    );
    assert!(
        out.contains("~ aws_vpc.main (aws_vpc) — imported: brought to the block's values"),
        "{out}"
    );
    assert!(mutating(&aws.calls()).is_empty());
    assert!(aws.ids("adopt.toml").is_empty());
    assert!(!tags_of(&aws, &vpc).contains_key("forge:stack"));

    let out = aws.ok(&["import", "adopt.toml", "aws_vpc.main", &vpc]);
    assert!(out.contains(&format!("Imported aws_vpc `{vpc}` as `aws_vpc.main`")), "{out}");
    assert_eq!(mutating(&aws.calls()), ["ec2:CreateTags"], "the mark, and nothing else");
    let tags = tags_of(&aws, &vpc);
    assert_eq!(tags.get("forge:stack").map(String::as_str), Some("adopt"));
    assert_eq!(tags.get("forge:address").map(String::as_str), Some("aws_vpc.main"));
    assert!(tags.contains_key("forge:token"));
    aws.ok(&["import", "adopt.toml", "aws_security_group.efa", &group]);
    let ids = aws.ids("adopt.toml");
    assert_eq!(ids.get("aws_vpc.main"), Some(&vpc));
    assert_eq!(ids.get("aws_security_group.efa"), Some(&group));

    // The next plan makes nothing: it brings the two from what they are to what the blocks
    // set (DNS hostnames, tags; the EFA rules instead of the default egress), and no more.
    let (code, plan) = aws.forge(&["plan", "adopt.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2, "{plan}");
    assert!(plan.contains("Plan: 0 to add, 2 to change, 0 to replace, 0 to destroy."), "{plan}");
    assert!(plan.contains("~ tags.Name = \"legacy\" -> \"main\""), "{plan}");
    assert!(plan.contains("~ enable_dns_hostnames = false -> true"), "{plan}");
    assert!(plan.contains("cidr_blocks = [\"0.0.0.0/0\"]"), "the default egress goes: {plan}");
    assert!(!plan.contains("changed outside forge"), "{plan}");
    aws.ok(&["up", "adopt.toml", "--yes"]);
    assert_eq!(tags_of(&aws, &vpc).get("Name").map(String::as_str), Some("main"));
    let dns = runtime()
        .block_on(
            aws.ec2()
                .describe_vpc_attribute()
                .vpc_id(&vpc)
                .attribute(aws_sdk_ec2::types::VpcAttributeName::EnableDnsHostnames)
                .send(),
        )
        .unwrap();
    assert_eq!(
        dns.enable_dns_hostnames()
            .and_then(aws_sdk_ec2::types::AttributeBooleanValue::value),
        Some(true)
    );
    let group_now = runtime()
        .block_on(aws.ec2().describe_security_groups().group_ids(&group).send())
        .unwrap();
    let egress = group_now.security_groups()[0].ip_permissions_egress();
    assert!(
        egress.iter().all(|p| p.ip_ranges().is_empty()),
        "the default egress was revoked: {egress:?}"
    );
    let (code, plan) = aws.forge(&["plan", "adopt.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "{plan}");

    // Another stack cannot take it: the refusal names the owner.
    aws.write("other.toml", &STACK.replace("name = \"adopt\"", "name = \"other\""));
    let (code, err) = aws.forge(&["import", "other.toml", "aws_vpc.main", &vpc]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("`{vpc}` belongs to the forge stack `adopt` (as `aws_vpc.main`)")),
        "{err}"
    );
    assert!(aws.ids("other.toml").is_empty());
}

#[test]
fn an_object_that_is_not_what_the_block_describes_is_refused() {
    let aws = Aws::new();
    let (vpc, _) = made_elsewhere(&aws, "10.6.0.0/16");
    aws.write("adopt.toml", STACK);
    aws.calls();
    let (code, err) = aws.forge(&["import", "adopt.toml", "aws_vpc.main", &vpc]);
    assert_eq!(code, 1, "{err}");
    let err = err.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        err.contains(&format!(
            "`{vpc}` is not what `aws_vpc.main` describes, and cidr_block cannot change in place"
        )),
        "{err}"
    );
    assert!(err.contains("cidr_block: \"10.5.0.0/16\" -> \"10.6.0.0/16\""), "{err}");
    assert!(mutating(&aws.calls()).is_empty(), "nothing marked");
    assert!(aws.ids("adopt.toml").is_empty());

    // Nor is an object that is not there, or a kind forge does not import.
    let (code, err) = aws.forge(&["import", "adopt.toml", "aws_vpc.main", "vpc-0000000000000000f"]);
    assert_eq!(code, 1);
    assert!(err.contains("there is no aws_vpc `vpc-0000000000000000f`"), "{err}");
}

/// `[[import]]` entries: the plan shows them and starts from the objects as they are, `up`
/// marks and records them before the changes, and once recorded they are done.
#[test]
fn import_entries_in_the_stack_are_planned_and_performed_by_up() {
    let aws = Aws::new();
    let (vpc, group) = made_elsewhere(&aws, "10.5.0.0/16");
    let stack = format!(
        "{STACK}\n[[import]]\nto = \"aws_vpc.main\"\nid = \"{vpc}\"\n\n[[import]]\nto = \"aws_security_group.efa\"\nid = \"${{var.group}}\"\n\n[vars]\ngroup = \"{group}\"\n"
    );
    aws.write("adopt.toml", &stack);
    aws.calls();
    let (code, plan) = aws.forge(&["plan", "adopt.toml", "--detailed-exitcode"]);
    assert_eq!(code, 2, "{plan}");
    assert!(plan.contains(&format!("<= import aws_vpc.main (aws_vpc, {vpc})")), "{plan}");
    assert!(
        plan.contains(&format!("<= import aws_security_group.efa (aws_security_group, {group})")),
        "{plan}"
    );
    assert!(
        plan.contains("Plan: 2 to import, 0 to add, 2 to change, 0 to replace, 0 to destroy."),
        "{plan}"
    );
    assert!(mutating(&aws.calls()).is_empty(), "a plan marks nothing");
    // Drift names them as imports to come, pending, not drift.
    let out = aws.command(&["drift", "adopt.toml"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains(&format!("<= import aws_vpc.main (aws_vpc, {vpc})")), "{text}");
    let (_, report) = aws.drift(&["adopt.toml"]);
    let pending = report["stacks"][0]["pending"].as_array().unwrap();
    assert!(
        pending
            .iter()
            .any(|p| p["address"] == "aws_security_group.efa" && p["import"] == group.as_str()),
        "{report}"
    );

    aws.ok(&["up", "adopt.toml", "--yes"]);
    let calls = aws.calls();
    assert!(
        !calls.contains_key("ec2:CreateVpc") && !calls.contains_key("ec2:CreateSecurityGroup"),
        "{calls:?}"
    );
    let ids = aws.ids("adopt.toml");
    assert_eq!(ids.get("aws_vpc.main"), Some(&vpc));
    assert_eq!(ids.get("aws_security_group.efa"), Some(&group));
    assert_eq!(tags_of(&aws, &vpc).get("forge:address").map(String::as_str), Some("aws_vpc.main"));
    assert_eq!(tags_of(&aws, &vpc).get("Name").map(String::as_str), Some("main"));
    let (code, plan) = aws.forge(&["plan", "adopt.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "done once recorded: {plan}");

    // An entry into a block of a kind forge does not import is a load error at the entry.
    aws.write(
        "bad.toml",
        "[stack]\nname = \"bad\"\n[null.a]\n[[import]]\nto = \"null.a\"\nid = \"x\"\n",
    );
    let (code, err) = aws.forge(&["validate", "bad.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("forge cannot import a `null` yet"), "{err}");
}

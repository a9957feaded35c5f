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

/// Objects of every other kind forge imports, as another tool makes them: each is imported
/// into a block that describes it, marked with that kind's own tagging call, and the plan
/// after them all has nothing to do — each kind reads back every attribute its block sets.
#[test]
fn every_importable_kind_is_read_marked_and_then_planned_to_nothing() {
    let aws = Aws::new();
    let (vpc, _) = made_elsewhere(&aws, "10.6.0.0/16");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let inline = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#;
    let ec2 = aws.ec2();
    let made = runtime().block_on(async {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block("10.6.0.0/20")
            .availability_zone("us-west-2a")
            .send()
            .await
            .unwrap();
        let subnet = subnet.subnet().unwrap().subnet_id().unwrap().to_owned();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_owned();
        ec2.attach_internet_gateway()
            .vpc_id(&vpc)
            .internet_gateway_id(&igw)
            .send()
            .await
            .unwrap();
        let eip = ec2
            .allocate_address()
            .domain(aws_sdk_ec2::types::DomainType::Vpc)
            .send()
            .await
            .unwrap();
        let eip = eip.allocation_id().unwrap().to_owned();
        let nat = ec2
            .create_nat_gateway()
            .subnet_id(&subnet)
            .allocation_id(&eip)
            .send()
            .await
            .unwrap();
        let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_owned();
        let table = ec2.create_route_table().vpc_id(&vpc).send().await.unwrap();
        let table = table.route_table().unwrap().route_table_id().unwrap().to_owned();
        ec2.create_route()
            .route_table_id(&table)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await
            .unwrap();
        ec2.associate_route_table()
            .route_table_id(&table)
            .subnet_id(&subnet)
            .send()
            .await
            .unwrap();
        ec2.create_placement_group()
            .group_name("legacy-efa")
            .strategy(aws_sdk_ec2::types::PlacementStrategy::Cluster)
            .send()
            .await
            .unwrap();
        let iam = aws.iam();
        let role = iam
            .create_role()
            .role_name("legacy-cluster")
            .assume_role_policy_document(trust)
            .send()
            .await
            .unwrap();
        let role = role.role().unwrap().arn().to_owned();
        iam.attach_role_policy()
            .role_name("legacy-cluster")
            .policy_arn("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")
            .send()
            .await
            .unwrap();
        iam.put_role_policy()
            .role_name("legacy-cluster")
            .policy_name("read")
            .policy_document(inline)
            .send()
            .await
            .unwrap();
        let eks = aws.eks();
        let vpc_config = aws_sdk_eks::types::VpcConfigRequest::builder().subnet_ids(&subnet).build();
        eks.create_cluster()
            .name("legacy")
            .role_arn(&role)
            .version("1.31")
            .resources_vpc_config(vpc_config)
            .access_config(
                aws_sdk_eks::types::CreateAccessConfigRequest::builder()
                    .authentication_mode(aws_sdk_eks::types::AuthenticationMode::ApiAndConfigMap)
                    .build(),
            )
            .logging(
                aws_sdk_eks::types::Logging::builder()
                    .cluster_logging(
                        aws_sdk_eks::types::LogSetup::builder()
                            .types(aws_sdk_eks::types::LogType::Api)
                            .enabled(true)
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await
            .unwrap();
        while eks
            .describe_cluster()
            .name("legacy")
            .send()
            .await
            .unwrap()
            .cluster()
            .unwrap()
            .status()
            != Some(&aws_sdk_eks::types::ClusterStatus::Active)
        {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        eks.create_addon()
            .cluster_name("legacy")
            .addon_name("vpc-cni")
            .send()
            .await
            .unwrap();
        eks.create_access_entry()
            .cluster_name("legacy")
            .principal_arn(&role)
            .send()
            .await
            .unwrap();
        eks.associate_access_policy()
            .cluster_name("legacy")
            .principal_arn(&role)
            .policy_arn("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy")
            .access_scope(
                aws_sdk_eks::types::AccessScope::builder()
                    .r#type(aws_sdk_eks::types::AccessScopeType::Cluster)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let issuer = crate::support::oidc_issuer(&eks, "legacy").await;
        let oidc = iam
            .create_open_id_connect_provider()
            .url(&issuer)
            .client_id_list("sts.amazonaws.com")
            .send()
            .await
            .unwrap();
        let oidc = oidc.open_id_connect_provider_arn().unwrap().to_owned();
        let scaling = aws_sdk_eks::types::NodegroupScalingConfig::builder()
            .min_size(1)
            .max_size(2)
            .desired_size(1)
            .build();
        eks.create_nodegroup()
            .cluster_name("legacy")
            .nodegroup_name("cpu")
            .node_role(&role)
            .subnets(&subnet)
            .instance_types("c5.2xlarge")
            .scaling_config(scaling)
            .labels("pool", "cpu")
            .send()
            .await
            .unwrap();
        let fs = aws
            .fsx()
            .create_file_system()
            .file_system_type(aws_sdk_fsx::types::FileSystemType::Lustre)
            .storage_capacity(1200)
            .subnet_ids(&subnet)
            .lustre_configuration(
                aws_sdk_fsx::types::CreateFileSystemLustreConfiguration::builder()
                    .deployment_type(aws_sdk_fsx::types::LustreDeploymentType::Persistent2)
                    .per_unit_storage_throughput(250)
                    .data_compression_type(aws_sdk_fsx::types::DataCompressionType::Lz4)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let fs = fs.file_system().unwrap().file_system_id().unwrap().to_owned();
        let policy = iam
            .create_policy()
            .policy_name("legacy-read")
            .policy_document(inline)
            .send()
            .await
            .unwrap();
        let policy = policy.policy().unwrap().arn().unwrap().to_owned();
        iam.create_instance_profile()
            .instance_profile_name("legacy-nodes")
            .send()
            .await
            .unwrap();
        iam.add_role_to_instance_profile()
            .instance_profile_name("legacy-nodes")
            .role_name("legacy-cluster")
            .send()
            .await
            .unwrap();
        let efs = aws_sdk_efs::Client::new(&aws.sdk_config());
        let home = efs
            .create_file_system()
            .creation_token("by-hand")
            .encrypted(true)
            .send()
            .await
            .unwrap();
        let home = home.file_system_id().to_owned();
        BTreeMap::from([
            ("issuer", issuer),
            ("oidc", oidc),
            ("policy", policy),
            ("home", home),
            ("subnet", subnet),
            ("igw", igw),
            ("eip", eip),
            ("nat", nat),
            ("table", table),
            ("role", role),
            ("fs", fs),
        ])
    });
    let stack = format!(
        r#"
[stack]
name = "adopt-all"

[aws]
region = "us-west-2"

[aws_internet_gateway.igw]
vpc_id = "{vpc}"

[aws_eip.nat]

[aws_nat_gateway.nat]
subnet_id = "{subnet}"
allocation_id = "${{aws_eip.nat.id}}"

[aws_route_table.public]
vpc_id = "{vpc}"
routes = [{{ cidr_block = "0.0.0.0/0", gateway_id = "${{aws_internet_gateway.igw.id}}" }}]
subnet_ids = ["{subnet}"]

[aws_placement_group.efa]
name = "legacy-efa"
strategy = "cluster"

[aws_iam_role.cluster]
name = "legacy-cluster"
assume_role_policy = {{ Version = "2012-10-17", Statement = [{{ Effect = "Allow", Principal = {{ Service = "eks.amazonaws.com" }}, Action = "sts:AssumeRole" }}] }}
managed_policy_arns = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]
inline_policies = {{ read = {{ Version = "2012-10-17", Statement = [{{ Effect = "Allow", Action = "s3:GetObject", Resource = "*" }}] }} }}

[aws_eks_cluster.main]
name = "legacy"
role_arn = "${{aws_iam_role.cluster.arn}}"
version = "1.31"
subnet_ids = ["{subnet}"]
logging = ["api"]

[aws_eks_nodegroup.cpu]
cluster_name = "${{aws_eks_cluster.main.name}}"
name = "cpu"
node_role_arn = "${{aws_iam_role.cluster.arn}}"
subnet_ids = ["{subnet}"]
instance_types = ["c5.2xlarge"]
scaling = {{ min = 1, max = 2, desired = 1 }}
labels = {{ pool = "cpu" }}

[aws_fsx_lustre.data]
storage_capacity = 1200
deployment_type = "PERSISTENT_2"
per_unit_storage_throughput = 250
subnet_id = "{subnet}"

[aws_iam_policy.read]
name = "legacy-read"
policy = {{ Version = "2012-10-17", Statement = [{{ Effect = "Allow", Action = "s3:GetObject", Resource = "*" }}] }}

[aws_iam_instance_profile.nodes]
name = "legacy-nodes"
role = "${{aws_iam_role.cluster.name}}"

[aws_efs_file_system.home]
encrypted = true
throughput_mode = "bursting"

[aws_eks_addon.cni]
cluster_name = "${{aws_eks_cluster.main.name}}"
name = "vpc-cni"

[aws_eks_access_entry.cluster_role]
cluster_name = "${{aws_eks_cluster.main.name}}"
principal_arn = "${{aws_iam_role.cluster.arn}}"
policies = [{{ arn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy" }}]

[aws_iam_oidc_provider.eks]
url = "{issuer}"
"#,
        subnet = made["subnet"],
        issuer = made["issuer"]
    );
    // Blocks that differ from the objects: the import's plan brings each to its block.
    let differing = stack
        .replace(
            "subnet_ids = [\"{subnet}\"]\n\n[aws_placement_group"
                .replace("{subnet}", &made["subnet"])
                .as_str(),
            "subnet_ids = []\n\n[aws_placement_group",
        )
        .replace(
            "managed_policy_arns = [\"arn:aws:iam::aws:policy/AmazonEKSClusterPolicy\"]",
            "managed_policy_arns = []",
        )
        .replace("labels = { pool = \"cpu\" }", "labels = { pool = \"gpu\" }")
        .replace("per_unit_storage_throughput = 250", "per_unit_storage_throughput = 500")
        .replace("throughput_mode = \"bursting\"", "throughput_mode = \"elastic\"")
        .replace(
            "Action = \"s3:GetObject\", Resource = \"*\" }] }\n\n[aws_iam_instance_profile",
            "Action = \"s3:ListBucket\", Resource = \"*\" }] }\n\n[aws_iam_instance_profile",
        )
        // Nothing is recorded yet to refer to.
        .replace("${aws_internet_gateway.igw.id}", &made["igw"])
        .replace("${aws_iam_role.cluster.arn}", &made["role"])
        .replace("${aws_eks_cluster.main.name}", "legacy")
        // Left to its default, which the cluster does not have: the plan changes it.
        .replace("logging = [\"api\"]\n", "");
    aws.write("differing.toml", &differing);
    for (address, id) in [
        ("aws_route_table.public", made["table"].as_str()),
        ("aws_iam_role.cluster", "legacy-cluster"),
        ("aws_eks_nodegroup.cpu", "legacy/cpu"),
        ("aws_fsx_lustre.data", made["fs"].as_str()),
        ("aws_efs_file_system.home", made["home"].as_str()),
        ("aws_iam_policy.read", made["policy"].as_str()),
        ("aws_eks_cluster.main", "legacy"),
    ] {
        let out = aws.ok(&["import", "differing.toml", address, id, "--dry-run"]);
        assert!(out.contains(&format!("~ {address} (")), "{address}: {out}");
    }
    assert!(aws.ids("differing.toml").is_empty());
    // A mode EKS cannot go back to: the import's plan is refused, and nothing recorded.
    aws.write(
        "back.toml",
        &differing.replace("version = \"1.31\"\n", "version = \"1.31\"\nauthentication_mode = \"CONFIG_MAP\"\n"),
    );
    let (code, err) = aws.forge(&["import", "back.toml", "aws_eks_cluster.main", "legacy", "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    let flat = err.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("authentication mode only onwards"), "{err}");

    aws.write("all.toml", &stack);
    let entry = format!("legacy/{}", made["role"]);
    let imports = [
        ("aws_internet_gateway.igw", made["igw"].as_str(), "ec2:CreateTags"),
        ("aws_eip.nat", made["eip"].as_str(), "ec2:CreateTags"),
        ("aws_nat_gateway.nat", made["nat"].as_str(), "ec2:CreateTags"),
        ("aws_route_table.public", made["table"].as_str(), "ec2:CreateTags"),
        ("aws_placement_group.efa", "legacy-efa", "ec2:CreateTags"),
        ("aws_iam_role.cluster", "legacy-cluster", "iam:TagRole"),
        ("aws_eks_cluster.main", "legacy", "eks:POST /tags/"),
        ("aws_eks_nodegroup.cpu", "legacy/cpu", "eks:POST /tags/"),
        ("aws_fsx_lustre.data", made["fs"].as_str(), "fsx:TagResource"),
        ("aws_iam_policy.read", made["policy"].as_str(), "iam:TagPolicy"),
        ("aws_iam_instance_profile.nodes", "legacy-nodes", "iam:TagInstanceProfile"),
        (
            "aws_efs_file_system.home",
            made["home"].as_str(),
            "elasticfilesystem:POST /2015-02-01/resource-tags/",
        ),
        ("aws_eks_addon.cni", "legacy/vpc-cni", "eks:POST /tags/"),
        ("aws_eks_access_entry.cluster_role", &entry, "eks:POST /tags/"),
        ("aws_iam_oidc_provider.eks", made["oidc"].as_str(), "iam:TagOpenIDConnectProvider"),
    ];
    for (address, id, marking) in imports {
        aws.calls();
        let out = aws.ok(&["import", "all.toml", address, id]);
        assert!(out.contains(&format!("as `{address}`")), "{address}: {out}");
        let calls = aws.calls();
        let writes = mutating(&calls);
        assert!(
            writes.len() == 1 && writes[0].starts_with(marking),
            "{address}: the mark, and nothing else: {writes:?}"
        );
    }
    let (code, plan) = aws.forge(&["plan", "all.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0, "every attribute read back as the block sets it: {plan}");
    let ids = aws.ids("all.toml");
    assert_eq!(ids.get("aws_eks_nodegroup.cpu").map(String::as_str), Some("legacy/cpu"));
    // The role's mark, as IAM holds it.
    let tags = runtime()
        .block_on(aws.iam().list_role_tags().role_name("legacy-cluster").send())
        .unwrap();
    assert!(
        tags.tags()
            .iter()
            .any(|t| t.key() == "forge:address" && t.value() == "aws_iam_role.cluster"),
        "{tags:?}"
    );

    // A second stack may not take them.
    aws.write("other.toml", &stack.replace("name = \"adopt-all\"", "name = \"other\""));
    let (code, err) = aws.forge(&["import", "other.toml", "aws_iam_role.cluster", "legacy-cluster"]);
    assert_eq!(code, 1, "{err}");
    let flat = err.replace('│', " ").split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("belongs to the forge stack `adopt-all`"), "{err}");
}

//! The IAM kinds (roles, policies, instance profiles, OIDC providers) against the emulator.

use super::*;

#[test]
fn iam_roles_policies_profiles_and_oidc_on_the_emulator() {
    let aws = Aws::new();
    aws.write("iam.toml", include_str!("../../../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);
    let iam = aws.iam();
    let attached = |role: &str| {
        runtime().block_on(async {
            let mut arns: Vec<String> = iam
                .list_attached_role_policies()
                .role_name(role)
                .send()
                .await
                .unwrap()
                .attached_policies()
                .iter()
                .map(|p| p.policy_arn().unwrap().to_owned())
                .collect();
            arns.sort();
            arns
        })
    };
    assert_eq!(attached("train-cluster"), ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]);
    let node = attached("train-node");
    assert_eq!(node.len(), 4, "{node:?}");
    assert!(
        node.iter().any(|a| a.ends_with(":policy/train-fsx-csi")),
        "the customer policy is attached by reference: {node:?}"
    );
    runtime().block_on(async {
        let role = iam.get_role().role_name("train-node").send().await.unwrap();
        let tags: Vec<(&str, &str)> = role.role().unwrap().tags().iter().map(|t| (t.key(), t.value())).collect();
        assert!(tags.contains(&("forge:address", "aws_iam_role.node")), "{tags:?}");
        assert_eq!(
            iam.list_role_policies()
                .role_name("train-node")
                .send()
                .await
                .unwrap()
                .policy_names(),
            ["logs"]
        );
        let profile = iam.get_instance_profile().instance_profile_name("train-node").send().await.unwrap();
        assert_eq!(
            profile
                .instance_profile()
                .unwrap()
                .roles()
                .iter()
                .map(aws_sdk_iam::types::Role::role_name)
                .collect::<Vec<_>>(),
            ["train-node"]
        );
        assert_eq!(
            iam.list_open_id_connect_providers()
                .send()
                .await
                .unwrap()
                .open_id_connect_provider_list()
                .len(),
            1
        );
    });

    aws.calls();
    let (code, _) = aws.forge(&["plan", "iam.toml", "--detailed-exitcode"]);
    assert_eq!(code, 0);
    let calls = aws.calls();
    assert!(mutating(&calls).is_empty());
    assert_eq!(calls.len(), 4, "one list per IAM kind: {calls:?}");

    // A policy document change publishes a new default version, in place.
    aws.write(
        "iam.toml",
        &include_str!("../../../examples/eks-iam.toml").replace("\"fsx:TagResource\"", "\"fsx:TagResource\", \"fsx:UpdateFileSystem\""),
    );
    let out = aws.ok(&["up", "iam.toml", "--yes"]);
    assert!(out.contains("~ aws_iam_policy.fsx_csi"), "{out}");
    assert!(aws.calls().contains_key("iam:CreatePolicyVersion"));

    // Replacing a policy that a role uses (its description forces replacement): the old one is
    // detached and deleted, the new one attached again.
    let described = include_str!("../../../examples/eks-iam.toml").replace("What the FSx for Lustre CSI driver needs", "FSx CSI driver");
    aws.write("iam.toml", &described);
    let out = aws.ok(&["up", "iam.toml", "--yes"]);
    assert!(out.contains("-/+ aws_iam_policy.fsx_csi"), "{out}");
    assert!(
        attached("train-node").iter().any(|a| a.ends_with(":policy/train-fsx-csi")),
        "the role uses the new policy"
    );
    aws.write("iam.toml", include_str!("../../../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);

    // Tags follow the stack both ways: added, then removed, in place.
    let role_tag = |key: &str| {
        runtime().block_on(async {
            let role = iam.get_role().role_name("train-node").send().await.unwrap();
            role.role()
                .unwrap()
                .tags()
                .iter()
                .find(|t| t.key() == key)
                .map(|t| t.value().to_owned())
        })
    };
    let tagged_text = include_str!("../../../examples/eks-iam.toml")
        .replace("region = \"us-west-2\"", "region = \"us-west-2\"\ndefault_tags = { team = \"ml\" }");
    aws.write("iam.toml", &tagged_text);
    aws.ok(&["up", "iam.toml", "--yes"]);
    assert_eq!(role_tag("team").as_deref(), Some("ml"));
    aws.write("iam.toml", include_str!("../../../examples/eks-iam.toml"));
    aws.ok(&["up", "iam.toml", "--yes"]);
    assert_eq!(role_tag("team"), None, "a tag removed from the stack is removed from the role");
    assert_eq!(role_tag("forge:stack").as_deref(), Some("eks-iam"));

    aws.ok(&["destroy", "iam.toml", "--yes"]);
    runtime().block_on(async {
        for role in ["train-cluster", "train-node"] {
            assert!(iam.get_role().role_name(role).send().await.is_err(), "{role} is gone");
        }
        assert!(iam.get_instance_profile().instance_profile_name("train-node").send().await.is_err());
        let local = iam
            .list_policies()
            .scope(aws_sdk_iam::types::PolicyScopeType::Local)
            .send()
            .await
            .unwrap();
        assert!(local.policies().is_empty(), "the customer policy is gone");
        assert!(
            iam.list_open_id_connect_providers()
                .send()
                .await
                .unwrap()
                .open_id_connect_provider_list()
                .is_empty()
        );
    });
}

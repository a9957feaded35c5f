//! `aws_security_group`: a security group with its ingress and egress rules. Rules are compared
//! as sets of single permissions, so a rule change revokes and authorizes only what changed, in
//! place. A rule's source is CIDR blocks, other groups, or the group itself (`self = true`: the
//! EFA rule, all protocols from and to itself).

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Found, Inspected, Lookups, Observed, ProviderError, Resource, Selector};
use crate::schema::attributes;
use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, ResourceType, SecurityGroupRule, Tag, TagSpecification, UserIdGroupPair};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};

/// The `aws_security_group` kind.
pub(crate) struct SecurityGroup;

attributes! {
    kind SecurityGroup, spec "aws_security_group", outputs [id, name = attribute], extra [tags];
    struct Config {
        name: String [replace],
        vpc_id: String [replace],
        #[serde(default = "default_description")] description: String [replace],
        #[serde(default)] ingress: Vec<Rule>,
        #[serde(default)] egress: Vec<Rule>,
    }
}

fn default_description() -> String {
    "Managed by forge".into()
}

/// One rule as written: `{ protocol = "tcp", from_port = 988, to_port = 988, cidr_blocks = [...] }`.
#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Rule {
    #[serde(default = "all_protocols")]
    protocol: String,
    from_port: Option<i32>,
    to_port: Option<i32>,
    #[serde(default)]
    cidr_blocks: Vec<String>,
    #[serde(default)]
    security_groups: Vec<String>,
    #[serde(default, rename = "self")]
    itself: bool,
}

fn all_protocols() -> String {
    "-1".into()
}

/// A single permission: protocol, port range and one source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Atom {
    protocol: String,
    ports: Option<(i32, i32)>,
    cidr: Option<String>,
    group: Option<String>,
}

impl Atom {
    fn permission(&self) -> IpPermission {
        let mut p = IpPermission::builder().ip_protocol(&self.protocol);
        if let Some((from, to)) = self.ports {
            p = p.from_port(from).to_port(to);
        }
        if let Some(cidr) = &self.cidr {
            p = p.ip_ranges(IpRange::builder().cidr_ip(cidr).build());
        }
        if let Some(group) = &self.group {
            p = p.user_id_group_pairs(UserIdGroupPair::builder().group_id(group).build());
        }
        p.build()
    }
}

impl Atom {
    /// The permission a live rule grants.
    fn of_rule(rule: &SecurityGroupRule) -> Atom {
        let protocol = rule.ip_protocol().unwrap_or("-1").to_owned();
        Atom {
            ports: (protocol != "-1").then(|| (rule.from_port().unwrap_or(-1), rule.to_port().unwrap_or(-1))),
            protocol,
            cidr: rule.cidr_ipv4().map(str::to_owned),
            group: rule.referenced_group_info().and_then(|g| g.group_id()).map(str::to_owned),
        }
    }

    /// The permission as a rule table of the stack's own shape (`self = true` for the group
    /// `own_id` itself): how drift shows a rule.
    fn table(&self, own_id: &str) -> Value {
        let mut rule = json!({ "protocol": self.protocol });
        if let Some((from, to)) = self.ports {
            rule["from_port"] = json!(from);
            rule["to_port"] = json!(to);
        }
        match (&self.cidr, &self.group) {
            (Some(cidr), _) => rule["cidr_blocks"] = json!([cidr]),
            (None, Some(group)) if group == own_id => rule["self"] = json!(true),
            (None, Some(group)) => rule["security_groups"] = json!([group]),
            (None, None) => {}
        }
        rule
    }
}

/// Rules as the sorted list of single-permission tables drift compares.
fn tables(atoms: &BTreeSet<Atom>, own_id: &str) -> Value {
    Value::Array(atoms.iter().map(|a| a.table(own_id)).collect())
}

/// `config` with the rule lists under `keys` (those it sets) as single-permission tables, the
/// shape [`live_rules`] reads; a list that does not parse stays as written.
pub(super) fn comparable_rules(own_id: &str, config: &Value, keys: &[&str]) -> Value {
    let mut config = config.clone();
    for key in keys {
        let parsed = config.get(*key).and_then(|v| serde_json::from_value::<Vec<Rule>>(v.clone()).ok());
        if let Some(atoms) = parsed.and_then(|rules| atoms(&rules, own_id).ok()) {
            config[*key] = tables(&atoms, own_id);
        }
    }
    config
}

/// What a read reports of a group besides its rules.
fn read_attributes(g: &aws_sdk_ec2::types::SecurityGroup) -> Value {
    json!({
        "name": g.group_name(),
        "vpc_id": g.vpc_id(),
        "description": g.description(),
        "tags": super::ec2_tags(g.tags()),
    })
}

/// A group's outputs, as its create returns them.
fn outputs(g: &aws_sdk_ec2::types::SecurityGroup) -> Value {
    json!({ "id": g.group_id(), "name": g.group_name() })
}

/// Whose rules a read counts: the group's own, or those another resource added to it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// Untagged rules and those tagged with the group's own address.
    Group,
    /// Rules tagged with another resource's address (`aws_security_group_ingress`).
    Others,
}

/// The live ingress and egress rule tables of `groups` (id and the group's `forge:address`)
/// that `owner` counts, by group id (see [`live_atoms`]).
async fn live_rules(aws: &Clients, groups: &[(String, Option<String>)], owner: Owner) -> Result<HashMap<String, Value>, ProviderError> {
    let mut found = live_atoms(aws, groups, owner).await?;
    Ok(groups
        .iter()
        .map(|(id, _)| {
            let [ingress, egress] = found.remove(id).unwrap_or_default();
            (
                id.clone(),
                json!({ "ingress": tables(&ingress, id), "egress": tables(&egress, id) }),
            )
        })
        .collect())
}

/// The live ingress and egress permissions of `groups` (id and the group's `forge:address`)
/// that `owner` counts, by group id: one DescribeSecurityGroupRules per page and chunk.
async fn live_atoms(
    aws: &Clients,
    groups: &[(String, Option<String>)],
    owner: Owner,
) -> Result<HashMap<String, [BTreeSet<Atom>; 2]>, ProviderError> {
    let mut found: HashMap<String, [BTreeSet<Atom>; 2]> = HashMap::new();
    for chunk in groups.chunks(100) {
        let by_group = Filter::builder()
            .name("group-id")
            .set_values(Some(chunk.iter().map(|(id, _)| id.clone()).collect()))
            .build();
        let rules = all_pages!(
            aws,
            aws.ec2.describe_security_group_rules().filters(by_group),
            security_group_rules,
            "DescribeSecurityGroupRules"
        );
        for rule in &rules {
            let Some((group, address)) = chunk.iter().find(|(id, _)| Some(id.as_str()) == rule.group_id()) else {
                continue;
            };
            let tagged = rule
                .tags()
                .iter()
                .find(|t| t.key() == Some("forge:address"))
                .and_then(|t| t.value());
            let others = tagged.is_some_and(|t| Some(t) != address.as_deref());
            if others == (owner == Owner::Others) {
                found.entry(group.clone()).or_default()[usize::from(rule.is_egress() == Some(true))].insert(Atom::of_rule(rule));
            }
        }
    }
    Ok(found)
}

/// The single permissions `rules` grant to the group `own_id`.
pub(super) fn atoms(rules: &[Rule], own_id: &str) -> Result<BTreeSet<Atom>, ProviderError> {
    let mut out = BTreeSet::new();
    for rule in rules {
        let protocol = match rule.protocol.as_str() {
            "all" | "-1" => "-1".to_owned(),
            other => other.to_lowercase(),
        };
        let ports = match (protocol.as_str(), rule.from_port) {
            ("-1", _) => None,
            (_, Some(from)) => Some((from, rule.to_port.unwrap_or(from))),
            (p, None) => {
                return Err(ProviderError::permanent(format!(
                    "a `{p}` rule needs `from_port` (and `to_port` for a range)"
                )));
            }
        };
        let groups = rule.security_groups.iter().cloned().chain(rule.itself.then(|| own_id.to_owned()));
        let sources: Vec<(Option<String>, Option<String>)> = rule
            .cidr_blocks
            .iter()
            .map(|c| (Some(c.clone()), None))
            .chain(groups.map(|g| (None, Some(g))))
            .collect();
        if sources.is_empty() {
            return Err(ProviderError::permanent(
                "a rule needs a source: `cidr_blocks`, `security_groups` or `self = true`",
            ));
        }
        for (cidr, group) in sources {
            out.insert(Atom {
                protocol: protocol.clone(),
                ports,
                cidr,
                group,
            });
        }
    }
    Ok(out)
}

/// The egress rule AWS adds to every new group.
fn aws_default_egress() -> BTreeSet<Atom> {
    BTreeSet::from([Atom {
        protocol: "-1".into(),
        ports: None,
        cidr: Some("0.0.0.0/0".into()),
        group: None,
    }])
}

/// Which rules of a group.
#[derive(Clone, Copy)]
pub(super) enum Direction {
    /// Inbound.
    Ingress,
    /// Outbound.
    Egress,
}

/// The groups among `ids` and those tagged with the stack (see `observe_ec2!`), each with its
/// name, VPC, description, tags and the ingress and egress rules `owner` counts: one tagged
/// Describe (and one by id for recorded groups that did not show), then one
/// DescribeSecurityGroupRules for all of them.
pub(super) async fn observe_groups(aws: &Clients, stack: &str, ids: &[String], owner: Owner) -> Result<Vec<Observed>, ProviderError> {
    let mut groups: Vec<Observed> = observe_ec2!(
        aws,
        stack,
        ids,
        describe_security_groups,
        "group-id",
        security_groups,
        group_id,
        read_attributes
    )?;
    let owners: Vec<(String, Option<String>)> = groups.iter().map(|g| (g.id.clone(), g.address.clone())).collect();
    let mut rules = live_rules(aws, &owners, owner).await?;
    for group in &mut groups {
        if let (Some(attributes), Some(Value::Object(rules))) = (group.attributes.as_object_mut(), rules.remove(&group.id)) {
            attributes.extend(rules);
        }
    }
    Ok(groups)
}

/// The tags a rule is authorized with: the stack and the address of the resource that owns it,
/// so that a group's rules added by another resource (`aws_security_group_ingress`) are told
/// apart from its own when drift is read.
pub(super) fn rule_tags(ctx: &Ctx) -> TagSpecification {
    let tags = ctx
        .tags(&Value::Null)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build());
    TagSpecification::builder()
        .resource_type(ResourceType::SecurityGroupRule)
        .set_tags(Some(tags.collect()))
        .build()
}

/// Revokes what is no longer wanted, then authorizes what is new (tagged `tags`).
pub(super) async fn sync_rules(
    aws: &Clients,
    tags: &TagSpecification,
    id: &str,
    direction: Direction,
    have: &BTreeSet<Atom>,
    want: &BTreeSet<Atom>,
) -> Result<(), ProviderError> {
    let revoke: Vec<IpPermission> = have.difference(want).map(Atom::permission).collect();
    let authorize: Vec<IpPermission> = want.difference(have).map(Atom::permission).collect();
    let side = Side { aws, tags, id, direction };
    side.change(Change::Revoke, revoke).await?;
    side.change(Change::Authorize, authorize).await
}

#[derive(Clone, Copy)]
enum Change {
    Revoke,
    Authorize,
}

/// One direction of one group's rules, where the Authorize and Revoke calls go: the group `id`,
/// and the tags authorized rules get.
#[derive(Clone, Copy)]
struct Side<'a> {
    aws: &'a Clients,
    tags: &'a TagSpecification,
    id: &'a str,
    direction: Direction,
}

impl Side<'_> {
    /// One Authorize or Revoke call; on failure, the error code and the mapped error.
    async fn call(self, change: Change, perms: Vec<IpPermission>) -> Result<(), (Option<String>, ProviderError)> {
        let Side { aws, tags, id, direction } = self;
        macro_rules! send {
            ($op:ident, $what:literal $(, $tags:expr)?) => {
                aws.ec2
                    .$op()
                    .group_id(id)
                    .set_ip_permissions(Some(perms))
                    $(.tag_specifications($tags.clone()))?
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| (crate::provider::aws::code(&e).map(str::to_owned), error(aws, $what, e)))
            };
        }
        match (change, direction) {
            (Change::Revoke, Direction::Ingress) => send!(revoke_security_group_ingress, "RevokeSecurityGroupIngress"),
            (Change::Revoke, Direction::Egress) => send!(revoke_security_group_egress, "RevokeSecurityGroupEgress"),
            (Change::Authorize, Direction::Ingress) => send!(authorize_security_group_ingress, "AuthorizeSecurityGroupIngress", tags),
            (Change::Authorize, Direction::Egress) => send!(authorize_security_group_egress, "AuthorizeSecurityGroupEgress", tags),
        }
    }

    /// Applies `perms` in one call. AWS refuses a whole batch when one rule in it is already so
    /// (a resumed create finds some rules authorized or revoked); then the rules go one by one
    /// and only those already so are skipped.
    async fn change(self, change: Change, perms: Vec<IpPermission>) -> Result<(), ProviderError> {
        let already = match change {
            Change::Revoke => "InvalidPermission.NotFound",
            Change::Authorize => "InvalidPermission.Duplicate",
        };
        if perms.is_empty() {
            return Ok(());
        }
        match self.call(change, perms.clone()).await {
            Ok(()) => Ok(()),
            Err((Some(code), _)) if code == already => {
                for perm in perms {
                    match self.call(change, vec![perm]).await {
                        Err((code, e)) if code.as_deref() != Some(already) => return Err(e),
                        _ => {}
                    }
                }
                Ok(())
            }
            Err((_, e)) => Err(e),
        }
    }
}

/// The group an earlier create of this resource tagged, if any.
async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<String>, ProviderError> {
    let found = find_own!(ctx, aws, token, describe_security_groups, security_groups, "DescribeSecurityGroups");
    Ok(found.and_then(|g| g.group_id().map(str::to_owned)))
}

impl Resource for SecurityGroup {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        // No lookup first: the name is unique in its VPC, so a retry of a create whose answer
        // was lost meets InvalidGroup.Duplicate and adopts the group by its token (a resumed
        // create is looked up by `find` before it gets here).
        let made = aws
            .ec2
            .create_security_group()
            .group_name(&cfg.name)
            .description(&cfg.description)
            .vpc_id(&cfg.vpc_id)
            .tag_specifications(tag_spec(ctx, token, ResourceType::SecurityGroup, config))
            .send()
            .await;
        let id = match made {
            Ok(out) => out.group_id().unwrap_or_default().to_owned(),
            // The name is taken in this VPC: ours if an earlier attempt made it (its token).
            Err(e) if crate::provider::aws::code(&e) == Some("InvalidGroup.Duplicate") => match find_own(ctx, aws, token).await? {
                Some(id) => id,
                None => {
                    return Err(ProviderError::permanent(format!(
                        "a security group named `{}` already exists in {} and was not created by `{}`; pick another `name`",
                        cfg.name, cfg.vpc_id, ctx.address
                    )));
                }
            },
            Err(e) => return Err(error(aws, "CreateSecurityGroup", e)),
        };
        let tags = rule_tags(ctx);
        sync_rules(aws, &tags, &id, Direction::Ingress, &BTreeSet::new(), &atoms(&cfg.ingress, &id)?).await?;
        sync_rules(aws, &tags, &id, Direction::Egress, &aws_default_egress(), &atoms(&cfg.egress, &id)?).await?;
        Ok(Created {
            outputs: json!({ "id": id, "name": cfg.name }),
            id,
        })
    }

    /// The groups in one tagged Describe, then their rules in one DescribeSecurityGroupRules.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        observe_groups(cloud.aws().await, stack, ids, Owner::Group).await
    }

    fn comparable(&self, id: &str, config: &Value) -> Value {
        comparable_rules(id, config, &["ingress", "egress"])
    }

    /// Rules forge did not apply stay unless the block lists `ingress` or `egress`.
    fn kept_when_left_out(&self) -> &'static [&'static str] {
        &["ingress", "egress"]
    }

    fn importable(&self) -> bool {
        true
    }

    /// The group with its untagged rules (those no other resource of a stack added).
    async fn inspect(&self, cloud: &Cloud, id: &str) -> Result<Option<Inspected>, ProviderError> {
        let aws = cloud.aws().await;
        let found: Result<Option<Inspected>, ProviderError> = inspect_ec2!(
            aws,
            id,
            describe_security_groups,
            "group-id",
            security_groups,
            outputs,
            read_attributes
        );
        let Some(mut found) = found? else { return Ok(None) };
        let address = found.mark.as_ref().map(|(_, address)| address.clone());
        if let Some(Value::Object(rules)) = live_rules(aws, &[(id.to_owned(), address)], Owner::Group).await?.remove(id) {
            found.attributes.as_object_mut().expect("a table").extend(rules);
        }
        Ok(Some(found))
    }

    async fn mark(&self, ctx: &Ctx, id: &str, token: &str) -> Result<(), ProviderError> {
        super::mark(ctx, ctx.cloud.aws().await, id, token).await
    }

    fn lookups(&self) -> Lookups {
        Lookups {
            id: Some("a security group id, sg-…"),
            tags: true,
            attributes: &[],
        }
    }

    /// An existing group's name, VPC, description and tags (its rules are its owner's).
    async fn look_up(&self, cloud: &Cloud, selector: &Selector) -> Result<Vec<Found>, ProviderError> {
        let aws = cloud.aws().await;
        look_up_ec2!(aws, selector, describe_security_groups, "group-id", security_groups, |g| Found {
            id: g.group_id().unwrap_or_default().to_owned(),
            outputs: outputs(g),
            attributes: read_attributes(g),
        })
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        find_own(ctx, ctx.cloud.aws().await, token).await
    }

    /// Tags, then the rule lists the block sets: what forge applied (`old`) and the block no
    /// longer has is revoked where it is still live; what the block has and the group lacks
    /// is authorized. Rules forge never applied (added by hand, by another tool, by another
    /// resource) are left alone, and a live rule is not sent again.
    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let (before, after): (Config, Config) = (parse(ctx, old)?, parse(ctx, new)?);
        let aws = ctx.cloud.aws().await;
        sync_tags(ctx, aws, id, old, new).await?;
        let tags = rule_tags(ctx);
        let [ingress, egress] = live_atoms(aws, &[(id.to_owned(), Some(ctx.address.clone()))], Owner::Group)
            .await?
            .remove(id)
            .unwrap_or_default();
        for (key, direction, live, was, now) in [
            ("ingress", Direction::Ingress, ingress, &before.ingress, &after.ingress),
            ("egress", Direction::Egress, egress, &before.egress, &after.egress),
        ] {
            if new.get(key).is_none() && old.get(key).is_none() {
                continue;
            }
            let want = atoms(now, id)?;
            // A recorded list that drift rewrote item by item may not parse: then the live
            // rules stand for what was applied.
            let applied = atoms(was, id).unwrap_or_else(|_| live.clone());
            let have: BTreeSet<Atom> = applied.intersection(&live).chain(want.intersection(&live)).cloned().collect();
            sync_rules(aws, &tags, id, direction, &have, &want).await?;
        }
        Ok(json!({ "id": id, "name": after.name }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        let result = aws.ec2.delete_security_group().group_id(id).send().await;
        super::delete_outcome(aws, "DeleteSecurityGroup", "InvalidGroup.NotFound", "group-id", id, result).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(v: Value) -> Vec<Rule> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn self_rules_and_port_ranges_become_single_permissions() {
        let efa = atoms(&rules(json!([{ "protocol": "-1", "self": true }])), "sg-1").unwrap();
        assert_eq!(
            efa,
            BTreeSet::from([Atom {
                protocol: "-1".into(),
                ports: None,
                cidr: None,
                group: Some("sg-1".into())
            }])
        );
        let fsx = atoms(
            &rules(json!([{ "protocol": "tcp", "from_port": 1018, "to_port": 1023, "cidr_blocks": ["10.0.0.0/16", "10.1.0.0/16"] }])),
            "sg-1",
        )
        .unwrap();
        assert_eq!(fsx.len(), 2);
        assert!(fsx.iter().all(|a| a.ports == Some((1018, 1023))));
        assert!(atoms(&rules(json!([{ "protocol": "tcp", "cidr_blocks": ["0.0.0.0/0"] }])), "sg").is_err());
        assert!(atoms(&rules(json!([{ "protocol": "-1" }])), "sg").is_err());
    }
}

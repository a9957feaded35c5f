//! `aws_launch_template`: a launch template for node groups — network interfaces with their
//! network card and device indexes (EFA), placement group, block devices, user data and the
//! tags instances get. A change publishes a new version and makes it the default.

use super::{sync_tags, tag_spec};
use crate::provider::aws::{Clients, error, parse};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource};
use crate::schema::attributes;
use aws_sdk_ec2::types::{
    CapacityReservationTarget, LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState, LaunchTemplateInstanceMarketOptionsRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatePlacementRequest, LaunchTemplateTagSpecificationRequest,
    MarketType, RequestLaunchTemplateData, ResourceType, Tag, VolumeType,
};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The `aws_launch_template` kind.
pub(crate) struct LaunchTemplate;

attributes! {
    kind LaunchTemplate, spec "aws_launch_template", outputs [id, name = attribute, latest_version = fresh], extra [tags];
    struct Config {
        name: String [replace],
        instance_type: Option<String>,
        image_id: Option<String>,
        key_name: Option<String>,
        user_data: Option<String>,
        placement_group: Option<String>,
        capacity_reservation_id: Option<String>,
        #[serde(default)] capacity_block: bool,
        #[serde(default)] network_interfaces: Vec<Interface>,
        #[serde(default)] block_devices: Vec<BlockDevice>,
        #[serde(default)] instance_tags: Map<String, Value>,
        imds_hop_limit: Option<i32>,
    }
}

/// `{ network_card_index = 1, device_index = 1, interface_type = "efa", security_groups = [...] }`
#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Interface {
    #[serde(default)]
    network_card_index: i32,
    #[serde(default)]
    device_index: i32,
    interface_type: Option<String>,
    #[serde(default)]
    security_groups: Vec<String>,
    subnet_id: Option<String>,
    #[serde(default = "yes")]
    delete_on_termination: bool,
    associate_public_ip_address: Option<bool>,
}

/// `{ device_name = "/dev/xvda", volume_size = 500, volume_type = "gp3" }`
#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct BlockDevice {
    device_name: String,
    volume_size: i32,
    #[serde(default = "gp3")]
    volume_type: String,
}

fn yes() -> bool {
    true
}

fn gp3() -> String {
    "gp3".into()
}

/// The template's data as the API takes it.
fn data(ctx: &Ctx, cfg: &Config) -> RequestLaunchTemplateData {
    let interfaces = cfg.network_interfaces.iter().map(|i| {
        LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
            .network_card_index(i.network_card_index)
            .device_index(i.device_index)
            .set_interface_type(i.interface_type.clone())
            .set_groups(Some(i.security_groups.clone()))
            .set_subnet_id(i.subnet_id.clone())
            .delete_on_termination(i.delete_on_termination)
            .set_associate_public_ip_address(i.associate_public_ip_address)
            .build()
    });
    let devices = cfg.block_devices.iter().map(|d| {
        let ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
            .volume_size(d.volume_size)
            .volume_type(VolumeType::from(d.volume_type.as_str()))
            .delete_on_termination(true)
            .build();
        LaunchTemplateBlockDeviceMappingRequest::builder()
            .device_name(&d.device_name)
            .ebs(ebs)
            .build()
    });
    let mut instance_tags: Vec<Tag> = cfg
        .instance_tags
        .iter()
        .map(|(k, v)| {
            Tag::builder()
                .key(k)
                .value(v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .build()
        })
        .collect();
    instance_tags.push(Tag::builder().key("forge:stack").value(&ctx.stack).build());
    let mut builder = RequestLaunchTemplateData::builder()
        .set_instance_type(cfg.instance_type.as_deref().map(Into::into))
        .set_image_id(cfg.image_id.clone())
        .set_key_name(cfg.key_name.clone())
        .set_user_data(cfg.user_data.as_ref().map(|u| base64::engine::general_purpose::STANDARD.encode(u)))
        .set_network_interfaces(Some(interfaces.collect()))
        .set_block_device_mappings(Some(devices.collect()))
        .tag_specifications(
            LaunchTemplateTagSpecificationRequest::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(instance_tags))
                .build(),
        );
    if let Some(group) = &cfg.placement_group {
        builder = builder.placement(LaunchTemplatePlacementRequest::builder().group_name(group).build());
    }
    if let Some(reservation) = &cfg.capacity_reservation_id {
        // The reservation brings its own placement; a Capacity Block is also a market type.
        let target = CapacityReservationTarget::builder().capacity_reservation_id(reservation).build();
        builder = builder.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(target)
                .build(),
        );
    }
    if let Some(hops) = cfg.imds_hop_limit {
        // IMDSv2 only; containers on the instance are one hop further away than its processes.
        builder = builder.metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .http_put_response_hop_limit(hops)
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
                .build(),
        );
    }
    if cfg.capacity_block {
        builder = builder.instance_market_options(
            LaunchTemplateInstanceMarketOptionsRequest::builder()
                .market_type(MarketType::CapacityBlock)
                .build(),
        );
    }
    builder.build()
}

async fn find_own(ctx: &Ctx, aws: &Clients, token: &str) -> Result<Option<(String, i64)>, ProviderError> {
    let found = find_own!(
        ctx,
        aws,
        token,
        describe_launch_templates,
        launch_templates,
        "DescribeLaunchTemplates"
    );
    Ok(found.map(|t| {
        (
            t.launch_template_id().unwrap_or_default().to_owned(),
            t.latest_version_number().unwrap_or(1),
        )
    }))
}

impl Resource for LaunchTemplate {
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let (id, version) = match find_own(ctx, aws, token).await? {
            Some(found) => found,
            None => {
                let made = aws
                    .ec2
                    .create_launch_template()
                    .launch_template_name(&cfg.name)
                    .client_token(token)
                    .launch_template_data(data(ctx, &cfg))
                    .tag_specifications(tag_spec(ctx, token, ResourceType::LaunchTemplate, config))
                    .send()
                    .await
                    .map_err(|e| error(aws, "CreateLaunchTemplate", e))?;
                let template = made.launch_template();
                (
                    template.and_then(|t| t.launch_template_id()).unwrap_or_default().to_owned(),
                    template
                        .and_then(aws_sdk_ec2::types::LaunchTemplate::latest_version_number)
                        .unwrap_or(1),
                )
            }
        };
        Ok(Created {
            outputs: json!({ "id": id, "name": cfg.name, "latest_version": version }),
            id,
        })
    }

    /// The templates tagged with the stack in one Describe; recorded ones that did not show are
    /// asked by id (DescribeLaunchTemplates has no id filter and fails a whole call on one
    /// missing id: all at once, and only when that fails, one by one).
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let aws = cloud.aws().await;
        let observe = |t: &aws_sdk_ec2::types::LaunchTemplate| Observed {
            id: t.launch_template_id().unwrap_or_default().to_owned(),
            address: crate::provider::aws::address_in(&super::ec2_tags(t.tags()), stack),
            attributes: json!({ "name": t.launch_template_name(), "tags": super::ec2_tags(t.tags()) }),
        };
        let tagged = aws_sdk_ec2::types::Filter::builder().name("tag:forge:stack").values(stack).build();
        let found = all_pages!(
            aws,
            aws.ec2.describe_launch_templates().filters(tagged),
            launch_templates,
            "DescribeLaunchTemplates"
        );
        let mut seen: Vec<Observed> = found.iter().map(observe).collect();
        let missing: Vec<String> = ids.iter().filter(|id| !seen.iter().any(|o| &o.id == *id)).cloned().collect();
        if missing.is_empty() {
            return Ok(seen);
        }
        let ask = |ids: Vec<String>| aws.ec2.describe_launch_templates().set_launch_template_ids(Some(ids)).send();
        match ask(missing.clone()).await {
            Ok(out) => seen.extend(out.launch_templates().iter().map(observe)),
            Err(e) if crate::provider::aws::code(&e) == Some("InvalidLaunchTemplateId.NotFound") => {
                for id in missing {
                    match ask(vec![id]).await {
                        Ok(out) => seen.extend(out.launch_templates().iter().map(observe)),
                        Err(e) if crate::provider::aws::code(&e) == Some("InvalidLaunchTemplateId.NotFound") => {}
                        Err(e) => return Err(error(aws, "DescribeLaunchTemplates", e)),
                    }
                }
            }
            Err(e) => return Err(error(aws, "DescribeLaunchTemplates", e)),
        }
        Ok(seen)
    }

    async fn find(&self, ctx: &Ctx, token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        Ok(find_own(ctx, ctx.cloud.aws().await, token).await?.map(|(id, _)| id))
    }

    async fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        sync_tags(ctx, aws, id, old, new).await?;
        let mut version = None;
        let data_changed = SPEC
            .fields
            .iter()
            .map(|f| f.name)
            .filter(|n| *n != "tags")
            .any(|n| old.get(n) != new.get(n));
        if data_changed {
            let made = aws
                .ec2
                .create_launch_template_version()
                .launch_template_id(id)
                .launch_template_data(data(ctx, &cfg))
                .send()
                .await
                .map_err(|e| error(aws, "CreateLaunchTemplateVersion", e))?;
            let number = made
                .launch_template_version()
                .and_then(aws_sdk_ec2::types::LaunchTemplateVersion::version_number)
                .unwrap_or_default();
            aws.ec2
                .modify_launch_template()
                .launch_template_id(id)
                .default_version(number.to_string())
                .send()
                .await
                .map_err(|e| error(aws, "ModifyLaunchTemplate", e))?;
            version = Some(number);
        }
        let version = match version {
            Some(v) => v,
            None => {
                let found = aws
                    .ec2
                    .describe_launch_templates()
                    .launch_template_ids(id)
                    .send()
                    .await
                    .map_err(|e| error(aws, "DescribeLaunchTemplates", e))?;
                found
                    .launch_templates()
                    .first()
                    .and_then(aws_sdk_ec2::types::LaunchTemplate::latest_version_number)
                    .unwrap_or(1)
            }
        };
        Ok(json!({ "id": id, "name": cfg.name, "latest_version": version }))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, _config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        match aws.ec2.delete_launch_template().launch_template_id(id).send().await {
            Err(e)
                if !matches!(
                    crate::provider::aws::code(&e),
                    Some("InvalidLaunchTemplateId.NotFound" | "InvalidLaunchTemplateId.Malformed")
                ) =>
            {
                Err(error(aws, "DeleteLaunchTemplate", e))
            }
            _ => Ok(()),
        }
    }
}

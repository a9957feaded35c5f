//! The instance-type facts a stack is checked against at plan time: which names exist, how
//! many EFA interfaces and accelerators each has, and which zones offer it — two calls for all
//! the types a stack names (`DescribeInstanceTypes`, `DescribeInstanceTypeOfferings`).

use super::error;
use crate::facts::{InstanceType, LiveFacts};
use crate::provider::{Cloud, ProviderError};
use aws_sdk_ec2::types::{Filter, InstanceType as Ec2Type, LocationType};

/// Asks AWS about `names`; a name AWS does not know is left out of the answer.
pub async fn lookup(cloud: &Cloud, names: &[String]) -> Result<LiveFacts, ProviderError> {
    let aws = cloud.aws().await;
    let mut facts = LiveFacts::default();
    let mut batches = vec![names.to_vec()];
    while let Some(batch) = batches.pop() {
        let types = batch.iter().map(|n| Ec2Type::from(n.as_str())).collect();
        match aws.ec2.describe_instance_types().set_instance_types(Some(types)).send().await {
            Ok(out) => {
                for t in out.instance_types() {
                    let (Some(name), Some(network)) = (t.instance_type(), t.network_info()) else {
                        continue;
                    };
                    let efa = network
                        .efa_info()
                        .and_then(aws_sdk_ec2::types::EfaInfo::maximum_efa_interfaces)
                        .unwrap_or(0);
                    let gpus: i32 = t
                        .gpu_info()
                        .map_or(0, |g| g.gpus().iter().filter_map(aws_sdk_ec2::types::GpuDeviceInfo::count).sum());
                    let neuron: i32 = t.neuron_info().map_or(0, |n| {
                        n.neuron_devices()
                            .iter()
                            .filter_map(aws_sdk_ec2::types::NeuronDeviceInfo::count)
                            .sum()
                    });
                    let info = InstanceType {
                        efa_interfaces: u32::try_from(efa).unwrap_or(0),
                        accelerators: u32::try_from(gpus + neuron).unwrap_or(0),
                    };
                    facts.types.insert(name.as_str().to_owned(), info);
                }
            }
            // One bad name fails the whole call: ask for each name on its own to find it.
            Err(e) if super::code(&e) == Some("InvalidInstanceType") && batch.len() > 1 => {
                batches.extend(batch.into_iter().map(|n| vec![n]));
            }
            Err(e) if super::code(&e) == Some("InvalidInstanceType") => {}
            Err(e) => return Err(error(aws, "DescribeInstanceTypes", e)),
        }
    }
    let by_type = Filter::builder().name("instance-type").set_values(Some(names.to_vec())).build();
    let mut pages = aws
        .ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .filters(by_type)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| error(aws, "DescribeInstanceTypeOfferings", e))?;
        for offering in page.instance_type_offerings() {
            if let (Some(name), Some(zone)) = (offering.instance_type(), offering.location()) {
                facts.zones.entry(name.as_str().to_owned()).or_default().insert(zone.to_owned());
            }
        }
    }
    Ok(facts)
}

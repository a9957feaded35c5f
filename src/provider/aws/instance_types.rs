//! The instance-type facts a stack is checked against at plan time: which names exist, their
//! network cards and EFA interfaces (which the EFA layout is made from), accelerators and
//! processors, and which zones offer it — two calls for all
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
                    let cards = network.network_cards();
                    let single_interface_cards = cards
                        .iter()
                        .filter(|c| c.maximum_network_interfaces() == Some(1))
                        .filter_map(|c| c.network_card_index().and_then(|i| u32::try_from(i).ok()))
                        .filter(|i| *i < 64)
                        .fold(0u64, |bits, i| bits | (1 << i));
                    let arm64 = t
                        .processor_info()
                        .is_some_and(|p| p.supported_architectures().iter().any(|a| a.as_str() == "arm64"));
                    let info = InstanceType {
                        efa_interfaces: u32::try_from(efa).unwrap_or(0),
                        network_cards: network.maximum_network_cards().and_then(|n| u32::try_from(n).ok()).unwrap_or(1),
                        single_interface_cards,
                        accelerators: u32::try_from(gpus + neuron).unwrap_or(0),
                        arm64,
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

//! The request rates of the AWS APIs forge calls, in one place with their sources: what each
//! API's budget ([`crate::provider::budget`]) starts at, per account and region.

use crate::provider::budget::Rate;

/// EC2's non-mutating actions (`Describe*`, `Get*`, `List*`, `Search*`): a bucket of 100 per
/// action, refilled at 20 a second. EC2 throttles each action on its own
/// (<https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html>, "Request rate
/// limiting"). Unfiltered, unpaginated ones are documented at 50 / 10; forge's reads are
/// filtered, and a budget that meets the smaller bucket learns it from the throttling answers.
const EC2_NON_MUTATING: Rate = Rate::new(100.0, 20.0);

/// EC2's mutating actions (everything else): 50 per action, refilled at 5 a second.
const EC2_MUTATING: Rate = Rate::new(50.0, 5.0);

/// EC2 actions with smaller buckets of their own (same page).
const EC2_OWN: &[(&str, Rate)] = &[("CreateNatGateway", Rate::new(10.0, 1.0))];

/// IAM, EKS, FSx, EFS, CloudFormation, PCS and EC2 Auto Scaling publish no per-action rate; they answer
/// `Throttling` / `ThrottlingException` past a limit of their own. forge starts at 20 at once
/// and 10 a second per action, and slows down on the first throttling answer.
const UNPUBLISHED: Rate = Rate::new(20.0, 10.0);

/// The rate an action of a service starts at; `service` as the SDK names it (`EC2`, `IAM`).
pub(super) fn rate(service: &str, action: &str) -> Rate {
    if !service.eq_ignore_ascii_case("ec2") {
        return UNPUBLISHED;
    }
    if let Some((_, rate)) = EC2_OWN.iter().find(|(name, _)| *name == action) {
        return *rate;
    }
    let reads = ["Describe", "Get", "List", "Search"];
    if reads.iter().any(|verb| action.starts_with(verb)) {
        EC2_NON_MUTATING
    } else {
        EC2_MUTATING
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ec2_actions_get_their_documented_buckets() {
        assert_eq!(rate("EC2", "DescribeSecurityGroups"), Rate::new(100.0, 20.0));
        assert_eq!(rate("EC2", "AuthorizeSecurityGroupIngress"), Rate::new(50.0, 5.0));
        assert_eq!(rate("EC2", "CreateNatGateway"), Rate::new(10.0, 1.0));
        assert_eq!(rate("IAM", "CreateRole"), UNPUBLISHED);
    }
}

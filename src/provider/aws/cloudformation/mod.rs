//! CloudFormation: stacks, whose template forge applies as one resource.

pub(super) mod stack;

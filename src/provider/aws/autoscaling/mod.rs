//! EC2 Auto Scaling: the scheduled actions forge puts on the Auto Scaling group behind an EKS
//! managed node group (`schedule`), which EKS makes and owns; forge never changes the group
//! itself except to do at once what a schedule whose time has passed would have done.

pub(crate) mod schedule;

//! Controllers the harness runs because EKS runs them: the serving-certificate approver and the cloud-node
//! initialisation that the AWS cloud controller manager does, both reading the cluster from one cache.
pub mod approver;
pub mod cache;
pub mod cloud_node;

/// How soon a controller looks again when nothing changes: an approval or a patch that could not be written is
/// retried then.
pub const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

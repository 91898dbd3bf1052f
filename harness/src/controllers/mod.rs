//! Controllers the harness runs because EKS runs them: the serving-certificate approver and the cloud-node
//! initialisation that the AWS cloud controller manager does.
pub mod approver;
pub mod cloud_node;

use std::time::Duration;

/// How often the controllers look at the cluster.
pub const POLL: Duration = Duration::from_millis(150);

//! `cloudFormationAl2`: the AL2 CloudFormation template's self-managed nodes (bootstrap.sh, then `cfn-signal` to the stack
//! that launched them).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::generate;
use serde::Deserialize;

/// A CloudFormation template's self-managed nodes: bootstrap.sh, then cfn-signal to the stack that launched them.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudFormationAl2Spec {
    /// The stack that launched the nodes, which `cfn-signal` names (default `nodejoin-nodes`).
    #[serde(default = "default_stack")]
    pub stack: String,
    /// The stack's AutoScalingGroup resource that waits for the signals (default `NodeGroup`).
    #[serde(default = "super::default_resource")]
    pub resource: String,
    /// `${BootstrapArguments}`: pasted after the cluster name; placeholders filled in.
    #[serde(default)]
    pub bootstrap_arguments: String,
}

fn default_stack() -> String {
    "nodejoin-nodes".into()
}

impl FlavorSpec for CloudFormationAl2Spec {
    const KEY: &'static str = "cloudFormationAl2";
}

impl Flavor for CloudFormationAl2Spec {
    fn texts(&self) -> Vec<String> {
        vec![self.bootstrap_arguments.clone()]
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let template = generate::CloudFormation {
            stack: self.stack.clone(),
            resource: self.resource.clone(),
            bootstrap_arguments: input.render(&self.bootstrap_arguments)?,
        };
        Ok(Generated::served(generate::cloudformation(input.facts, &template)))
    }

    fn stack(&self) -> Option<(String, String)> {
        Some((self.stack.clone(), self.resource.clone()))
    }
}

//! `userData.command`: the user's own user-data generator (their fork of a producer's renderer, a script) run
//! with the cluster's and the instance's facts in its environment; what it prints is the user data. It runs in a
//! throwaway container of the node's image (`crate::docker::oneshot`), never on the host: a scenario is untrusted
//! input.
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// How long a generator may run.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// A generator: its command line and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program and its arguments; a relative program is found from `dir`.
    pub argv: Vec<String>,
    /// The scenario file's directory, the working directory.
    pub dir: PathBuf,
}

impl CommandSpec {
    /// Reads `command: [program, args...]` from a scenario in `dir`.
    pub fn new(argv: Vec<String>, dir: PathBuf) -> Result<Self, String> {
        match argv.first() {
            None => Err("command: give the program and its arguments, e.g. [./render.sh, --nodegroup, ng-1]".into()),
            Some(p) if p.trim().is_empty() => Err("command: the program is empty".into()),
            Some(_) if argv.iter().any(|a| a.contains('\0')) => Err("command: an argument holds a NUL byte".into()),
            Some(_) => Ok(Self { argv, dir }),
        }
    }
}

/// The environment a generator gets: every placeholder the node has, as `NODEJOIN_` and its name in upper snake
/// case (`cluster.caBase64` → `NODEJOIN_CLUSTER_CA_BASE64`, `instance.id` → `NODEJOIN_INSTANCE_ID`).
pub fn environment(vars: &BTreeMap<String, String>) -> Vec<String> {
    vars.iter().map(|(k, v)| format!("{}={v}", env_name(k))).collect()
}

/// `cluster.serviceIpv4Cidr` → `NODEJOIN_CLUSTER_SERVICE_IPV4_CIDR`.
pub fn env_name(placeholder: &str) -> String {
    let mut out = String::from("NODEJOIN_");
    let mut prev_lower = false;
    for c in placeholder.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_upper_snake_case_variables() {
        assert_eq!(env_name("cluster.caBase64"), "NODEJOIN_CLUSTER_CA_BASE64");
        assert_eq!(
            env_name("cluster.serviceIpv4Cidr"),
            "NODEJOIN_CLUSTER_SERVICE_IPV4_CIDR"
        );
        assert_eq!(env_name("instance.id"), "NODEJOIN_INSTANCE_ID");
        assert_eq!(
            env_name("instance.privateDnsName"),
            "NODEJOIN_INSTANCE_PRIVATE_DNS_NAME"
        );
        let env = environment(&BTreeMap::from([("cluster.name".to_string(), "demo".to_string())]));
        assert_eq!(env, ["NODEJOIN_CLUSTER_NAME=demo"]);
    }

    #[test]
    fn a_command_needs_a_program() {
        assert!(CommandSpec::new(vec![], PathBuf::from("/x"))
            .unwrap_err()
            .contains("program"));
        assert!(CommandSpec::new(vec![" ".into()], PathBuf::from("/x")).is_err());
        assert!(CommandSpec::new(vec!["./render.sh".into()], PathBuf::from("/x")).is_ok());
    }
}

//! What a run's VM nodes own in the host's network stack: a tap device on the run's bridge per node, and the DNAT
//! rules per node that take what it sends to the addresses of its link (IMDS's 169.254.169.254:80, the VPC
//! resolver's 169.254.169.253:53, AWS's endpoints on 443) to the harness's fakes. Each is removed when its
//! guard drops, and each carries the run id (the tap's alias, the rule's comment), so the reaper removes what a
//! killed run left and no run touches another's.
use crate::error::{Error, Result};
use std::net::{Ipv4Addr, SocketAddr};

fn vm_err(m: impl Into<String>) -> Error {
    Error::Vm(m.into())
}

/// The comment every host rule of run `run_id` carries, and the alias of its taps.
pub fn run_mark(run_id: &str) -> String {
    format!("nodejoin-run={run_id}")
}

/// Runs `program args` to completion; its stderr is the error.
fn run<S: AsRef<std::ffi::OsStr> + std::fmt::Display>(program: &str, args: &[S]) -> std::result::Result<(), String> {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let words: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    Err(format!(
        "{program} {}: {}",
        words.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

fn ip_cmd(args: &[&str]) -> std::result::Result<(), String> {
    run("ip", args)
}

/// `iptables -w` (waits for the lock other writers, Docker among them, hold).
fn iptables(args: &[String]) -> std::result::Result<(), String> {
    let mut all = vec!["-w".to_string()];
    all.extend(args.iter().cloned());
    run("iptables", &all)
}

/// A tap device on the run's bridge, deleted when dropped.
pub struct Tap {
    pub name: String,
}

impl Tap {
    pub fn create(name: &str, bridge: &str, run_id: &str) -> Result<Self> {
        ip_cmd(&["tuntap", "add", "dev", name, "mode", "tap"]).map_err(vm_err)?;
        let tap = Self { name: name.to_string() };
        ip_cmd(&["link", "set", "dev", name, "alias", &run_mark(run_id)]).map_err(vm_err)?;
        ip_cmd(&["link", "set", "dev", name, "master", bridge, "up"]).map_err(vm_err)?;
        Ok(tap)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        if let Err(e) = ip_cmd(&["link", "del", "dev", &self.name]) {
            tracing::warn!("removing tap {}: {e}", self.name);
        }
    }
}

/// A protocol of a forwarded service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

/// One address a VM's link carries to a harness service: `to` answers what the VM sends to `at`:`port`.
#[derive(Debug, Clone, Copy)]
pub struct Forward {
    pub at: Ipv4Addr,
    pub proto: Proto,
    pub port: u16,
    pub to: SocketAddr,
}

/// The DNAT rules that take one VM's requests to the harness's services on its link (IMDS at
/// 169.254.169.254:80, the VPC resolver, AWS's HTTPS endpoints), each only from that VM's address on the run's
/// bridge; removed when dropped.
pub struct LinkForwards {
    specs: Vec<Vec<String>>,
}

impl LinkForwards {
    pub fn add(bridge: &str, vm: Ipv4Addr, forwards: &[Forward], run_id: &str) -> Result<Self> {
        let mut added = Self { specs: Vec::new() };
        for f in forwards {
            let spec = forward_spec(bridge, vm, f, run_id);
            let mut insert = vec!["-t".to_string(), "nat".into(), "-I".into()];
            insert.extend(spec.iter().cloned());
            // On an error the rules added so far are removed as `added` drops.
            iptables(&insert).map_err(vm_err)?;
            added.specs.push(spec);
        }
        Ok(added)
    }
}

fn forward_spec(bridge: &str, vm: Ipv4Addr, f: &Forward, run_id: &str) -> Vec<String> {
    [
        "PREROUTING",
        "-i",
        bridge,
        "-s",
        &format!("{vm}/32"),
        "-d",
        &format!("{}/32", f.at),
        "-p",
        match f.proto {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        },
        "--dport",
        &f.port.to_string(),
        "-m",
        "comment",
        "--comment",
        &run_mark(run_id),
        "-j",
        "DNAT",
        "--to-destination",
        &f.to.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

impl Drop for LinkForwards {
    fn drop(&mut self) {
        for spec in &self.specs {
            let mut delete = vec!["-t".to_string(), "nat".into(), "-D".into()];
            delete.extend(spec.iter().cloned());
            if let Err(e) = iptables(&delete) {
                tracing::warn!("removing a VM's forwarding rule: {e}");
            }
        }
    }
}

/// What a killed run `run_id` left on the host: its taps and its forwarding rules. Returns how many were removed.
pub fn remove_leftovers(run_id: &str) -> usize {
    let mark = run_mark(run_id);
    let mut removed = 0;
    if let Ok(out) = std::process::Command::new("ip")
        .args(["-o", "link", "show", "type", "tun"])
        .output()
    {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if !line.contains(&format!("alias {mark}")) {
                continue;
            }
            let name = line.split(':').nth(1).map(|n| n.trim().trim_end_matches("@NONE"));
            if let Some(name) = name {
                if ip_cmd(&["link", "del", "dev", name]).is_ok() {
                    removed += 1;
                }
            }
        }
    }
    if let Ok(out) = std::process::Command::new("iptables")
        .args(["-w", "-t", "nat", "-S", "PREROUTING"])
        .output()
    {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some(rule) = line.strip_prefix("-A ") else { continue };
            let Some(delete) = leftover_rule(rule, &mark) else {
                continue;
            };
            if iptables(&delete).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// The arguments that delete `rule` (a line of `iptables -S` without its `-A `) when it carries `mark`:
/// iptables quotes the comment it prints, and takes it back unquoted as one argument.
fn leftover_rule(rule: &str, mark: &str) -> Option<Vec<String>> {
    let words: Vec<String> = rule
        .split_whitespace()
        .map(|w| w.trim_matches('"').to_string())
        .collect();
    let marked = words.windows(2).any(|w| w[0] == "--comment" && w[1] == mark);
    marked.then(|| {
        let mut delete = vec!["-t".to_string(), "nat".into(), "-D".into()];
        delete.extend(words);
        delete
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_runs_rule_is_found_by_its_mark_and_no_other_run_s() {
        let line = "PREROUTING -s 172.21.255.254/32 -d 169.254.169.254/32 -i br-684af912c156 -p tcp -m tcp \
                    --dport 80 -m comment --comment \"nodejoin-run=6b09693e-72c94e\" -j DNAT --to-destination \
                    172.21.0.1:33669";
        let delete = leftover_rule(line, &run_mark("6b09693e-72c94e")).unwrap();
        assert_eq!(&delete[..4], ["-t", "nat", "-D", "PREROUTING"]);
        assert!(delete.contains(&"nodejoin-run=6b09693e-72c94e".to_string()));
        assert!(leftover_rule(line, &run_mark("6b09693e")).is_none());
        assert!(leftover_rule(line, &run_mark("other")).is_none());
    }

    #[test]
    fn the_rule_is_limited_to_one_address_on_the_runs_bridge_and_carries_the_run() {
        let imds = Forward {
            at: "169.254.169.254".parse().unwrap(),
            proto: Proto::Tcp,
            port: 80,
            to: "172.18.0.1:40123".parse().unwrap(),
        };
        let spec = forward_spec("br-0123456789ab", "172.18.255.254".parse().unwrap(), &imds, "r1").join(" ");
        assert_eq!(
            spec,
            "PREROUTING -i br-0123456789ab -s 172.18.255.254/32 -d 169.254.169.254/32 -p tcp --dport 80 \
             -m comment --comment nodejoin-run=r1 -j DNAT --to-destination 172.18.0.1:40123"
        );
        let dns = Forward {
            at: "169.254.169.253".parse().unwrap(),
            proto: Proto::Udp,
            port: 53,
            to: "172.18.0.1:40999".parse().unwrap(),
        };
        let spec = forward_spec("br-0123456789ab", "172.18.255.254".parse().unwrap(), &dns, "r1").join(" ");
        assert!(spec.contains("-d 169.254.169.253/32 -p udp --dport 53 "), "{spec}");
    }
}

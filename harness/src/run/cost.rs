//! What a run cost, measured in the run itself: the host's CPU while it ran (everything on the host: nodes, control
//! planes, the engine, the harness), and each node's CPU against its real parts' own (the kubelet, containerd, the
//! bootstrap, the pods: what an instance of the AMI spends to join), with nodejoin's own share of it. Printed
//! under a run's summary and in its `run_finished` event; `benches/suite.rs` prints it for the bundled suite.
use crate::run::report::ScenarioReport;
use std::time::Duration;

/// A run's cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunCost {
    pub wall: Duration,
    /// The host's busy CPU time while the run lasted; `None` where `/proc/stat` cannot be read.
    pub host_cpu: Option<Duration>,
    /// Container nodes whose CPU was profiled, with their CPU p50, their ratio to their real parts' own (p50)
    /// and nodejoin's share of their CPU (p50).
    pub profiled_nodes: usize,
    pub node_cpu_p50: Option<Duration>,
    pub ratio_p50: Option<f64>,
    pub nodejoin_share_p50: Option<f64>,
    /// Each VM node's CPU (QEMU's process), by scenario.
    pub vm_nodes: Vec<(String, Duration)>,
}

impl RunCost {
    pub fn of(reports: &[ScenarioReport], wall: Duration, host_cpu: Option<Duration>) -> RunCost {
        let mut cpu = Vec::new();
        let mut ratios = Vec::new();
        let mut shares = Vec::new();
        let mut vm_nodes = Vec::new();
        for r in reports {
            for n in &r.nodes {
                if n.machine {
                    if let Some(c) = n.cpu {
                        vm_nodes.push((r.name.clone(), c));
                    }
                    continue;
                }
                let Some(parts) = n.cpu_parts() else { continue };
                cpu.push(parts.total().as_secs_f64());
                ratios.extend(parts.ratio());
                shares.extend(parts.nodejoin_share());
            }
        }
        RunCost {
            wall,
            host_cpu,
            profiled_nodes: cpu.len(),
            node_cpu_p50: median(&mut cpu).map(Duration::from_secs_f64),
            ratio_p50: median(&mut ratios),
            nodejoin_share_p50: median(&mut shares),
            vm_nodes,
        }
    }

    /// One line for a run's summary.
    pub fn line(&self) -> String {
        let mut out = String::from("cost:");
        if let Some(h) = self.host_cpu {
            out.push_str(&format!(
                " host CPU {:.0} CPU-s over {:.0}s ({:.2} cores busy);",
                h.as_secs_f64(),
                self.wall.as_secs_f64(),
                h.as_secs_f64() / self.wall.as_secs_f64().max(0.001)
            ));
        }
        match (self.node_cpu_p50, self.ratio_p50) {
            (Some(cpu), Some(ratio)) => out.push_str(&format!(
                " container nodes {}: CPU p50 {:.2}s, {ratio:.2}x their real parts' own (p50), nodejoin's share {:.0}% (p50)",
                self.profiled_nodes,
                cpu.as_secs_f64(),
                self.nodejoin_share_p50.unwrap_or(0.0) * 100.0
            )),
            _ => out.push_str(" no node's CPU was profiled"),
        }
        if !self.vm_nodes.is_empty() {
            let vms: Vec<String> = self
                .vm_nodes
                .iter()
                .map(|(s, c)| format!("{s} {:.1}s", c.as_secs_f64()))
                .collect();
            out.push_str(&format!("; VM nodes (QEMU's CPU): {}", vms.join(", ")));
        }
        out
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "hostCpuSeconds": self.host_cpu.map(|d| d.as_secs_f64()),
            "profiledNodes": self.profiled_nodes,
            "nodeCpuP50": self.node_cpu_p50.map(|d| d.as_secs_f64()),
            "ratioToRealPartsP50": self.ratio_p50,
            "nodejoinShareP50": self.nodejoin_share_p50,
            "vmNodes": self.vm_nodes.iter().map(|(s, c)| serde_json::json!({"scenario": s, "cpu": c.as_secs_f64()})).collect::<Vec<_>>(),
        })
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::cpu::{Part, Profile};
    use crate::run::timeline::NodeTimeline;

    fn node(parts: &[(Part, u64)]) -> NodeTimeline {
        let mut p = Profile::default();
        for (part, ms) in parts {
            p.parts[*part as usize] = Duration::from_millis(*ms);
        }
        NodeTimeline {
            cpu_profile: vec![("join".into(), p)],
            ..Default::default()
        }
    }

    #[test]
    fn the_medians_are_over_profiled_container_nodes_and_vms_are_apart() {
        let mut r = ScenarioReport::new("s", "s.yaml".into());
        r.nodes = vec![
            node(&[(Part::Kubelet, 1000), (Part::Nodejoin, 200), (Part::System, 800)]),
            node(&[(Part::Kubelet, 1000), (Part::Nodejoin, 100)]),
            node(&[(Part::Bootstrap, 2000), (Part::Nodejoin, 1000), (Part::System, 1000)]),
            NodeTimeline {
                machine: true,
                cpu: Some(Duration::from_secs(40)),
                ..Default::default()
            },
        ];
        let c = RunCost::of(&[r], Duration::from_secs(10), Some(Duration::from_secs(15)));
        assert_eq!(c.profiled_nodes, 3);
        assert_eq!(c.node_cpu_p50, Some(Duration::from_millis(2000)));
        assert_eq!(c.ratio_p50, Some(2.0));
        assert_eq!(c.vm_nodes, vec![("s".to_string(), Duration::from_secs(40))]);
        let line = c.line();
        assert!(
            line.starts_with("cost: host CPU 15 CPU-s over 10s (1.50 cores busy);"),
            "{line}"
        );
        assert!(line.contains("2.00x their real parts' own"), "{line}");
        assert!(line.ends_with("VM nodes (QEMU's CPU): s 40.0s"), "{line}");
    }

    #[test]
    fn a_run_without_profiles_says_so() {
        let c = RunCost::of(&[], Duration::from_secs(1), None);
        assert_eq!(c.line(), "cost: no node's CPU was profiled");
    }
}

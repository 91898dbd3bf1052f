//! The suite's cost, measured in one run (a benchmark, never a timed test): runs `nodejoin run --format json` on
//! the given scenarios (default: the bundled ones) and prints the suite's wall and host CPU, the container nodes'
//! CPU p50 against their real parts' own (the floor: the kubelet, containerd, the bootstrap, the pods), nodejoin's
//! share, and each VM node's CPU against the container node of the same AL2023 user data.
//!
//! `cargo bench --bench suite [-- SCENARIO...]`; the environment is the run's (`NODEJOIN_EKS_AMI`, ...). The
//! figures are the run's own (`harness/src/run/cost.rs`); this adds the pairs and the per-part sums.
use serde_json::Value;
use std::process::{Command, Stdio};

/// A VM scenario and the container scenario whose node runs the same AL2023 user data (the VM's adds probes).
const PAIRS: &[(&str, &str)] = &[("vm-al2023", "al2023-terraform-mime")];

fn main() {
    // libtest's own flags (`--bench`) are not scenarios.
    let mut scenarios: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if scenarios.is_empty() {
        scenarios.push(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios").to_string());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_nodejoin"))
        .args(["run", "--format", "json"])
        .args(&scenarios)
        .stderr(Stdio::inherit())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("suite bench: could not start nodejoin: {e}");
            std::process::exit(2);
        }
    };
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let Some(finished) = events.iter().find(|e| e["event"] == "run_finished") else {
        eprintln!("suite bench: the run did not finish (exit {:?})", out.status.code());
        std::process::exit(2);
    };
    let cost = &finished["cost"];
    let wall = finished["wall"].as_f64().unwrap_or(0.0);
    let host = cost["hostCpuSeconds"].as_f64().unwrap_or(0.0);
    println!(
        "suite: {} passed, {} failed, {} ignored; wall {wall:.0}s; host CPU {host:.0} CPU-s ({:.2} cores busy); harness {:.1} CPU-s",
        finished["passed"],
        finished["failed"],
        finished["ignored"],
        host / wall.max(0.001),
        finished["harnessCpuSeconds"].as_f64().unwrap_or(0.0)
    );
    // Every profiled container node: its CPU, its floor, by part.
    let mut cpu = Vec::new();
    let mut floor = Vec::new();
    let mut sums = std::collections::BTreeMap::<String, f64>::new();
    let mut by_scenario = std::collections::BTreeMap::<String, f64>::new();
    for e in events.iter().filter(|e| e["event"] == "scenario_finished") {
        for n in e["nodes"].as_array().into_iter().flatten() {
            let p = &n["cpuProfile"];
            let Some(parts) = p["parts"].as_object() else { continue };
            let total: f64 = parts.values().filter_map(Value::as_f64).sum();
            cpu.push(total);
            floor.push(p["realParts"].as_f64().unwrap_or(0.0));
            for (k, v) in parts {
                *sums.entry(k.clone()).or_default() += v.as_f64().unwrap_or(0.0);
            }
            if let Some(s) = e["scenario"].as_str() {
                by_scenario.entry(s.to_string()).or_insert(total);
            }
        }
    }
    println!(
        "container nodes: {} profiled; CPU p50 {:.2}s; floor (real parts) p50 {:.2}s; {:.2}x the floor (p50 of each node's ratio); nodejoin's share p50 {:.1}%",
        cpu.len(),
        median(&mut cpu.clone()),
        median(&mut floor),
        cost["ratioToRealPartsP50"].as_f64().unwrap_or(0.0),
        cost["nodejoinShareP50"].as_f64().unwrap_or(0.0) * 100.0
    );
    let all: f64 = sums.values().sum();
    let parts: Vec<String> = sums
        .iter()
        .map(|(k, v)| format!("{k} {v:.1}s ({:.0}%)", v * 100.0 / all.max(0.001)))
        .collect();
    println!("container nodes' CPU by part, summed: {}", parts.join(", "));
    for vm in cost["vmNodes"].as_array().into_iter().flatten() {
        let name = vm["scenario"].as_str().unwrap_or_default();
        let vm_cpu = vm["cpu"].as_f64().unwrap_or(0.0);
        let twin = PAIRS.iter().find(|(v, _)| *v == name).map(|(_, c)| *c);
        match twin.and_then(|c| by_scenario.get(c).map(|cpu| (c, cpu))) {
            Some((c, cpu)) => println!(
                "VM node {name}: {vm_cpu:.1} CPU-s (QEMU), {:.0}x the container node of {c} ({cpu:.2}s)",
                vm_cpu / cpu.max(0.001)
            ),
            None => println!("VM node {name}: {vm_cpu:.1} CPU-s (QEMU)"),
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

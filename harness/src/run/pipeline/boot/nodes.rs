//! Starting a scenario's nodes: each container with its EC2 identity (instance, DMI, files the node reads), then
//! its bootstrap, run by the harness (traced) or by the node's own cloud-init from user data.
use crate::error::{Error, Result};
use crate::fakes::iam::{CredentialMode, CredentialPolicy};
use crate::fakes::instances::Instance;
use crate::node::machine::container::{self, NodeFile, NodeSpec};
use crate::run::env::Environment;
use crate::run::node::RunningNode;
use crate::run::report::NodeTimeline;
use crate::scenario::model::{CredentialsMode, ImdsTokens, Lifecycle, NodeGroup, Scenario};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Instant, SystemTime};

/// Starts one node container, gives it an EC2 identity and waits for systemd. Needs no control plane.
pub(crate) async fn boot_node(
    env: &Environment,
    sc: &Scenario,
    (image, machine): (
        Option<&crate::node::image::NodeImage>,
        Option<&crate::run::pipeline::provision::machine::Machine>,
    ),
    group: &NodeGroup,
    index: u32,
) -> Result<RunningNode> {
    let mut vars = BTreeMap::new();
    let label = format!("{}-{}", group.name, index);
    // The bootstrap the harness puts at /etc/eks/bootstrap.sh: the group's script, else ours, unless the group's
    // own image brings one (an overlay with etc/eks/bootstrap.sh, or a user's image).
    let image_brings_bootstrap = group.bootstrap.script.is_none()
        && group.image.as_ref().is_some_and(|g| {
            g.tag.is_some()
                || g.overlay
                    .as_ref()
                    .is_some_and(|d| crate::node::image::overlay_has_bootstrap(Path::new(d)))
        });
    let mut bootstrap_files = Vec::new();
    if !image_brings_bootstrap {
        let script_path = match group.bootstrap.script.as_deref() {
            Some(s) => std::path::PathBuf::from(s),
            None => crate::paths::reference_bootstrap(&env.settings),
        };
        let limits_path = crate::paths::fixtures_dir(&env.settings)
            .join("bootstrap")
            .join("eni-limits.txt");
        // The scenario's script is read as the scenario may read (inside its repository, a regular file);
        // ours are nodejoin's own files.
        let script = match group.bootstrap.script.as_deref() {
            Some(_) => sc
                .roots
                .read(&script_path, "bootstrap script", crate::scenario::confine::MAX_FILE)
                .map_err(|m| Error::Image(format!("node group '{}': {m}", group.name)))?,
            None => std::fs::read(&script_path).map_err(|e| Error::io(&script_path, e))?,
        };
        let limits = std::fs::read(&limits_path).map_err(|e| Error::io(&limits_path, e))?;
        for (path, content, mode) in [
            ("/etc/eks/bootstrap.sh", script, 0o755),
            ("/etc/eks/eni-limits.txt", limits, 0o644),
        ] {
            bootstrap_files.push(NodeFile {
                path: path.into(),
                content,
                mode,
            });
        }
    }
    let endpoints = env.aws_endpoint_env();
    let ecr_host = crate::fakes::ecr::eks_registry_host(&sc.cluster.region);
    let aws_env: String = endpoints.iter().map(|e| format!("{e}\n")).collect();
    let mut files = bootstrap_files;
    let own_kernel = group.capabilities().kind.own_kernel;
    // A node on the host's kernel keeps its journal in a host directory that outlives it; a machine keeps its own
    // on its disk, as an instance does (the VM layer restores AL2023's persistent journal).
    if !own_kernel {
        files.push(crate::node::journal::drop_in());
    }
    match own_kernel {
        // A container reaches the fakes at their own addresses: its services (cloud-init, nodeadm, the kubelet's
        // credential plugin) through endpoint variables, containerd's pulls from the EKS ECR registry through a
        // mirror entry. (A bootstrap the harness runs gets the variables on its command line, in a VM too.)
        false => files.extend([
            // The fakes' addresses, for nodejoin's own units (the in-node IMDS redirect) and probes.
            NodeFile {
                path: "/etc/nodejoin/node.env".into(),
                content: format!(
                    "{}={}\n{aws_env}{}\n",
                    crate::settings::var::NODE_IMDS,
                    env.imds_addr,
                    env.sts_endpoint_env()
                )
                .into_bytes(),
                mode: 0o644,
            },
            NodeFile {
                path: "/etc/systemd/system.conf.d/10-nodejoin.conf".into(),
                content: format!(
                    "[Manager]\nDefaultEnvironment={}\n",
                    endpoints
                        .iter()
                        .map(|e| format!("\"{e}\""))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
                .into_bytes(),
                mode: 0o644,
            },
            NodeFile {
                path: format!("/etc/containerd/certs.d/{ecr_host}/hosts.toml"),
                content: crate::fakes::registry::containerd_hosts_toml(&ecr_host, &env.registry_url).into_bytes(),
                mode: 0o644,
            },
        ]),
        // A machine reaches AWS as an instance does, by AWS's names (the VPC resolver its DHCP names, the front of
        // the fakes on its link). What it needs for that is the CA of those names' certificates: one file in the
        // directory Go's TLS (nodeadm, containerd, the kubelet's plugins) reads trust anchors from.
        true => files.push(NodeFile {
            path: crate::node::vm::export::TRUST_ANCHOR.into(),
            content: env.endpoints_ca.clone().into_bytes(),
            mode: 0o644,
        }),
    }
    let container_name = format!("nodejoin-{}-{}-{label}", env.run_id, sc.name);
    let (instance_id, mac) = Instance::new_ids();
    // A VM's kernel and disk were made (or found in the cache) by `provision`: the boot is timed without them.
    if own_kernel && machine.is_none() {
        return Err(Error::Pipeline(format!(
            "node group {}: boot before its machine was made",
            group.name
        )));
    }
    let host_kernel_before = crate::assert::host_kernel::snapshot();
    // The turn is held until systemd is up (or has missed its deadline); the boot is timed from the turn on.
    let turn = env.boot_slot().await?;
    let t0 = Instant::now();
    let container = match machine {
        Some(machine) => {
            let region = &sc.cluster.region;
            crate::run::pipeline::provision::machine::start(
                env,
                machine,
                group,
                &container_name,
                &instance_id,
                &mac,
                region,
                files,
            )
            .await?
        }
        None => {
            let image = image.ok_or_else(|| Error::Pipeline(format!("node group {} has no node image", group.name)))?;
            let journal = crate::node::journal::HostJournal::create(env.settings.clone(), &env.run_id, &container_name)
                .map_err(|e| Error::node(&container_name, format!("a directory for its journal: {e}")))?;
            let kept_var = match group.reboots() {
                true => Some(
                    crate::node::kept_var::KeptVar::create(&env.run_id, &container_name)
                        .map_err(|e| Error::node(&container_name, format!("a directory for its /var: {e}")))?,
                ),
                false => None,
            };
            container::start(
                &env.docker,
                NodeSpec {
                    container_name,
                    hostname: label.clone(),
                    image,
                    network: &env.network,
                    run_id: &env.run_id,
                    files,
                    env: crate::node::dmi::entrypoint_env(&instance_id, &group.instance_type),
                    journal: Some(journal),
                    kept_var,
                },
            )
            .await?
        }
    };
    if let Some(info) = group.instance_type_info {
        env.ec2.add_instance_type(
            &group.instance_type,
            crate::eks::max_pods::EniLimits {
                enis: info.maximum_network_interfaces,
                ipv4_per_eni: info.ipv4_addresses_per_interface,
            },
        );
    }
    let instance = env.instances.register(Instance {
        instance_id,
        instance_type: group.instance_type.clone(),
        lifecycle: match group.lifecycle {
            Lifecycle::OnDemand => "on-demand".into(),
            Lifecycle::Spot => "spot".into(),
        },
        availability_zone: group
            .availability_zone
            .clone()
            .unwrap_or_else(|| format!("{}a", sc.cluster.region)),
        region: sc.cluster.region.clone(),
        account_id: sc.cluster.account_id.clone(),
        ami_id: "ami-0nodejoin000000001".into(),
        private_ip: container.ip,
        // The interface's own MAC, as on EC2 (nodeadm's boot hook finds the primary link by it).
        mac: container.mac.clone().unwrap_or(mac),
        vpc: crate::fakes::vpc::Vpc::new(&sc.cluster_name(), &sc.cluster.network),
        role_name: Some(group.role.clone()),
        user_data: None,
        imds_v2_required: group.imds.tokens == ImdsTokens::Required,
        put_hop_limit: group.imds.hop_limit.unwrap_or(crate::fakes::imds::DEFAULT_HOP_LIMIT),
        credentials: CredentialPolicy {
            lifetime: group
                .imds
                .credential_lifetime
                .unwrap_or(CredentialPolicy::default().lifetime),
            mode: match group.imds.credentials {
                CredentialsMode::Valid => CredentialMode::Valid,
                CredentialsMode::Expired => CredentialMode::Expired,
                CredentialsMode::WrongSecret => CredentialMode::WrongSecret,
            },
        },
        launch_time: SystemTime::now(),
    });
    for f in group.faults.iter().filter(|f| f.empty_private_dns_name) {
        env.ec2
            .empty_private_dns_name_for(&instance.instance_id, f.first.unwrap_or(u32::MAX));
    }
    let faults: Vec<crate::fakes::calls::Fault> = group
        .faults
        .iter()
        .filter(|f| !f.empty_private_dns_name)
        .map(|f| crate::fakes::calls::Fault {
            service: f.service.as_str().into(),
            action: f.action.clone(),
            first: f.first,
            status: f.status,
            latency: f.latency,
            hang: f.hang,
        })
        .collect();
    env.calls.inject(&instance.instance_id, &faults);
    vars.insert("instance.id".into(), instance.instance_id.clone());
    vars.insert("instance.privateDnsName".into(), instance.private_dns_name());
    vars.insert("instance.privateIp".into(), instance.private_ip.to_string());
    vars.insert("instance.az".into(), instance.availability_zone.clone());
    vars.insert("instance.type".into(), instance.instance_type.clone());
    vars.insert("node.arch".into(), crate::scenario::template::node_arch().into());
    let expected_name = instance.private_dns_name();
    let mut node = RunningNode {
        group: group.clone(),
        expect: group.expect.clone(),
        timeline: NodeTimeline {
            node_name: expected_name.clone(),
            label: label.clone(),
            group: group.name.clone(),
            instance_id: instance.instance_id.clone(),
            ip: instance.private_ip.to_string(),
            machine: container.capabilities.kind.own_kernel,
            ..Default::default()
        },
        machine: container,
        instance,
        node_name: expected_name,
        vars,
        bootstrap: None,
        bootstrap_error: None,
        kubelet_start: Instant::now(),
        node: None,
        serving: None,
        serving_error: String::new(),
        client_csr: None,
        serving_csr: None,
        evidence: vec![None; group.expect.evidence.len()],
        evidence_complete_at: None,
        failure_probed_at: None,
        liveness_checked_at: None,
        container_exit: None,
        registered_as: None,
        done: false,
        user_data_note: None,
        cloud_init: None,
        nodeadm: None,
        booted: t0,
        invocation: None,
        executables: None,
        stopped: None,
        host_kernel_before,
        cpu_readings: Vec::new(),
        cpu_units: Default::default(),
    };
    // A machine whose bootstrap is its user data boots once that is in IMDS (`run_bootstrap`): an instance
    // reads it at its first boot.
    if node.machine.capabilities.kind.own_kernel && group.user_data.is_some() {
        drop(turn);
        return Ok(node);
    }
    let booted = match node.machine.power_on() {
        Ok(()) => node.machine.wait_systemd(crate::deadline::SYSTEMD_BOOT).await,
        Err(e) => Err(e),
    };
    drop(turn);
    if let Err(e) = booted {
        // Keep the node so its artifacts are collected and it is removed; the failure shows as a check.
        node.bootstrap_error = Some(e.to_string());
        node.timeline.container_up = None;
        return Ok(node);
    }
    node.timeline.container_up = Some(t0.elapsed());
    node.note_cpu("boot").await;
    Ok(node)
}

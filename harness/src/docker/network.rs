//! A run's own bridge network, and a node container kept at its address across a restart (an instance keeps its
//! private IP across a reboot). Docker gives a restarted container the lowest free address of its network, not
//! the one it had: with scenarios starting and ending around a reboot, a lower one is often free (seen: a node at
//! .6 back at .5). A container asks for its own again only on a network whose subnet was given when it was made.
use super::{docker_err, run_labels, Docker};
use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::time::Duration;
use testcontainers::bollard::models::{
    EndpointIpamConfig, EndpointSettings, Ipam, IpamConfig, NetworkConnectRequest, NetworkCreateRequest,
    NetworkDisconnectRequest,
};

/// A user-defined bridge network for one run; Docker picks a free subnet, so parallel runs never collide.
pub struct RunNetwork {
    pub name: String,
    pub gateway: Ipv4Addr,
    pub subnet: ipnet::Ipv4Net,
}

/// Docker picks a free subnet for the network; it is then made again with that subnet given, so a container can
/// ask for its address back ([`restart_at`]). Another engine client may take the subnet in between: then the
/// network is made once more, Docker picking again.
pub async fn create_network(docker: &Docker, run_id: &str) -> Result<RunNetwork> {
    let name = format!("nodejoin-{run_id}");
    let mut last = None;
    for _ in 0..3 {
        create(docker, run_id, &name, None).await?;
        let (subnet, gateway) = match addresses(docker, &name).await {
            Ok(a) => a,
            Err(e) => {
                let _ = docker.remove_network(&name).await;
                return Err(e);
            }
        };
        docker
            .remove_network(&name)
            .await
            .map_err(docker_err("remove network"))?;
        match create(docker, run_id, &name, Some((subnet, gateway))).await {
            Ok(()) => return Ok(RunNetwork { name, gateway, subnet }),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::Docker(format!("network {name} could not be made"))))
}

async fn create(docker: &Docker, run_id: &str, name: &str, given: Option<(ipnet::Ipv4Net, Ipv4Addr)>) -> Result<()> {
    let ipam = given.map(|(subnet, gateway)| Ipam {
        config: Some(vec![IpamConfig {
            subnet: Some(subnet.to_string()),
            gateway: Some(gateway.to_string()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    docker
        .create_network(NetworkCreateRequest {
            name: name.to_string(),
            driver: Some("bridge".into()),
            labels: Some(run_labels(run_id)),
            ipam,
            ..Default::default()
        })
        .await
        .map(|_| ())
        .map_err(docker_err("create network"))
}

async fn addresses(docker: &Docker, name: &str) -> Result<(ipnet::Ipv4Net, Ipv4Addr)> {
    let inspect = docker
        .inspect_network(name, None)
        .await
        .map_err(docker_err("inspect network"))?;
    let config: Option<IpamConfig> = inspect.ipam.and_then(|i: Ipam| i.config).and_then(|c| {
        c.into_iter()
            .find(|c| c.subnet.as_deref().is_some_and(|s| s.contains('.')))
    });
    let subnet = config
        .as_ref()
        .and_then(|c| c.subnet.as_deref())
        .and_then(|s| s.parse().ok());
    let gateway = config
        .as_ref()
        .and_then(|c| c.gateway.as_deref())
        .and_then(|s| s.parse().ok());
    match (subnet, gateway) {
        (Some(subnet), Some(gateway)) => Ok((subnet, gateway)),
        _ => Err(Error::Docker(format!("network {name} has no IPv4 subnet/gateway"))),
    }
}

/// Stops `container` (its stop signal, then KILL after `stop_within`) and starts it again at `ip` (and `mac`,
/// which an engine that gives each endpoint a random one honours) on `network`.
pub async fn restart_at(
    docker: &Docker,
    container: &str,
    network: &str,
    ip: Ipv4Addr,
    mac: Option<&str>,
    stop_within: Duration,
) -> Result<()> {
    use testcontainers::bollard::query_parameters::StopContainerOptionsBuilder;
    let stop = StopContainerOptionsBuilder::new()
        .t(stop_within.as_secs() as i32)
        .build();
    docker
        .stop_container(container, Some(stop))
        .await
        .map_err(docker_err("stop container"))?;
    docker
        .disconnect_network(
            network,
            NetworkDisconnectRequest {
                container: container.to_string(),
                force: Some(true),
            },
        )
        .await
        .map_err(docker_err("disconnect container"))?;
    docker
        .connect_network(
            network,
            NetworkConnectRequest {
                container: container.to_string(),
                endpoint_config: Some(EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: Some(ip.to_string()),
                        ..Default::default()
                    }),
                    mac_address: mac.map(str::to_string),
                    ..Default::default()
                }),
            },
        )
        .await
        .map_err(docker_err("connect container"))?;
    docker
        .start_container(container, None)
        .await
        .map_err(docker_err("start container"))
}

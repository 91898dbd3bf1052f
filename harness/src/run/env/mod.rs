//! The environment shared by every scenario a process runs: one Docker network, the AWS fakes, and one control
//! plane per (provider, version, service CIDR), created on first use and stopped once unused for a while (cheap
//! ones, see `run::clusters`) or at shutdown.
pub mod cache_key;
pub mod clusters;
mod endpoints;
mod images;
pub mod lazy;
pub mod prepare;

use crate::assets::{self, kubelet::Kubelet, K8sAssets};
use crate::cluster::{self, ClusterSpec, ProviderContext};
use crate::controllers::approver::Approver;
use crate::controllers::cache::ClusterCache;
use crate::docker::Docker;
use crate::docker::{self, RunNetwork};
use crate::error::{Error, Result};
use crate::fakes::authenticator::Authenticator;
use crate::fakes::calls::CallLog;
use crate::fakes::cloudformation::CloudFormation;
use crate::fakes::ec2::Ec2;
use crate::fakes::ecr::Ecr;
use crate::fakes::eks::Eks;
use crate::fakes::imds::Imds;
use crate::fakes::instances::Instances;
use crate::fakes::registry::Registry;
use crate::fakes::sts::Sts;
use crate::fakes::FakeServer;
use crate::node::image::NodeImage;
use crate::reaper::RunState;
use crate::sysctl::SysctlGuard;
use clusters::{Clusters, IamLease, Lanes, IAM_LANES};
use endpoints::Endpoints;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Mutex;

pub use clusters::SharedCluster;

/// Everything the scenarios of one run share.
pub struct Environment {
    /// The run's settings, as its caller resolved them; every scenario of the run reads them here.
    pub settings: Arc<crate::settings::Settings>,
    pub run_id: String,
    pub run_dir: PathBuf,
    pub docker: Docker,
    pub network: RunNetwork,
    pub instances: Arc<Instances>,
    pub eks: Arc<Eks>,
    pub ec2: Arc<Ec2>,
    pub authenticator: Arc<Authenticator>,
    pub cloudformation: Arc<CloudFormation>,
    pub imds: Arc<Imds>,
    pub ecr: Arc<Ecr>,
    pub registry: Arc<Registry>,
    /// Every node's calls to the fakes, and the faults injected into them.
    pub calls: Arc<CallLog>,
    pub imds_addr: std::net::SocketAddr,
    pub eks_url: String,
    pub ec2_url: String,
    pub sts_url: String,
    pub cloudformation_url: String,
    pub ecr_url: String,
    pub registry_url: String,
    /// The HTTPS proxy nodes may be configured to use (`{{proxy.url}}`).
    pub proxy_url: String,
    webhook_base: String,
    webhook_ca: String,
    /// The CA of AWS's endpoints served by their own names (`fakes::front`), which a VM node trusts.
    pub endpoints_ca: String,
    /// The front of AWS's endpoints, and the VPC resolver that gives their names its address (VM nodes reach both
    /// on their link).
    front: std::net::SocketAddr,
    resolver: crate::fakes::resolver::Resolver,
    state: RunState,
    fakes: Vec<FakeServer>,
    assets: Mutex<HashMap<String, K8sAssets>>,
    /// Kubelets alone, for node groups of another version (`kubeletVersion`).
    kubelets: Mutex<HashMap<String, Kubelet>>,
    images: Mutex<HashMap<String, NodeImage>>,
    clusters: Clusters,
    /// One trial of a scenario at a time (its providers' trials share names).
    scenario_locks: KeyedLocks<String>,
    /// One IAM scenario at a time on a shared control plane (aws-auth is cluster-wide).
    iam_leases: KeyedLocks<ClusterSpec>,
    iam_lanes: Lanes,
    cluster_count: std::sync::atomic::AtomicUsize,
    sysctl: std::sync::Mutex<Option<SysctlGuard>>,
    sandbox_lock: Mutex<()>,
    /// Node containers that may run at once across the scenarios of this process (see [`NODE_SLOTS`]).
    node_slots: Arc<tokio::sync::Semaphore>,
    /// One scenario with VM nodes at a time (see [`Environment::machine`]).
    machine: Arc<tokio::sync::Semaphore>,
    /// Node containers that may be starting (create, then systemd's boot) at once (see [`boot_concurrency`]).
    boot_slots: tokio::sync::Semaphore,
    /// The run network as VM nodes see it (its bridge, its DHCP server), set up by the first VM node.
    vm_link: tokio::sync::OnceCell<crate::node::vm::net::RunLink>,
}

/// How many node containers the scenarios of one process run at once: enough for the bundled scenarios' usual
/// one or two nodes times the parallel jobs, so a scenario with a large node group (the scale scenario's 50)
/// waits for the machine to itself instead of starving a dozen others of CPU and hitting their deadlines.
pub const NODE_SLOTS: u32 = 16;

/// How many node containers boot at once. A container's start is CPU-bound (runc, overlay mounts, systemd and
/// journald coming up): fifty at once on two cores took 50-83 s each and, beside other scenarios, some missed
/// systemd's 120 s deadline, although each alone boots in about a second. Booting in turns keeps each boot short
/// and its deadline meaningful; the nodes still bootstrap and join all at once.
pub fn boot_concurrency(settings: &crate::settings::Settings) -> usize {
    settings
        .boot_concurrency
        .map(|n| n.max(1))
        .unwrap_or_else(|| crate::host::cpus() * 4)
}

/// Locks one of the caches of shared builds, adding to `waited` the time spent blocked: a cache stays locked while
/// a scenario builds what it lacks, so this is the time a scenario waited for builds another had started (its own
/// builds, once it holds the lock, are not counted).
async fn lock_waiting<'m, T>(m: &'m Mutex<T>, waited: &mut std::time::Duration) -> tokio::sync::MutexGuard<'m, T> {
    let t = Instant::now();
    let guard = m.lock().await;
    *waited += t.elapsed();
    guard
}

/// One async lock per key, made on first use: exclusive use of whatever the key names, held while the guard lives.
struct KeyedLocks<K>(std::sync::Mutex<HashMap<K, Arc<Mutex<()>>>>);

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        Self(std::sync::Mutex::new(HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq + Clone> KeyedLocks<K> {
    async fn lock(&self, key: &K) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.0.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(key.clone()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

/// Where the node image keeps the `docker save` archive of our pause image.
const PAUSE_ARCHIVE: &str = "/opt/nodejoin/pause.tar";

impl Environment {
    /// Reaps what killed runs left, then creates the run network and starts the fakes on its gateway.
    pub async fn start(settings: Arc<crate::settings::Settings>) -> Result<Arc<Self>> {
        // A fresh machine: missing packages installed, the Docker engine started (see `host`).
        let docker = crate::host::prepare(&settings).await?;
        crate::reaper::reap_stale(&settings, Some(&docker)).await;
        let run_id = crate::reaper::new_run_id();
        crate::signals::starting(&run_id);
        let run_dir = crate::paths::artifacts_root_checked(&settings)
            .map_err(|m| Error::Host {
                what: format!("the artifacts directory: {m}"),
                fix: format!("remove the link, or set {}", crate::settings::var::ARTIFACTS_DIR),
            })?
            .join(&run_id);
        let state = RunState::create(&settings, &run_id, &run_dir)?;
        std::fs::create_dir_all(&run_dir).map_err(|e| Error::io(&run_dir, e))?;
        // Proof for a later reaper that this directory is this run's, before it rewrites anything here.
        crate::reaper::mark_artifacts(&run_dir, &run_id).map_err(|e| Error::io(&run_dir, e))?;
        let network = docker::create_network(&docker, &run_id).await?;
        let gateway = IpAddr::V4(network.gateway);
        let instances = Instances::new();
        let eks = Eks::new(instances.clone());
        let ec2 = Ec2::new(instances.clone());
        let authenticator = Authenticator::new(instances.clone(), eks.clone());
        let cloudformation = CloudFormation::new(instances.clone());
        let imds = Imds::new(instances.clone());
        let ecr = Ecr::new(instances.clone());
        let registry = Registry::new(ecr.clone());
        // The webhook's serving certificate, for the gateway address the API servers reach it on.
        let webhook_ca = crate::pki::Ca::generate("nodejoin token webhook CA")?;
        let webhook_cert = webhook_ca.issue(
            "nodejoin-token-webhook",
            &[],
            &[rcgen::SanType::IpAddress(gateway)],
            crate::pki::Usage::Server,
        )?;
        // The certificates of AWS's endpoints by their own names, for the nodes that reach them that way.
        let endpoints_ca = endpoints::ca(&settings)?;
        let endpoints_ca_pem = endpoints_ca.0.cert_pem.clone();
        let calls = CallLog::new();
        authenticator.log_calls_to(calls.clone());
        // Every fake a node calls records its calls (and applies injected faults) through one middleware.
        let rec = |service: &'static str, router: axum::Router| {
            crate::fakes::calls::recorded(
                router,
                crate::fakes::calls::Recorder {
                    service,
                    log: calls.clone(),
                    instances: instances.clone(),
                },
            )
        };
        let callers = Arc::new(crate::fakes::callers::Callers::of_run(network.subnet));
        let sts = || {
            Arc::new(Sts {
                instances: instances.clone(),
            })
            .router()
        };
        let front = {
            use crate::fakes::front::{self, Service};
            front::router(vec![
                (Service::Ec2, rec("ec2", ec2.router())),
                (Service::Eks, rec("eks", eks.router())),
                (Service::Sts, rec("sts", sts())),
                (Service::CloudFormation, rec("cloudformation", cloudformation.router())),
                (Service::Ecr, rec("ecr", ecr.router())),
                (Service::Registry, rec("registry", registry.router())),
            ])
        };
        let start =
            |name: &'static str, router: axum::Router| FakeServer::start_for(name, gateway, router, callers.clone());
        let started: Result<Vec<FakeServer>> = async {
            Ok(vec![
                start("imds", rec("imds", imds.router())).await?,
                start("eks", rec("eks", eks.router())).await?,
                start("ec2", rec("ec2", ec2.router())).await?,
                start("sts", rec("sts", sts())).await?,
                FakeServer::start_tls(
                    "token-webhook",
                    gateway,
                    authenticator.router(),
                    &webhook_cert,
                    callers.clone(),
                )
                .await?,
                start("cloudformation", rec("cloudformation", cloudformation.router())).await?,
                start("ecr", rec("ecr", ecr.router())).await?,
                start("registry", rec("registry", registry.router())).await?,
                start(
                    "proxy",
                    rec("proxy", crate::fakes::proxy::Proxy::new(network.subnet).router()),
                )
                .await?,
                FakeServer::start_tls_named(
                    "aws-endpoints",
                    gateway,
                    front,
                    Arc::new(crate::fakes::front::Certificates::new(endpoints_ca)),
                    callers.clone(),
                    endpoints::refusals(calls.clone(), instances.clone()),
                )
                .await?,
            ])
        }
        .await;
        let found = started.and_then(|fakes| Endpoints::of(&fakes).map(|at| (fakes, at)));
        let (fakes, at) = match found {
            Ok(f) => f,
            Err(e) => {
                let _ = docker.remove_network(&network.name).await;
                return Err(e);
            }
        };
        let zone = crate::fakes::resolver::Zone {
            front: network.gateway,
            instances: instances.clone(),
            callers: callers.clone(),
        };
        let resolver = match crate::fakes::resolver::Resolver::start(network.gateway, zone, calls.clone()).await {
            Ok(r) => r,
            Err(e) => {
                let _ = docker.remove_network(&network.name).await;
                return Err(Error::Fake {
                    service: "dns",
                    message: format!("bind {}:0: {e}", network.gateway),
                });
            }
        };
        let sysctl = SysctlGuard::enter(&settings, &run_id);
        Ok(Arc::new(Self {
            boot_slots: tokio::sync::Semaphore::new(boot_concurrency(&settings)),
            settings,
            imds_addr: at.imds,
            eks_url: at.eks,
            ec2_url: at.ec2,
            sts_url: at.sts,
            cloudformation_url: at.cloudformation,
            ecr_url: at.ecr,
            registry_url: at.registry,
            proxy_url: at.proxy,
            webhook_base: format!("https://{}", at.webhook),
            webhook_ca: webhook_ca.0.cert_pem.clone(),
            endpoints_ca: endpoints_ca_pem,
            front: at.front,
            resolver,
            run_id,
            run_dir,
            docker,
            network,
            instances,
            eks,
            ec2,
            authenticator: authenticator.clone(),
            cloudformation,
            imds,
            ecr,
            registry,
            calls,
            state,
            fakes,
            assets: Mutex::new(HashMap::new()),
            kubelets: Mutex::new(HashMap::new()),
            images: Mutex::new(HashMap::new()),
            clusters: Clusters::new(authenticator.clone()),
            iam_leases: Default::default(),
            iam_lanes: Lanes::new(IAM_LANES),
            scenario_locks: Default::default(),
            cluster_count: Default::default(),
            sysctl: std::sync::Mutex::new(Some(sysctl)),
            sandbox_lock: Mutex::new(()),
            node_slots: Arc::new(tokio::sync::Semaphore::new(NODE_SLOTS as usize)),
            machine: Arc::new(tokio::sync::Semaphore::new(1)),
            vm_link: tokio::sync::OnceCell::new(),
        }))
    }

    /// Kubernetes binaries of `version` (provisioned once per process).
    pub async fn assets(&self, version: &str) -> Result<K8sAssets> {
        let mut waited = std::time::Duration::ZERO;
        self.assets_timed(version, &mut waited).await
    }

    /// [`Self::assets`], adding to `waited` the time spent blocked on another scenario's build.
    pub async fn assets_timed(&self, version: &str, waited: &mut std::time::Duration) -> Result<K8sAssets> {
        let mut cache = lock_waiting(&self.assets, waited).await;
        if let Some(a) = cache.get(version) {
            return Ok(a.clone());
        }
        let a = assets::resolve(&self.settings, version).await?;
        cache.insert(version.to_string(), a.clone());
        Ok(a)
    }

    /// The control plane for `spec`, created on first use; `true` when this call created it.
    pub async fn cluster(&self, spec: &ClusterSpec, assets: Option<&K8sAssets>) -> Result<(Arc<SharedCluster>, bool)> {
        let mut clusters = self.clusters.lock().await;
        if let Some(c) = clusters.get(spec).cloned() {
            let dead = c.control_plane.lock().await.failed_component();
            match dead {
                None => return Ok((c, false)),
                Some(why) => {
                    // A control plane that died is replaced, not handed to the next scenario.
                    tracing::warn!(provider = %spec.provider, "replacing a dead control plane: {why}");
                    clusters::detach(&c, &self.authenticator);
                    clusters.remove(spec);
                }
            }
        }
        let provider = spec.provider.get();
        if let Some(reason) = provider.unavailable(&self.settings, spec, &self.docker).await {
            return Err(Error::ProviderUnavailable {
                provider: spec.provider.as_str().into(),
                reason,
            });
        }
        let n = self.cluster_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (id, start) = (format!("control-plane-{n}"), Instant::now());
        let dir = self.run_dir.join(&id);
        let cp = provider
            .create(
                spec,
                ProviderContext {
                    settings: &self.settings,
                    docker: &self.docker,
                    assets,
                    network: &self.network,
                    dir: dir.clone(),
                    pids_dir: self.state.pids_dir(),
                    run_id: self.run_id.clone(),
                    token_webhook: Some(cluster::TokenWebhook {
                        url: format!("{}{}", self.webhook_base, Authenticator::path(&id)),
                        ca_pem: self.webhook_ca.clone(),
                    }),
                },
            )
            .await?;
        let created_in = start.elapsed();
        let client = cp.client();
        self.authenticator.bind(&id, client.clone());
        let approver = Arc::new(Approver::default());
        let (cache, mut tasks) = ClusterCache::start(&client);
        tasks.push(tokio::spawn(approver.clone().run(
            client.clone(),
            cache.clone(),
            self.instances.clone(),
        )));
        tasks.push(tokio::spawn(crate::controllers::cloud_node::run(
            client.clone(),
            cache.clone(),
            self.instances.clone(),
        )));
        let shared = Arc::new(SharedCluster {
            id,
            endpoint: cp.endpoint().to_string(),
            ca_pem: cp.ca_pem().to_string(),
            logs_dir: cp.logs_dir().to_path_buf(),
            step_timings: cp.timings().to_vec(),
            control_plane: Mutex::new(cp),
            client,
            cache,
            approver,
            created_in,
            tasks,
        });
        clusters.insert(spec.clone(), shared.clone());
        drop(clusters);
        if let Some(idle) = provider.idle_stop_after() {
            self.clusters.stop_when_idle(spec.clone(), &shared, idle);
        }
        Ok((shared, true))
    }

    /// Exclusive use of the scenario's names (node containers, cluster name) by one of its trials.
    pub async fn scenario_lock(&self, scenario: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.scenario_locks.lock(&scenario.to_string()).await
    }

    /// Room for `nodes` node containers (a larger group takes all of it), held while the permit lives; the
    /// semaphore is fair, so a large scenario waiting is not overtaken by small ones.
    pub async fn node_slots(&self, nodes: u32) -> Result<tokio::sync::OwnedSemaphorePermit> {
        self.node_slots
            .clone()
            .acquire_many_owned(nodes.clamp(1, NODE_SLOTS))
            .await
            .map_err(|e| Error::Pipeline(format!("node slots: {e}")))
    }

    /// The turn of a scenario with VM nodes, held while the permit lives: VMs of two scenarios at once slowed
    /// each other as much as they gained (TCG emulates each vCPU on a host core; measured in a cold `.ci/run`:
    /// 252 s and 287 s side by side against 170 s and 140 s one after the other).
    pub async fn machine(&self) -> Result<tokio::sync::OwnedSemaphorePermit> {
        self.machine
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Pipeline(format!("VM nodes: {e}")))
    }

    /// The run network's side for VM nodes, made on first use.
    pub async fn vm_link(&self) -> Result<&crate::node::vm::net::RunLink> {
        self.vm_link
            .get_or_try_init(|| crate::node::vm::net::RunLink::start(&self.docker, &self.network))
            .await
    }

    /// What a VM node's link carries to the harness: IMDS, the VPC resolver, AWS's endpoints by their names.
    pub fn link_services(&self) -> crate::node::vm::net::LinkServices {
        crate::node::vm::net::LinkServices {
            imds: self.imds_addr,
            resolver_udp: self.resolver.udp,
            resolver_tcp: self.resolver.tcp,
            front: self.front,
        }
    }

    /// Where the run records its children's PIDs, for the reaper.
    pub fn pids_dir(&self) -> PathBuf {
        self.state.pids_dir()
    }

    /// A turn to start one node container and wait for its systemd, held while the permit lives.
    pub async fn boot_slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>> {
        self.boot_slots
            .acquire()
            .await
            .map_err(|e| Error::Pipeline(format!("boot slots: {e}")))
    }

    /// Exclusive use of a control plane by one IAM scenario, held until the lease drops: an IAM lane (set in
    /// `spec.iam_lane`) when the provider has them, else the control plane for `spec` itself.
    pub async fn iam_lease(&self, spec: &mut ClusterSpec) -> Result<IamLease> {
        if !spec.provider.get().iam_lanes() {
            return Ok(IamLease::Shared(self.iam_leases.lock(spec).await));
        }
        let lane = self.iam_lanes.take().await?;
        spec.iam_lane = Some(lane.number());
        Ok(IamLease::Lane(lane))
    }

    /// Stops everything and reports what (if anything) was left behind.
    pub async fn shutdown(self: Arc<Self>) -> Vec<String> {
        self.clusters.shutdown().await;
        let _ = docker::remove_labelled(&self.docker, docker::RUN_LABEL, Some(&self.run_id)).await;
        if let Ok(mut guard) = self.sysctl.lock() {
            guard.take();
        }
        let leftovers = docker::leaks_of_run(&self.docker, &self.run_id)
            .await
            .unwrap_or_default();
        // The run's keys, kubeconfigs and tokens serve no one once its clusters are gone; its artifacts get uploaded.
        crate::redact::redact_tree(&self.run_dir);
        // Done explicitly: a caller that exits the process right after (libtest-mimic does) skips destructors.
        let _ = std::fs::remove_dir_all(&self.state.dir);
        let run_id = self.run_id.clone();
        drop(self);
        if !leftovers.is_empty() {
            tracing::warn!(run = %run_id, ?leftovers, "objects left behind");
        }
        leftovers
    }

    /// Makes the fake registry serve the EKS sandbox image (`eks/pause:3.5` under every region's EKS ECR name,
    /// what AMI units and nodeadm pull), taken from the node image's `docker save` archive of our pause image at
    /// `/opt/nodejoin/pause.tar`. Once per run, before the first node boots.
    /// `waited` grows by the time spent blocked while another scenario did it.
    pub async fn serve_sandbox_image(&self, node_image: &NodeImage, waited: &mut std::time::Duration) -> Result<()> {
        use crate::fakes::registry::{OciImage, SANDBOX_REPOSITORY, SANDBOX_TAG};
        let _once = lock_waiting(&self.sandbox_lock, waited).await;
        if self.registry.has(SANDBOX_REPOSITORY, SANDBOX_TAG) {
            return Ok(());
        }
        let labels = docker::run_labels(&self.run_id).into_iter().collect();
        let archive = docker::images::read_file(&self.docker, &node_image.tag, PAUSE_ARCHIVE, labels)
            .await
            .map_err(|e| {
                Error::Image(format!(
                    "{} has no {PAUSE_ARCHIVE} to serve as the EKS sandbox image: {e}",
                    node_image.tag
                ))
            })?;
        let image = OciImage::from_docker_archive(&archive).map_err(Error::Image)?;
        self.registry.add(SANDBOX_REPOSITORY, SANDBOX_TAG, image);
        Ok(())
    }

    /// `AWS_ENDPOINT_URL_<SERVICE>=<fake>` entries: how the AWS CLI and SDKs in a node reach the fakes.
    pub fn aws_endpoint_env(&self) -> Vec<String> {
        vec![
            format!("AWS_ENDPOINT_URL_EKS={}", self.eks_url),
            format!("AWS_ENDPOINT_URL_EC2={}", self.ec2_url),
            format!("AWS_ENDPOINT_URL_CLOUDFORMATION={}", self.cloudformation_url),
            format!("AWS_ENDPOINT_URL_ECR={}", self.ecr_url),
        ]
    }

    /// `<STS endpoint variable>=<fake STS>`: given to the bootstrap and in `/etc/nodejoin/node.env`, never as
    /// `AWS_ENDPOINT_URL_STS`, because `aws eks get-token` would then presign for the fake's host and the token
    /// webhook (like EKS) accepts only real STS hosts.
    pub fn sts_endpoint_env(&self) -> String {
        format!("{}={}", crate::settings::var::NODE_STS_ENDPOINT, self.sts_url)
    }

    pub fn fake_urls(&self) -> Vec<(&'static str, String)> {
        self.fakes.iter().map(|f| (f.name, f.url())).collect()
    }
}

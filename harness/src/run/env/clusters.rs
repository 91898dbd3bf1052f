//! The control planes of a run, by spec: handed out to scenarios, stopped when a cheap one has sat unused for a
//! while or at shutdown; and the IAM lanes, control planes that IAM scenarios take one at a time.
use crate::cluster::{ClusterSpec, ControlPlane};
use crate::controllers::approver::Approver;
use crate::controllers::cache::ClusterCache;
use crate::error::{Error, Result};
use crate::fakes::authenticator::Authenticator;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, MutexGuard};
use tokio::task::JoinHandle;

/// A control plane with the controllers the harness runs next to it.
pub struct SharedCluster {
    /// `control-plane-<n>`: its directory under the run, and its token-webhook path.
    pub id: String,
    pub control_plane: Mutex<Box<dyn ControlPlane>>,
    pub client: kube::Client,
    /// Its CSRs and Nodes, kept by watches (read instead of listing).
    pub cache: Arc<ClusterCache>,
    pub endpoint: String,
    pub ca_pem: String,
    pub logs_dir: PathBuf,
    pub approver: Arc<Approver>,
    pub created_in: Duration,
    pub step_timings: Vec<(String, Duration)>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

type Map = HashMap<ClusterSpec, Arc<SharedCluster>>;

/// How often an idle watcher looks whether its control plane is in use.
const IDLE_CHECK_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct Clusters {
    map: Arc<Mutex<Map>>,
    authenticator: Arc<Authenticator>,
    watchers: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// Set at shutdown: the idle watchers end (the control planes are stopped by shutdown itself).
    closing: tokio::sync::watch::Sender<bool>,
}

impl Clusters {
    pub(crate) fn new(authenticator: Arc<Authenticator>) -> Self {
        Self {
            map: Default::default(),
            authenticator,
            watchers: Default::default(),
            closing: tokio::sync::watch::channel(false).0,
        }
    }

    /// The map, locked: a control plane is looked up, replaced or created under this lock.
    pub(crate) async fn lock(&self) -> MutexGuard<'_, Map> {
        self.map.lock().await
    }

    /// Stops `cluster` (kept under `spec`) once no scenario has held it for `idle`: an unused local control plane
    /// still takes about 9 % of a core (the API server's and etcd's housekeeping), and a run whose later
    /// scenarios need other specs kept each such one alive to its end. A scenario that needs it again gets a new
    /// one.
    pub(crate) fn stop_when_idle(&self, spec: ClusterSpec, cluster: &Arc<SharedCluster>, idle: Duration) {
        let watcher = watch_idle(
            self.map.clone(),
            self.authenticator.clone(),
            spec,
            Arc::downgrade(cluster),
            idle,
            self.closing.subscribe(),
        );
        if let Ok(mut w) = self.watchers.lock() {
            w.retain(|h| !h.is_finished());
            w.push(tokio::spawn(watcher));
        }
    }

    /// Stops every control plane, and waits for any an idle watcher is stopping.
    pub(crate) async fn shutdown(&self) {
        let _ = self.closing.send(true);
        let all: Vec<Arc<SharedCluster>> = self.map.lock().await.drain().map(|(_, c)| c).collect();
        for c in all {
            stop(c, &self.authenticator).await;
        }
        let watchers: Vec<JoinHandle<()>> = match self.watchers.lock() {
            Ok(mut w) => w.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for w in watchers {
            let _ = w.await;
        }
    }
}

/// How many IAM lanes a run has: more than scenarios ever run at once by default (`-j` is at most 8 unless given),
/// and since the lowest free lane is taken, lanes beyond the IAM scenarios running at once are never created.
pub(crate) const IAM_LANES: u32 = 16;

/// Exclusive use of a control plane by one IAM scenario (aws-auth, access entries and the audit log are
/// cluster-wide), held until dropped.
pub enum IamLease {
    /// The provider's shared control plane (container providers, whose control planes take tens of seconds).
    Shared(tokio::sync::OwnedMutexGuard<()>),
    /// An IAM lane (cheap providers).
    Lane(Lane),
}

/// IAM lane `n`: a control plane that IAM scenarios use one at a time, each starting from a cluster without
/// aws-auth, and that the next IAM scenario reuses (starting one took ~5.5 s of CPU, for scenarios of ~12 s).
pub struct Lane {
    n: u32,
    free: Arc<std::sync::Mutex<BTreeSet<u32>>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Lane {
    pub fn number(&self) -> u32 {
        self.n
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Back among the free lanes before the permit (dropped after this) lets a waiter take one.
        if let Ok(mut free) = self.free.lock() {
            free.insert(self.n);
        }
    }
}

/// The free IAM lanes; the lowest is taken first, so consecutive IAM scenarios land on a control plane that
/// already runs.
pub(crate) struct Lanes {
    permits: Arc<tokio::sync::Semaphore>,
    free: Arc<std::sync::Mutex<BTreeSet<u32>>>,
}

impl Lanes {
    pub(crate) fn new(n: u32) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(n as usize)),
            free: Arc::new(std::sync::Mutex::new((0..n).collect())),
        }
    }

    pub(crate) async fn take(&self) -> Result<Lane> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Pipeline(format!("IAM lanes: {e}")))?;
        let n = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop_first())
            .ok_or_else(|| Error::Pipeline("IAM lanes: a permit without a free lane".into()))?;
        Ok(Lane {
            n,
            free: self.free.clone(),
            _permit: permit,
        })
    }
}

/// Ends what the harness runs for a control plane: its controllers and its token-webhook binding.
pub(crate) fn detach(c: &SharedCluster, authenticator: &Authenticator) {
    authenticator.unbind(&c.id);
    for t in &c.tasks {
        t.abort();
    }
}

/// Stops a control plane no longer handed out: its controllers, its token-webhook binding, its processes or
/// containers.
pub(crate) async fn stop(c: Arc<SharedCluster>, authenticator: &Authenticator) {
    detach(&c, authenticator);
    match Arc::try_unwrap(c) {
        Ok(c) => c.control_plane.into_inner().stop().await,
        Err(c) => tracing::warn!(id = %c.id, "a stopped control plane is still referenced; it stops when dropped"),
    }
}

async fn watch_idle(
    map: Arc<Mutex<Map>>,
    authenticator: Arc<Authenticator>,
    spec: ClusterSpec,
    cluster: Weak<SharedCluster>,
    idle: Duration,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    let mut unused_since: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(IDLE_CHECK_EVERY) => {}
            _ = closing.changed() => return,
        }
        if *closing.borrow() {
            return;
        }
        let mut guard = map.lock().await;
        // Under the lock that hands control planes out: held by the map alone means no scenario uses it.
        let held = match guard.get(&spec) {
            Some(c) if std::ptr::eq(Arc::as_ptr(c), cluster.as_ptr()) => Arc::strong_count(c) > 1,
            // Replaced (it had died) or stopped: nothing left to watch.
            _ => return,
        };
        if held {
            unused_since = None;
            continue;
        }
        if unused_since.get_or_insert_with(Instant::now).elapsed() < idle {
            continue;
        }
        let Some(c) = guard.remove(&spec) else {
            return;
        };
        drop(guard);
        tracing::info!(id = %c.id, provider = %spec.provider, "stopping a control plane unused for {idle:?}");
        stop(c, &authenticator).await;
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{eks::Eks, instances::Instances};
    use futures::future::BoxFuture;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A control plane that only records that it was stopped.
    struct Recorded(Arc<AtomicBool>);

    impl ControlPlane for Recorded {
        fn endpoint(&self) -> &str {
            "https://127.0.0.1:1"
        }
        fn ca_pem(&self) -> &str {
            ""
        }
        fn client(&self) -> kube::Client {
            unreachable!("not asked for in these tests")
        }
        fn client_as<'a>(&'a self, _: &'a str, _: &'a [&'a str]) -> BoxFuture<'a, crate::error::Result<kube::Client>> {
            unreachable!("not asked for in these tests")
        }
        fn kubeconfig(&self) -> &Path {
            Path::new("/nonexistent")
        }
        fn logs_dir(&self) -> &Path {
            Path::new("/nonexistent")
        }
        fn timings(&self) -> &[(String, Duration)] {
            &[]
        }
        fn failed_component(&mut self) -> Option<String> {
            None
        }
        fn memory(&self) -> Vec<(String, u64)> {
            Vec::new()
        }
        fn stop(self: Box<Self>) -> BoxFuture<'static, ()> {
            self.0.store(true, Ordering::SeqCst);
            Box::pin(async {})
        }
    }

    fn spec() -> ClusterSpec {
        ClusterSpec {
            provider: crate::cluster::Provider::LOCAL,
            version: "v1.36.3".into(),
            service_cidr: "10.100.0.0/16".parse().unwrap(),
            iam_lane: None,
            certificate_lifetime: None,
        }
    }

    async fn cluster(stopped: &Arc<AtomicBool>) -> Arc<SharedCluster> {
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let (cache, tasks) = ClusterCache::start(&client);
        Arc::new(SharedCluster {
            id: "control-plane-0".into(),
            control_plane: Mutex::new(Box::new(Recorded(stopped.clone()))),
            client,
            cache,
            endpoint: String::new(),
            ca_pem: String::new(),
            logs_dir: PathBuf::new(),
            approver: Default::default(),
            created_in: Duration::ZERO,
            step_timings: Vec::new(),
            tasks,
        })
    }

    fn clusters() -> Clusters {
        let instances = Instances::new();
        Clusters::new(Authenticator::new(instances.clone(), Eks::new(instances)))
    }

    #[tokio::test]
    async fn a_control_plane_in_use_is_kept_and_stopped_once_unused_for_the_idle_time() {
        let (all, stopped) = (clusters(), Arc::new(AtomicBool::new(false)));
        let c = cluster(&stopped).await;
        all.lock().await.insert(spec(), c.clone());
        all.stop_when_idle(spec(), &c, Duration::from_millis(100));
        // A scenario holds it: kept, however long.
        tokio::time::sleep(IDLE_CHECK_EVERY * 3).await;
        assert!(!stopped.load(Ordering::SeqCst));
        assert!(all.lock().await.contains_key(&spec()));
        drop(c);
        tokio::time::sleep(IDLE_CHECK_EVERY * 3).await;
        assert!(
            stopped.load(Ordering::SeqCst),
            "unused past its idle time, yet not stopped"
        );
        assert!(
            !all.lock().await.contains_key(&spec()),
            "a stopped control plane still handed out"
        );
        all.shutdown().await;
    }

    #[tokio::test]
    async fn shutdown_stops_every_control_plane_and_ends_the_watchers() {
        let (all, stopped) = (clusters(), Arc::new(AtomicBool::new(false)));
        let c = cluster(&stopped).await;
        all.lock().await.insert(spec(), c.clone());
        all.stop_when_idle(spec(), &c, Duration::from_secs(3600));
        drop(c);
        tokio::time::timeout(Duration::from_secs(5), all.shutdown())
            .await
            .expect("shutdown waited on a sleeping watcher");
        assert!(stopped.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn iam_lanes_are_exclusive_and_the_lowest_free_one_is_taken() {
        let lanes = Lanes::new(2);
        let (a, b) = (lanes.take().await.unwrap(), lanes.take().await.unwrap());
        assert_eq!((a.number(), b.number()), (0, 1));
        let third = tokio::time::timeout(Duration::from_millis(100), lanes.take()).await;
        assert!(third.is_err(), "a third scenario got a lane while both were held");
        drop(b);
        drop(a);
        assert_eq!(lanes.take().await.unwrap().number(), 0, "not the lowest free lane");
    }
}

//! The cluster as the harness sees it: every CSR and every Node, kept current by one watch each per control
//! plane. The approver, the cloud-node controller and every scenario's wait read from it instead of listing:
//! three lists every 150–200 ms per control plane (plus two per waiting scenario) kept the API server busy even
//! when nothing changed, and listing fifty Nodes re-sent every one of them each time.
use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// CSRs and Nodes of one control plane, as last seen.
pub struct ClusterCache {
    csrs: Store<CertificateSigningRequest>,
    nodes: Store<Node>,
    csrs_ready: AtomicBool,
    nodes_ready: AtomicBool,
    /// Bumped on every change either watch sees: waiters wake on it instead of polling.
    changed: watch::Sender<u64>,
    /// Since when a watch has failed, and why (cleared by its next event).
    failing: Mutex<Option<(Instant, String)>>,
}

/// A consistent look at the cache: both lists complete (the initial list of each watch has arrived).
pub struct Snapshot {
    pub csrs: Vec<Arc<CertificateSigningRequest>>,
    pub nodes: Vec<Arc<Node>>,
}

impl ClusterCache {
    /// Starts both watches on `client`; the tasks run until aborted.
    pub fn start(client: &kube::Client) -> (Arc<Self>, Vec<JoinHandle<()>>) {
        let (csrs, csr_writer) = reflector::store();
        let (nodes, node_writer) = reflector::store();
        let cache = Arc::new(Self {
            csrs,
            nodes,
            csrs_ready: AtomicBool::new(false),
            nodes_ready: AtomicBool::new(false),
            changed: watch::channel(0).0,
            failing: Mutex::new(None),
        });
        let tasks = vec![
            tokio::spawn(follow(
                cache.clone(),
                Api::<CertificateSigningRequest>::all(client.clone()),
                csr_writer,
                |c| &c.csrs_ready,
            )),
            tokio::spawn(follow(
                cache.clone(),
                Api::<Node>::all(client.clone()),
                node_writer,
                |c| &c.nodes_ready,
            )),
        ];
        (cache, tasks)
    }

    /// Every CSR and Node, or `None` until both watches have listed once (an empty store then would read as
    /// "no CSR, no Node").
    pub fn snapshot(&self) -> Option<Snapshot> {
        let ready = self.csrs_ready.load(Ordering::Acquire) && self.nodes_ready.load(Ordering::Acquire);
        ready.then(|| Snapshot {
            csrs: self.csrs.state(),
            nodes: self.nodes.state(),
        })
    }

    /// Since when, and why, a watch has been failing (`None` while both work).
    pub fn failing(&self) -> Option<(Duration, String)> {
        let f = self.failing.lock().ok()?;
        f.as_ref().map(|(since, why)| (since.elapsed(), why.clone()))
    }

    /// A receiver that sees each change (`changed().await` returns once something changed since it last looked).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn set_failing(&self, why: Option<String>) {
        if let Ok(mut f) = self.failing.lock() {
            match why {
                None => *f = None,
                Some(w) => {
                    let since = f.as_ref().map_or_else(Instant::now, |(s, _)| *s);
                    *f = Some((since, w));
                }
            }
        }
    }
}

/// The server ends each watch after this long and the watcher starts the next where it left off: shorter than
/// the client's read timeout (`cluster::kubeconfig::READ_TIMEOUT`), so a quiet watch ends normally while a
/// stalled one (the API server stopped) fails and marks the cache failing.
const WATCH_TIMEOUT_SECS: u32 = 10;

/// Mirrors one resource into its store, marking it ready after its first complete list.
async fn follow<K>(
    cache: Arc<ClusterCache>,
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    ready: fn(&ClusterCache) -> &AtomicBool,
) where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let stream = reflector::reflector(
        writer,
        watcher::watcher(api, watcher::Config::default().timeout(WATCH_TIMEOUT_SECS)).default_backoff(),
    );
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                cache.set_failing(None);
                if matches!(event, Event::InitDone) {
                    ready(&cache).store(true, Ordering::Release);
                }
                if !matches!(event, Event::Init | Event::InitApply(_)) {
                    cache.changed.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
            Err(e) => {
                tracing::debug!("cluster cache: watch failed, retrying: {e}");
                cache.set_failing(Some(e.to_string()));
            }
        }
    }
}

/// Waits for the next change, or `at_most`, whichever comes first (a closed channel waits out `at_most`).
pub async fn next_change(rx: &mut watch::Receiver<u64>, at_most: Duration) {
    let sleep = tokio::time::sleep(at_most);
    tokio::pin!(sleep);
    tokio::select! {
        r = rx.changed() => {
            if r.is_err() {
                // The cache is gone (its control plane stopped): nothing will wake us early.
                sleep.await;
            }
        }
        () = &mut sleep => {}
    }
}

//! The pipeline a scenario run is made of (kind's create "actions" style): each a small named step over one
//! per-scenario [`Context`], timed by the pipeline itself, which also announces each step as an event. Teardown
//! is not an action anyone calls by hand: the context owns what the run created and gives it back when the
//! pipeline ends, whichever step failed (or, if the run was cancelled, when it is dropped).
mod after;
mod announce;
mod artifacts;
pub mod assertions;
mod boot;
mod bootstrap;
pub(crate) mod observe;
mod provision;
mod snapshot;
mod teardown;

use crate::assets::K8sAssets;
use crate::cluster::objects::BootstrapToken;
use crate::cluster::ClusterSpec;
use crate::error::Result;
use crate::fakes::authenticator::Announcement;
use crate::node::image::NodeImage;
use crate::run::env::clusters::IamLease;
use crate::run::env::{Environment, SharedCluster};
use crate::run::events::{Event, EventSink};
use crate::run::node::RunningNode;
use crate::run::report::ScenarioReport;
use crate::run::trial::Trial;
use crate::scenario::model::Scenario;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// What the actions of one scenario share: its inputs, its report, and what it has created so far.
pub(crate) struct Context<'a> {
    pub env: &'a Environment,
    /// What the driver asked for; `sc` is its scenario.
    pub trial: &'a Trial,
    pub sc: &'a Scenario,
    pub report: ScenarioReport,
    pub events: &'a EventSink,
    /// What `provision` made ready.
    pub provisioned: Provisioned,
    /// What the scenario holds among the scenarios running beside it, given back at teardown.
    pub held: Held,
    pub cluster: Option<Arc<SharedCluster>>,
    pub nodes: Vec<RunningNode>,
    /// What `announce` gave the bootstrap.
    pub announced: Announced,
    /// When the pipeline started: the origin of the scenario's clock, which the nodes' milestones are placed on.
    pub started: Instant,
}

/// What `provision` made ready: binaries, images and the control plane's spec.
#[derive(Default)]
pub(crate) struct Provisioned {
    pub assets: Option<K8sAssets>,
    /// Each group's node image, in the order of `sc.nodes`; none for a group that boots a disk of its own.
    pub group_images: Vec<Option<NodeImage>>,
    /// Each group's machine (its disk, kernel and accelerator), in the order of `sc.nodes`; none for a container
    /// group. Made here, not at boot: a VM disk's build then overlaps the wait for the machine's turn.
    pub machines: Vec<Option<provision::machine::Machine>>,
    pub spec: Option<ClusterSpec>,
}

/// What a scenario holds while it runs.
#[derive(Default)]
pub(crate) struct Held {
    /// Exclusive use of a control plane (IAM scenarios: aws-auth is cluster-wide).
    pub lease: Option<IamLease>,
    /// Room for this scenario's node containers among those of the scenarios running beside it.
    pub slots: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The one scenario with VM nodes running (see [`crate::run::env::Environment::machine`]).
    pub machine: Option<tokio::sync::OwnedSemaphorePermit>,
    /// The token webhook serves this scenario's cluster name while this lives.
    pub served: Option<Announcement>,
}

/// What `announce` gave the bootstrap.
#[derive(Default)]
pub(crate) struct Announced {
    pub token: Option<BootstrapToken>,
    /// The placeholders a bootstrap's arguments and user data may use (`{{cluster.endpoint}}`...).
    pub cluster_vars: BTreeMap<String, String>,
}

/// How long an erred scenario's artifacts may take to collect (a dead control plane makes every call wait).
const ERROR_ARTIFACTS_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// One named step of the pipeline; `applies` says whether it has anything to do for this run (a step that does
/// not apply is neither run nor timed).
pub(crate) struct Action {
    pub name: &'static str,
    pub applies: fn(&Context<'_>) -> bool,
    pub timed: Timed,
    pub run: for<'c, 'a> fn(&'c mut Context<'a>) -> BoxFuture<'c, Result<()>>,
}

/// How the pipeline reports a step's time.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timed {
    /// As one phase.
    Whole,
    /// As one phase when it waited (for room, for a lease), that time counted as waiting for room
    /// (`ScenarioReport::waited_for_room`).
    IfWaited,
    /// Not at all: it reports phases of its own (one per step after the join).
    ByItself,
}

/// Less than this is not waiting.
const WAITED: std::time::Duration = std::time::Duration::from_millis(10);

fn always(_: &Context<'_>) -> bool {
    true
}

/// The pipeline, in order.
pub(crate) const PIPELINE: &[Action] = &[
    provision::ACTION,
    provision::SLOTS,
    provision::LEASE,
    boot::ACTION,
    announce::ACTION,
    bootstrap::ACTION,
    observe::ACTION,
    assertions::ACTION,
    after::ACTION,
    snapshot::ACTION,
    artifacts::ACTION,
];

impl<'a> Context<'a> {
    pub fn new(env: &'a Environment, trial: &'a Trial, report: ScenarioReport, events: &'a EventSink) -> Self {
        Self {
            env,
            trial,
            sc: &trial.scenario,
            report,
            events,
            provisioned: Provisioned::default(),
            held: Held::default(),
            cluster: None,
            nodes: Vec::new(),
            announced: Announced::default(),
            started: Instant::now(),
        }
    }

    /// The control plane `boot` started, for the steps after it (`step` names the asker in the error, a harness
    /// bug, should the pipeline's order ever break).
    pub fn cluster(&self, step: &str) -> Result<Arc<SharedCluster>> {
        self.cluster
            .clone()
            .ok_or_else(|| crate::error::Error::Pipeline(format!("{step} ran before the control plane was booted")))
    }

    /// The node slots the scenario needs: one per container, half the machine per VM (two take all of it). A
    /// TCG machine keeps about one core busy (QEMU's CPU time was 98% of a VM scenario's wall time, 2 vCPUs), so
    /// containers of other scenarios run beside one; VMs of two scenarios never do
    /// ([`crate::run::env::Environment::machine`]).
    pub fn node_count(&self) -> u32 {
        self.sc
            .nodes
            .iter()
            .map(|g| match g.capabilities().kind.weight {
                crate::node::machine::Weight::One => g.count,
                crate::node::machine::Weight::HalfTheHost => g.count.saturating_mul(crate::run::env::NODE_SLOTS / 2),
            })
            .sum()
    }

    /// Records a phase of the report and announces it.
    pub fn phase(&mut self, name: &str, took: std::time::Duration) {
        self.report.phases.push((name.to_string(), took));
        self.events.emit(Event::PhaseDone {
            scenario: self.report.name.clone(),
            phase: name.to_string(),
            took,
        });
    }

    /// Runs the pipeline up to the first error, then tears down what exists (timed as `teardown`).
    pub async fn run(&mut self) -> Result<()> {
        let mut result = Ok(());
        for action in PIPELINE {
            if !(action.applies)(self) {
                continue;
            }
            if action.timed != Timed::ByItself {
                self.events.emit(Event::PhaseStarted {
                    scenario: self.report.name.clone(),
                    phase: action.name.to_string(),
                });
            }
            let t = Instant::now();
            result = (action.run)(self).await;
            let waited = !(action.timed == Timed::IfWaited && t.elapsed() < WAITED);
            if action.timed != Timed::ByItself && waited {
                self.phase(action.name, t.elapsed());
            }
            if action.timed == Timed::IfWaited && waited {
                self.report.waited_for_room += t.elapsed();
            }
            if result.is_err() {
                break;
            }
        }
        // Evidence on every non-pass: an ERROR (the control plane died, a node failed to start, a timeout) keeps
        // what a FAILED scenario keeps, every node's logs, calls and journal, within a bound.
        if result.is_err() && self.cluster.is_some() {
            let t = Instant::now();
            if tokio::time::timeout(ERROR_ARTIFACTS_WITHIN, (artifacts::ACTION.run)(self))
                .await
                .is_err()
            {
                self.report.notes.push(format!(
                    "artifacts: collection stopped after {}s (the nodes or the control plane did not answer)",
                    ERROR_ARTIFACTS_WITHIN.as_secs()
                ));
            }
            self.phase("artifacts (after the error)", t.elapsed());
        }
        let t = Instant::now();
        teardown::run(self).await;
        self.phase("teardown", t.elapsed());
        result
    }
}

impl Drop for Context<'_> {
    /// A run cancelled mid-way (its future dropped) still gives back its containers and instances: removed in the
    /// background, as nothing can be awaited here.
    fn drop(&mut self) {
        teardown::in_background(self);
    }
}

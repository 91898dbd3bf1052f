//! A trial: what a driver (`nodejoin run`, `compare`, `mutate`, the cargo-test trials) asks the runner to do, made
//! explicit and built once: the scenario as its file says, the provider already looked up, whether to snapshot
//! the nodes, and a deliberate regression to plant. The runner reads nothing else; the scenario model holds only
//! what the file says.
use crate::cluster::Provider;
use crate::scenario::model::Scenario;
use crate::scenario::patch::TextPatch;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Trial {
    /// The scenario's file (its report names it; its relative paths were resolved against it when it loaded).
    pub file: PathBuf,
    pub scenario: Scenario,
    /// The provider it runs on.
    pub provider: Provider,
    /// Take a snapshot of every node before teardown (`nodejoin compare`): what the bootstrap did, normalised.
    pub snapshot: bool,
    /// A deliberate regression planted in the user data the scenario generates (the mutation catalogue).
    pub user_data_patch: Option<Planted>,
    /// Which attempt this is, from 1 (`nodejoin run --retries`; the `{{run.attempt}}` placeholder).
    pub attempt: u32,
    /// The run takes this scenario on several Kubernetes versions: its report says which ([`Trial::report_name`]).
    pub one_of_several_versions: bool,
}

impl Trial {
    /// `scenario` from `file` on `provider`, nothing planted, no snapshot.
    pub fn new(file: &Path, scenario: Scenario, provider: Provider) -> Self {
        Self {
            file: file.to_path_buf(),
            scenario,
            provider,
            snapshot: false,
            user_data_patch: None,
            attempt: 1,
            one_of_several_versions: false,
        }
    }

    /// Its name as cargo, nextest, filters, partitions and JUnit know it: `provider/v1.MINOR/scenario`.
    pub fn test_name(&self) -> String {
        crate::run::trials::name(
            self.provider,
            &self.scenario.cluster.kubernetes_version,
            &self.scenario.name,
        )
    }

    /// What its report, its events and its artifacts directory are called: the scenario's name, or
    /// `name@v1.MINOR` in a run that takes the scenario on several Kubernetes versions.
    pub fn report_name(&self) -> String {
        if self.one_of_several_versions {
            let version = crate::run::trials::minor(&self.scenario.cluster.kubernetes_version);
            format!("{}@{version}", self.scenario.name)
        } else {
            self.scenario.name.clone()
        }
    }

    /// The same, taking a snapshot of every node before teardown.
    pub fn snapshotted(mut self) -> Self {
        self.snapshot = true;
        self
    }

    /// The same, with `patch` planted in the user data it generates.
    pub fn planting(mut self, patch: TextPatch) -> Self {
        self.user_data_patch = Some(Planted { patch, group: None });
        self
    }

    /// The same, with `patch` planted in the user data of node group `group` only.
    pub fn planting_in(mut self, patch: TextPatch, group: &str) -> Self {
        self.user_data_patch = Some(Planted {
            patch,
            group: Some(group.to_string()),
        });
        self
    }

    /// The patch planted in `group`'s user data, if any.
    pub fn user_data_patch_of(&self, group: &str) -> Option<&TextPatch> {
        self.user_data_patch
            .as_ref()
            .filter(|p| p.group.as_deref().is_none_or(|g| g == group))
            .map(|p| &p.patch)
    }
}

/// A regression planted in the user data, and where.
#[derive(Debug, Clone)]
pub struct Planted {
    pub patch: TextPatch,
    /// The one node group it is planted in (a new launch template version's nodes); `None`: every group.
    pub group: Option<String>,
}

//! The mutation catalogue: deliberate regressions planted in our reference bootstrap and user-data generators,
//! each run against the scenarios that should notice, to show the suite catches what it claims to. A mutation
//! counts as caught only when its scenario fails on the check the catalogue names, so a scenario failing for an
//! unrelated reason is reported as such, not as a catch, and only when that check passes on the unmutated
//! scenario in the same run (a control run per catcher scenario).
pub mod catalogue;
mod command;

pub use command::command;

use crate::error::{Error, Result};
use crate::run::report::ScenarioReport;
use crate::run::trial::Trial;
use crate::run::{Environment, Outcome};
use crate::scenario::model::Provider;
use crate::scenario::patch::TextPatch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::OnceCell;

pub use catalogue::CATALOGUE;

/// Where a mutation is planted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `fixtures/bootstrap/bootstrap.sh`, for every node group that runs it.
    ReferenceBootstrap,
    /// The user data a scenario's generator (a `userData` flavor) writes.
    UserData,
    /// The user data of one node group of the catcher's scenario, by name: a regression that reaches the nodes of
    /// a new launch template version and not the ones they replace.
    GroupUserData(&'static str),
}

/// A scenario that must catch a mutation, and the check (a registered one, or one member of its family) that must
/// fail.
#[derive(Debug, Clone, Copy)]
pub struct Catcher {
    pub scenario: &'static str,
    pub check: &'static crate::assert::registry::CheckDef,
    /// The member of the check's family (`bootstrap log` of `evidence in`); empty: the check itself.
    pub detail: &'static str,
    /// Text the failed check's finding must contain (empty: any), e.g. who set a field.
    pub says: &'static str,
}

/// One deliberate regression.
#[derive(Debug, Clone, Copy)]
pub struct Mutation {
    pub name: &'static str,
    /// The real-world regression it stands for.
    pub regression: &'static str,
    pub target: Target,
    /// Text that occurs exactly once in the target, and what it becomes.
    pub find: &'static str,
    pub replace: &'static str,
    /// Tried in order until one catches it.
    pub caught_by: &'static [Catcher],
}

/// What became of one mutation.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// `scenario` failed on `check`; `failed` lists every failed check with what it found.
    Caught {
        scenario: String,
        check: String,
        failed: Vec<String>,
    },
    /// Every catcher ran and none failed on its check (each with its outcome).
    Survived { tried: Vec<String> },
    /// The mutation could not be applied or run (its anchor moved, a scenario is missing or errored).
    Broken(String),
}

#[derive(Debug, Clone)]
pub struct MutationResult {
    pub mutation: Mutation,
    pub verdict: Verdict,
}

impl MutationResult {
    pub fn caught(&self) -> bool {
        matches!(self.verdict, Verdict::Caught { .. })
    }

    /// One line for the summary table.
    pub fn line(&self) -> String {
        let m = &self.mutation;
        match &self.verdict {
            Verdict::Caught { scenario, check, .. } => {
                format!("CAUGHT    {:<24} by {scenario} ({check} failed)", m.name)
            }
            Verdict::Survived { tried } => format!("SURVIVED  {:<24} tried: {}", m.name, tried.join("; ")),
            Verdict::Broken(why) => format!("BROKEN    {:<24} {why}", m.name),
        }
    }
}

/// The catalogue's entries named in `only` (all when empty); an unknown name is an error.
pub fn select(only: &[String]) -> std::result::Result<Vec<Mutation>, String> {
    if only.is_empty() {
        return Ok(CATALOGUE.to_vec());
    }
    only.iter()
        .map(|n| {
            CATALOGUE.iter().find(|m| m.name == n).copied().ok_or_else(|| {
                let known: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
                format!("unknown mutation '{n}' (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// The mutated reference bootstrap, written under `dir`.
fn mutated_bootstrap(settings: &crate::settings::Settings, m: &Mutation, dir: &Path) -> Result<PathBuf> {
    let source = crate::paths::reference_bootstrap(settings);
    let text = std::fs::read_to_string(&source).map_err(|e| Error::io(&source, e))?;
    let patched = TextPatch::new(m.find, m.replace)
        .apply(&text)
        .map_err(|e| Error::Mutation {
            mutation: m.name.into(),
            message: format!("{}: {e}", source.display()),
        })?;
    let path = dir.join(format!("bootstrap-{}.sh", m.name));
    std::fs::write(&path, patched).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// A path as the file it names (symlinks and `..` resolved), so two spellings of one file compare equal.
fn same_file_key(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `sc` with `m` planted: node groups running the reference bootstrap get the mutated copy, or the user data
/// generators get the patch. An error when the scenario has nothing the mutation applies to.
pub fn plant(settings: &crate::settings::Settings, m: &Mutation, trial: &Trial, scratch: &Path) -> Result<Trial> {
    let mut trial = trial.clone();
    let sc = &mut trial.scenario;
    sc.name = format!("mutant-{}-{}", m.name, sc.name);
    let broken = |message: String| Error::Mutation {
        mutation: m.name.into(),
        message,
    };
    match m.target {
        Target::ReferenceBootstrap => {
            let script = mutated_bootstrap(settings, m, scratch)?;
            // Planted by nodejoin in its scratch directory, outside the scenario's repository.
            sc.roots.allow(&script);
            let reference = same_file_key(&crate::paths::reference_bootstrap(settings));
            let mut planted = 0;
            for g in &mut sc.nodes {
                let runs_reference = match &g.bootstrap.script {
                    Some(s) => same_file_key(Path::new(s)) == reference,
                    None => g.image.is_none(),
                };
                if runs_reference {
                    g.bootstrap.script = Some(script.display().to_string());
                    planted += 1;
                }
            }
            if planted == 0 {
                return Err(broken(format!("scenario {} runs no reference bootstrap", sc.name)));
            }
        }
        Target::UserData => {
            if !sc.nodes.iter().any(|g| g.user_data.is_some()) {
                return Err(broken(format!("scenario {} has no user data", sc.name)));
            }
            return Ok(trial.planting(TextPatch::new(m.find, m.replace)));
        }
        Target::GroupUserData(group) => {
            if !sc.nodes.iter().any(|g| g.name == group && g.user_data.is_some()) {
                return Err(broken(format!(
                    "scenario {} has no node group {group} with user data",
                    sc.name
                )));
            }
            return Ok(trial.planting_in(TextPatch::new(m.find, m.replace), group));
        }
    }
    Ok(trial)
}

/// Whether `report` shows the catcher's check failing, and the failed checks it quotes.
fn judge(report: &ScenarioReport, catcher: &Catcher) -> (bool, Vec<String>) {
    let failed: Vec<&crate::assert::Check> = report.checks.iter().filter(|c| !c.passed).collect();
    let hit = failed
        .iter()
        .any(|c| matches(catcher, c) && c.actual.contains(catcher.says));
    let quoted = failed
        .iter()
        .map(|c| {
            let actual: String = c.actual.chars().take(200).collect();
            format!("{}: expected {}, got {actual}", c.name, c.expected)
        })
        .collect();
    (hit, quoted)
}

/// The unmutated runs of the catchers' scenarios, once per process: a mutation is credited to a check only if
/// that check passes without it (else an environment problem would read as a catch).
#[derive(Default)]
pub struct Controls {
    runs: std::sync::Mutex<BTreeMap<String, Arc<OnceCell<ScenarioReport>>>>,
}

impl Controls {
    /// Why `catcher`'s check cannot be trusted, if it cannot: the unmutated scenario did not pass it.
    async fn refutes(&self, env: &Environment, catcher: &Catcher, file: &Path) -> Option<String> {
        let cell = match self.runs.lock() {
            Ok(mut runs) => runs.entry(catcher.scenario.to_string()).or_default().clone(),
            Err(_) => return Some("the control runs' lock is poisoned".into()),
        };
        let report = cell
            .get_or_init(|| async {
                match load(&env.settings, file) {
                    Ok(mut sc) => {
                        sc.name = format!("control-{}", sc.name);
                        run_scenario(env, &Trial::new(file, sc, Provider::LOCAL)).await
                    }
                    Err(e) => {
                        let mut r = ScenarioReport::new(catcher.scenario, file.to_path_buf());
                        r.outcome = Outcome::Error {
                            message: e.to_string(),
                            hint: e.hint().to_string(),
                        };
                        r
                    }
                }
            })
            .await;
        let named = report.checks.iter().filter(|c| matches(catcher, c)).collect::<Vec<_>>();
        match (&report.outcome, named.is_empty()) {
            (Outcome::Passed, false) if named.iter().all(|c| c.passed) => None,
            (Outcome::Passed, true) => Some(format!(
                "control: {} unmutated has no check '{}'",
                catcher.scenario,
                catcher.check_name()
            )),
            _ => Some(format!(
                "control: {} unmutated did not pass: {}",
                catcher.scenario,
                report.failure_lines().join(" | ")
            )),
        }
    }
}

/// What a mutation's trial is before it runs: why it cannot run here, if it cannot, and what it is expected to cost.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// A catcher's scenario does not apply (an amazon-eks-ami commit that cannot be had, a Kubernetes version it
    /// excludes): the trial is then ignored with that reason, never passed nor failed.
    pub not_applicable: Option<String>,
    /// Its catchers' scenarios' last own time on this host (`run::driver::costs`; an estimate for one never run):
    /// trials start longest first, so the slowest does not start last.
    pub expected: std::time::Duration,
}

/// [`Plan`] of `m`, its catchers' scenarios loaded with the run's defaults from `scenarios_dir`.
pub fn plan(
    settings: &crate::settings::Settings,
    costs: &crate::run::driver::costs::Costs,
    m: &Mutation,
    scenarios_dir: &Path,
) -> Plan {
    let mut plan = Plan::default();
    for c in m.caught_by {
        let file = scenarios_dir.join(format!("{}.yaml", c.scenario));
        let Ok(sc) = load(settings, &file) else {
            continue;
        };
        if let Some(why) = sc.not_applicable() {
            plan.not_applicable.get_or_insert(format!("{}: {why}", c.scenario));
        }
        plan.expected += costs.expected(&Trial::new(&file, sc, Provider::LOCAL));
    }
    plan
}

/// Why `m` cannot run here, if it cannot ([`Plan::not_applicable`]).
pub fn not_applicable(settings: &crate::settings::Settings, m: &Mutation, scenarios_dir: &Path) -> Option<String> {
    plan(settings, &Default::default(), m, scenarios_dir).not_applicable
}

/// A catcher's scenario, with the run's defaults (the settings' Kubernetes version and containerd line).
fn load(settings: &crate::settings::Settings, file: &Path) -> Result<crate::scenario::Scenario> {
    let defaults = crate::scenario::Defaults::from_settings(settings)?;
    crate::scenario::load_file(file, &defaults).map(crate::scenario::Scenario::fetched)
}

impl Catcher {
    /// The check's name after `node/`, as reports show it.
    pub fn check_name(&self) -> String {
        if self.detail.is_empty() {
            self.check.name.to_string()
        } else {
            format!("{} {}", self.check.name, self.detail)
        }
    }
}

/// Whether `c` is the check `catcher` names (its name after `node/`).
fn matches(catcher: &Catcher, c: &crate::assert::Check) -> bool {
    let after_node = c.name.split_once('/').map(|(_, rest)| rest).unwrap_or(&c.name);
    after_node == catcher.check_name()
}

/// Runs `m` against its catchers on the local provider, in order, until one catches it; each catcher's check
/// must first pass on the unmutated scenario (`controls`).
pub async fn run(
    env: &Environment,
    controls: &Controls,
    m: &Mutation,
    scenarios_dir: &Path,
    scratch: &Path,
) -> MutationResult {
    let broken = |why: String| MutationResult {
        mutation: *m,
        verdict: Verdict::Broken(why),
    };
    let mut tried = Vec::new();
    for catcher in m.caught_by {
        let file = scenarios_dir.join(format!("{}.yaml", catcher.scenario));
        if let Some(why) = controls.refutes(env, catcher, &file).await {
            return broken(why);
        }
        let settings = env.settings.as_ref();
        let planted =
            load(settings, &file).and_then(|sc| plant(settings, m, &Trial::new(&file, sc, Provider::LOCAL), scratch));
        let trial = match planted {
            Ok(trial) => trial,
            Err(e) => return broken(e.to_string()),
        };
        let report = run_scenario(env, &trial).await;
        let (hit, failed) = judge(&report, catcher);
        let outcome = match &report.outcome {
            Outcome::Error { message, .. } => return broken(format!("{}: {message}", catcher.scenario)),
            Outcome::Ignored(why) => format!("{} ignored: {why}", catcher.scenario),
            Outcome::Unavailable(why) => format!("{} could not run: {why}", catcher.scenario),
            _ if hit => {
                return MutationResult {
                    mutation: *m,
                    verdict: Verdict::Caught {
                        scenario: catcher.scenario.into(),
                        check: catcher.check_name(),
                        failed,
                    },
                }
            }
            Outcome::Passed => format!("{} passed", catcher.scenario),
            _ => format!(
                "{} failed, but not on '{}'{}: {}",
                catcher.scenario,
                catcher.check_name(),
                if catcher.says.is_empty() {
                    String::new()
                } else {
                    format!(" saying '{}'", catcher.says)
                },
                failed.join(" | ")
            ),
        };
        tried.push(outcome);
    }
    MutationResult {
        mutation: *m,
        verdict: Verdict::Survived { tried },
    }
}

/// `N/M caught` and one line per mutation.
pub fn summary(results: &[MutationResult]) -> String {
    let caught = results.iter().filter(|r| r.caught()).count();
    let mut out = format!("mutation catalogue: {caught}/{} caught\n", results.len());
    for r in results {
        out.push_str(&format!("  {}\n", r.line()));
    }
    out
}

/// One scenario run, its `report.txt` written like any other run's.
async fn run_scenario(env: &Environment, trial: &Trial) -> ScenarioReport {
    let files = crate::run::events::EventSink::to(vec![Box::new(crate::reporter::text::ReportFiles)]);
    crate::run::scenario::run_observed(env, trial, &files).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every anchor occurs exactly once in what it patches, so no mutation silently tests nothing.
    #[test]
    fn every_bootstrap_anchor_occurs_once() {
        let text = std::fs::read_to_string(crate::paths::reference_bootstrap(&crate::settings::for_tests())).unwrap();
        for m in CATALOGUE.iter().filter(|m| m.target == Target::ReferenceBootstrap) {
            let patched = TextPatch::new(m.find, m.replace).apply(&text);
            assert!(patched.is_ok(), "{}: {patched:?}", m.name);
            assert_ne!(patched.unwrap(), text, "{} changes nothing", m.name);
        }
    }

    #[test]
    fn names_are_unique_and_selectable() {
        let mut names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
        assert_eq!(select(&[]).unwrap().len(), CATALOGUE.len());
        assert_eq!(select(&["wrong-ca".into()]).unwrap()[0].name, "wrong-ca");
        assert!(select(&["nope".into()]).unwrap_err().contains("known: "));
    }

    #[test]
    fn planting_redirects_reference_bootstraps_and_refuses_scenarios_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = Path::new("scenarios/x.yaml");
        let sc = crate::scenario::load::parse("nodes:\n  - name: a\n    bootstrap: {}\n", file).unwrap();
        let sc = Trial::new(file, sc, Provider::LOCAL);
        let m = select(&["wrong-ca".into()]).unwrap()[0];
        let planted = plant(&crate::settings::for_tests(), &m, &sc, dir.path()).unwrap();
        let script = planted.scenario.nodes[0].bootstrap.script.clone().unwrap();
        let text = std::fs::read_to_string(script).unwrap();
        assert!(text.contains("cp /etc/ssl/certs/ca-certificates.crt"));
        assert!(planted.scenario.name.starts_with("mutant-wrong-ca-"));
        assert!(planted.user_data_patch.is_none());
        let ud = select(&["user-data-no-signal".into()]).unwrap()[0];
        assert!(plant(&crate::settings::for_tests(), &ud, &sc, dir.path())
            .unwrap_err()
            .to_string()
            .contains("no user data"));
    }

    #[test]
    fn a_group_mutation_is_planted_in_that_group_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = Path::new("scenarios/x.yaml");
        let yaml =
            "cluster: {auth: iam}\nnodes:\n  - name: workers\n    userData: {nodeadm: {}}\n  - name: spare\n    userData: {nodeadm: {}}\n";
        let sc = Trial::new(file, crate::scenario::load::parse(yaml, file).unwrap(), Provider::LOCAL);
        let m = select(&["replacement-loses-node-label".into()]).unwrap()[0];
        let planted = plant(&crate::settings::for_tests(), &m, &sc, dir.path()).unwrap();
        assert!(planted.user_data_patch_of("workers").is_none());
        assert_eq!(planted.user_data_patch_of("spare").unwrap().find, m.find);
        let other = crate::scenario::load::parse("nodes:\n  - name: spare\n    bootstrap: {}\n", file).unwrap();
        let err = plant(
            &crate::settings::for_tests(),
            &m,
            &Trial::new(file, other, Provider::LOCAL),
            dir.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no node group spare with user data"), "{err}");
        // Everywhere else, a patch reaches every group.
        let everywhere = sc.clone().planting(TextPatch::new("a", "b"));
        assert!(everywhere.user_data_patch_of("workers").is_some() && everywhere.user_data_patch_of("spare").is_some());
    }

    #[test]
    fn a_failure_on_another_check_is_not_a_catch() {
        let mut report = ScenarioReport::new("s", PathBuf::from("s.yaml"));
        report
            .checks
            .push(crate::assert::Check::new("ip-1/labels", false, "team=a", "nothing"));
        use crate::run::pipeline::assertions::node;
        let labels = Catcher {
            scenario: "s",
            check: &node::labels::DEF,
            detail: "",
            says: "",
        };
        let taints = Catcher {
            check: &node::taints::DEF,
            ..labels
        };
        let says_more = Catcher {
            says: "set by kubelet",
            ..labels
        };
        assert!(judge(&report, &labels).0);
        // The right check failing for another reason than the one named is not the catch either.
        assert!(!judge(&report, &says_more).0);
        let (hit, failed) = judge(&report, &taints);
        assert!(!hit);
        assert_eq!(failed, ["ip-1/labels: expected team=a, got nothing"]);
    }

    #[test]
    fn every_catcher_names_a_registered_check() {
        let all = crate::run::pipeline::assertions::registry::all_checks();
        for m in super::CATALOGUE {
            for c in m.caught_by {
                assert!(
                    all.contains(&c.check),
                    "{}: {} is not in the checks registry",
                    m.name,
                    c.check.name
                );
            }
        }
    }
}

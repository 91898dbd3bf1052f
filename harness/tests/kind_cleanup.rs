//! The clean-up of tests/cleanup.rs for kind: SIGTERM mid-join removes the kind control-plane container with the
//! rest, and a SIGKILLed run's kind container (which kind cannot label with the run) is found by name and reaped
//! at the next start. Its own libtest-mimic target so that where kind has nothing to check or cannot run, the
//! trial is listed as ignored with the reason (never passed without running); where kind is required, or under
//! CI (where .ci/run provisions it), a kind that cannot run is a failure. One trial: no turns to take.
use libtest_mimic::{Arguments, Trial};
use nodejoin::run::trials;
use nodejoin::scenario::model::Provider;
use std::path::Path;
use std::time::Duration;

mod common;
use common::*;

const NAME: &str = "cleanup/kind/control-planes-go-with-their-run";

/// What the trial is here, decided when trials are listed (as the scenario trials decide theirs), so `--list`
/// and nextest already see an ignored trial as ignored.
enum Plan {
    Run,
    Ignore(String),
    Fail(String),
}

/// The old test's early exits, in their order: no Docker fails; kind not enabled (NODEJOIN_PROVIDERS) is
/// ignored; kind that cannot run fails where it is required (NODEJOIN_REQUIRE_PROVIDERS or CI), else is ignored.
fn plan() -> Plan {
    if !docker_available() {
        return Plan::Fail("this test needs a running Docker engine (see `nodejoin doctor`)".into());
    }
    let enabled = match trials::enabled(std::env::var(trials::ENV_PROVIDERS).ok().as_deref()) {
        Ok(enabled) => enabled,
        Err(e) => return Plan::Fail(format!("NODEJOIN_PROVIDERS: {e}")),
    };
    if !enabled.contains(&Provider::KIND) {
        return Plan::Ignore("NODEJOIN_PROVIDERS does not enable kind; nothing to check".into());
    }
    let required = match trials::required(std::env::var(trials::ENV_REQUIRE).ok().as_deref(), &enabled) {
        Ok(required) => required.contains(&Provider::KIND),
        Err(e) => return Plan::Fail(format!("NODEJOIN_REQUIRE_PROVIDERS: {e}")),
    };
    match kind_ready() {
        None => Plan::Run,
        Some(why) if required || std::env::var("CI").is_ok() => Plan::Fail(format!(
            "kind cannot run here, and it is required (NODEJOIN_REQUIRE_PROVIDERS or CI): {why}"
        )),
        Some(why) => Plan::Ignore(format!(
            "kind cannot run here ({why}); `nodejoin image build --kind` provides it"
        )),
    }
}

/// The checks, as they were in tests/cleanup.rs (a failed assertion fails the trial).
fn kind_control_planes_go_with_their_run() {
    let scenario = Path::new("scenarios/basic-bootstrap-token.yaml");
    let (mut child, run, reader) = start_run_on("kind", scenario);
    wait_mid_join(&run, &mut child, true);
    assert!(
        docker_objects(&run)
            .iter()
            .any(|o| o.starts_with(&format!("container nj-{run}-"))),
        "the kind control plane should be up mid-join: {:?}",
        docker_objects(&run)
    );
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_exit(&mut child, Duration::from_secs(150), "SIGTERM");
    let log = reader.join().unwrap_or_default();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "exit status {status}:\n{log}");
    assert_eq!(
        leftovers(&run),
        Vec::<String>::new(),
        "SIGTERM left these of kind run {run} behind"
    );

    let (mut child, run, reader) = start_run_on("kind", scenario);
    wait_mid_join(&run, &mut child, false);
    child.kill().expect("SIGKILL nodejoin");
    let _ = child.wait();
    let _ = reader.join();
    assert!(
        docker_objects(&run)
            .iter()
            .any(|o| o.starts_with(&format!("container nj-{run}-"))),
        "a SIGKILLed kind run should have left its kind container (otherwise this test proves nothing): {:?}",
        docker_objects(&run)
    );
    let out = nodejoin().arg("reap").output().expect("nodejoin reap");
    assert!(
        out.status.success(),
        "nodejoin reap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        leftovers(&run),
        Vec::<String>::new(),
        "reap left these of kind run {run} behind"
    );
}

fn main() {
    let args = Arguments::from_args();
    // Ignored, the trial keeps its checks: `--include-ignored` runs them for real, never a bare pass.
    let checks = || {
        Trial::test(NAME, || {
            kind_control_planes_go_with_their_run();
            Ok(())
        })
    };
    let trial = match plan() {
        Plan::Run => checks(),
        Plan::Ignore(why) => {
            eprintln!("[nodejoin] ignored: {NAME}: {why}");
            checks().with_ignored_flag(true)
        }
        Plan::Fail(why) => Trial::test(NAME, move || Err(why.into())),
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}

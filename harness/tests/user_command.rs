//! `userData.command` runs a user's generator, which is untrusted input to a root process: it runs in a container
//! of the node's image that reaches neither the network nor a writable byte of the repository, and a generator
//! that fails ends its node with its exit code and what it printed on standard error. No container of it stays.

mod common;
use common::*;

#[test]
fn a_failing_generator_is_contained_and_quoted() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    let (dir, scenarios) = untrusted_repo();
    let gen = scenarios.join("gen.sh");
    std::fs::write(
        &gen,
        "#!/bin/sh\n\
echo \"gen: repository write $(touch ../marker 2>/dev/null && echo allowed || echo refused)\" >&2\n\
echo \"gen: git config $(cat ../.git/config 2>/dev/null | wc -c) bytes\" >&2\n\
echo \"gen: interfaces $(ls /sys/class/net | tr '\\n' ' ')\" >&2\n\
echo \"gen: cluster ${NODEJOIN_CLUSTER_NAME:-unset} at ${NODEJOIN_CLUSTER_ENDPOINT:-unset}\" >&2\n\
exit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&gen, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let file = scenarios.join("gen.yaml");
    std::fs::write(
        &file,
        "cluster: { auth: iam }\nnodes:\n  - name: gen\n    userData: { command: [./gen.sh] }\n    expect: { within: 60s }\n",
    )
    .unwrap();
    let out = common::nodejoin()
        .args(["run", "--jobs", "1"])
        .arg(&file)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    for wanted in [
        "userData.command `./gen.sh` exited 3",
        "gen: repository write refused",
        "gen: git config 0 bytes",
        "gen: interfaces lo",
        "gen: cluster ",
        " at https://",
    ] {
        assert!(text.contains(wanted), "expected {wanted:?} in:\n{text}");
    }
    assert!(!text.contains("gen: cluster unset"), "{text}");
    assert!(
        !dir.path().join("marker").exists(),
        "the generator wrote into the repository"
    );
    let left = docker_lines(&[
        "ps",
        "-a",
        "--filter",
        "name=nodejoin-generator-",
        "--format",
        "{{.Names}}",
    ]);
    assert_eq!(left, Vec::<String>::new(), "generator containers left behind");
}

use super::*;

#[test]
fn frozen_cgroups_below_a_directory_are_thawed() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("kubepods/pod1/cri-containerd-x.scope");
    std::fs::create_dir_all(&pod).unwrap();
    std::fs::write(dir.path().join("freezer.state"), "THAWED\n").unwrap();
    std::fs::write(pod.join("freezer.state"), "FROZEN\n").unwrap();
    std::fs::write(dir.path().join("kubepods/cgroup.freeze"), "1\n").unwrap();
    assert_eq!(thaw_tree(dir.path()), 2);
    assert_eq!(std::fs::read_to_string(pod.join("freezer.state")).unwrap(), "THAWED");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kubepods/cgroup.freeze")).unwrap(),
        "0"
    );
    assert_eq!(thaw_tree(dir.path()), 0, "nothing is frozen any more");
}

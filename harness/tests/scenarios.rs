//! The bundled scenarios (`scenarios/`) as cargo-test trials: `nodejoin::libtest` makes one per scenario file
//! and provider, named `provider/v1.MINOR/scenario` (`cargo test --test scenarios -- local/`,
//! `cargo nextest run -E 'test(/k3s\//)'`). A user's repository does the same with its own folder.
fn main() {
    nodejoin::libtest::main(&nodejoin::paths::workspace_root().join("scenarios"))
}

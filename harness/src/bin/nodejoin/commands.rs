//! The small commands that only print what the library found: `assets`, `doctor`, `reap`.
use nodejoin::session;
use nodejoin::settings::Settings;

pub async fn assets(settings: &Settings, version: &str) -> u8 {
    let result = async {
        let a = nodejoin::assets::resolve(settings, version).await?;
        let tools = nodejoin::assets::tools::NodeTools::resolve(settings, settings.containerd()).await?;
        Ok::<_, nodejoin::Error>((a, tools))
    }
    .await;
    match result {
        Ok((a, tools)) => {
            println!(
                "Kubernetes {} binaries in {} (source: {})",
                a.version,
                a.dir.display(),
                a.source
            );
            for (name, bin) in tools.binaries() {
                println!("{name} at {}", bin.display());
            }
            0
        }
        Err(e) => session::fail(&e),
    }
}

pub async fn doctor(settings: &Settings, version: &str) -> u8 {
    let findings = nodejoin::doctor::check(settings, version).await;
    let mut ok = true;
    for f in &findings {
        let tag = match (f.ok, f.optional) {
            (true, _) => "ok  ",
            (false, true) => "opt ",
            (false, false) => "MISS",
        };
        println!("{tag} {:<32} {}", f.what, f.detail);
        if !f.ok {
            ok &= f.optional;
            println!("     fix: {}", f.fix);
        }
    }
    u8::from(!ok)
}

pub async fn reap(settings: &Settings) -> u8 {
    let docker = nodejoin::docker::connect().await.ok();
    let r = nodejoin::reaper::reap_stale(settings, docker.as_ref()).await;
    println!(
        "reaped {} processes and {} Docker objects from {} runs",
        r.processes,
        r.docker_objects,
        r.runs.len()
    );
    0
}

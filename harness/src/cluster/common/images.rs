//! Whether a provider's container image can be had on this machine: present locally, or pulled now. A failed
//! pull is remembered for a while in the cache, so that a suite of trials (one process each under nextest) asks
//! the registry once, not once per trial, and each trial is reported ignored with the same precise reason.
use crate::docker::Docker;
use futures::StreamExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long a failed pull is believed before the registry is asked again.
pub const FAILED_PULL_TTL: Duration = Duration::from_secs(15 * 60);
/// How long one pull may take before it counts as failed.
const PULL_TIMEOUT: Duration = Duration::from_secs(60);

/// A provider's image: the override (an environment variable's value) when it is set and not blank, else the
/// default for the version.
pub fn override_or(value: Option<&str>, default: impl FnOnce() -> String) -> String {
    match value.map(str::trim) {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => default(),
    }
}

/// `<cache>/unavailable-images/<image with / and : replaced>`: where a failed pull of `image` is remembered.
pub fn marker(settings: &crate::settings::Settings, image: &str) -> PathBuf {
    let safe: String = image
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    crate::paths::cache_dir(settings).join("unavailable-images").join(safe)
}

/// The reason recorded in `path` if it is younger than `ttl` at `now`.
pub fn remembered_failure(path: &Path, now: SystemTime, ttl: Duration) -> Option<String> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let age = now.duration_since(modified).unwrap_or_default();
    if age > ttl {
        return None;
    }
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// How long the list-time probe waits for Docker to say whether an image is present.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The list-time look at `image`: present locally, a failed pull remembered, or neither (only a pull can tell).
pub async fn probe(
    settings: &crate::settings::Settings,
    docker: Option<&Docker>,
    image: &str,
) -> crate::cluster::Availability {
    use crate::cluster::Availability;
    let Some(docker) = docker else {
        return Availability::Unavailable(format!(
            "Docker is not reachable, so whether image {image} is present cannot be told"
        ));
    };
    match tokio::time::timeout(INSPECT_TIMEOUT, docker.inspect_image(image)).await {
        Ok(Ok(_)) => return Availability::Ready,
        // Only "no such image" means absent; any other error says nothing about the image.
        Ok(Err(testcontainers::bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })) => {}
        Ok(Err(e)) => {
            return Availability::Unavailable(format!("Docker could not say whether image {image} is present: {e}"))
        }
        Err(_) => {
            return Availability::Unavailable(format!(
                "Docker did not say within {}s whether image {image} is present",
                INSPECT_TIMEOUT.as_secs()
            ))
        }
    }
    absent(settings, image)
}

/// An image Docker does not have: fetchable, unless a failed pull of it is remembered.
fn absent(settings: &crate::settings::Settings, image: &str) -> crate::cluster::Availability {
    use crate::cluster::Availability;
    let mark = marker(settings, image);
    match remembered_failure(&mark, SystemTime::now(), FAILED_PULL_TTL) {
        Some(reason) => Availability::Unavailable(format!(
            "{reason} (a failed pull is remembered for {} min; delete {} to try again sooner)",
            FAILED_PULL_TTL.as_secs() / 60,
            mark.display()
        )),
        None => Availability::Fetchable(format!("image {image} is not present locally (`docker pull {image}`)")),
    }
}

/// `Ok` when `image` is present or was just pulled; otherwise why not, in one line that says what to do.
pub async fn ensure(settings: &crate::settings::Settings, docker: &Docker, image: &str) -> Result<(), String> {
    if docker.inspect_image(image).await.is_ok() {
        return Ok(());
    }
    let mark = marker(settings, image);
    if let Some(reason) = remembered_failure(&mark, SystemTime::now(), FAILED_PULL_TTL) {
        return Err(reason);
    }
    let error = match tokio::time::timeout(PULL_TIMEOUT, pull(docker, image)).await {
        Ok(Ok(())) => {
            let _ = std::fs::remove_file(&mark);
            return Ok(());
        }
        Ok(Err(e)) => e,
        Err(_) => format!("no answer within {}s", PULL_TIMEOUT.as_secs()),
    };
    let reason = format!(
        "image {image} is not present locally and cannot be pulled ({error}); on a machine with a registry run \
         `docker pull {image}`, or `docker load -i` a saved copy"
    );
    if let Some(dir) = mark.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&mark, &reason);
    Err(reason)
}

async fn pull(docker: &Docker, image: &str) -> Result<(), String> {
    use testcontainers::bollard::query_parameters::CreateImageOptionsBuilder;
    let options = CreateImageOptionsBuilder::new().from_image(image).build();
    let mut stream = docker.create_image(Some(options), None, None);
    while let Some(item) = stream.next().await {
        item.map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The override every provider image goes through (kind's and k3s's image settings): blank means unset.
    #[test]
    fn an_image_follows_the_version_unless_overridden() {
        let default = || "kindest/node:v1.36.3".to_string();
        assert_eq!(override_or(None, default), "kindest/node:v1.36.3");
        assert_eq!(override_or(Some(" "), default), "kindest/node:v1.36.3");
        assert_eq!(override_or(Some(" mine:1 "), default), "mine:1");
    }

    #[test]
    fn failures_are_remembered_only_while_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("m");
        let now = SystemTime::now();
        assert_eq!(remembered_failure(&f, now, FAILED_PULL_TTL), None, "no marker yet");
        std::fs::write(&f, "image x cannot be pulled\n").unwrap();
        assert_eq!(
            remembered_failure(&f, now, FAILED_PULL_TTL).as_deref(),
            Some("image x cannot be pulled")
        );
        let later = now + FAILED_PULL_TTL + Duration::from_secs(5);
        assert_eq!(
            remembered_failure(&f, later, FAILED_PULL_TTL),
            None,
            "stale markers are ignored"
        );
        std::fs::write(&f, "  \n").unwrap();
        assert_eq!(
            remembered_failure(&f, now, FAILED_PULL_TTL),
            None,
            "an empty marker says nothing"
        );
    }

    #[test]
    fn marker_names_are_flat() {
        let m = marker(&crate::settings::for_tests(), "rancher/k3s:v1.36.3-k3s1");
        assert_eq!(m.file_name().unwrap().to_str().unwrap(), "rancher_k3s_v1.36.3-k3s1");
    }

    #[tokio::test]
    async fn the_probe_only_looks() {
        use crate::cluster::Availability;
        let image = format!("nodejoin.invalid/probe:{}", std::process::id());
        let none = probe(&crate::settings::for_tests(), None, &image).await;
        assert!(
            matches!(&none, Availability::Unavailable(r) if r.contains("Docker is not reachable")),
            "{none:?}"
        );
        // Nothing listens on port 1: the engine answers at once that it cannot be reached.
        let docker =
            Docker::connect_with_http("http://127.0.0.1:1", 2, testcontainers::bollard::API_DEFAULT_VERSION).unwrap();
        let unreachable = probe(&crate::settings::for_tests(), Some(&docker), &image).await;
        assert!(
            matches!(&unreachable, Availability::Unavailable(r) if r.contains("Docker could not say")),
            "an engine error is not an absent image: {unreachable:?}"
        );
        assert_eq!(
            absent(&crate::settings::for_tests(), &image),
            Availability::Fetchable(format!("image {image} is not present locally (`docker pull {image}`)"))
        );
        let mark = marker(&crate::settings::for_tests(), &image);
        std::fs::create_dir_all(mark.parent().unwrap()).unwrap();
        std::fs::write(&mark, "image x cannot be pulled (no registry)").unwrap();
        let remembered = absent(&crate::settings::for_tests(), &image);
        let _ = std::fs::remove_file(&mark);
        assert!(
            matches!(&remembered, Availability::Unavailable(r) if r.starts_with("image x cannot be pulled (no registry)")),
            "{remembered:?}"
        );
    }

    #[tokio::test]
    async fn unreachable_docker_is_a_reason_not_a_panic() {
        // Nothing listens on port 1: every call fails at once.
        let docker =
            Docker::connect_with_http("http://127.0.0.1:1", 2, testcontainers::bollard::API_DEFAULT_VERSION).unwrap();
        let image = format!("nodejoin.invalid/never:{}", std::process::id());
        let err = ensure(&crate::settings::for_tests(), &docker, &image)
            .await
            .unwrap_err();
        assert!(err.contains(&image) && err.contains("docker pull"), "{err}");
        let _ = std::fs::remove_file(marker(&crate::settings::for_tests(), &image));
    }
}

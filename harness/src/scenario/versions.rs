//! Kubernetes versions in the scenario format: a release (`v1.36.3`), a minor (`1.35`), each checked while
//! deserializing.
use serde::{Deserialize, Deserializer};

/// `1.35` or `v1.35.2` → (1, 35).
pub(crate) fn parse_minor(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim_start_matches('v').split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub(super) fn opt_minor<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
    let s = String::deserialize(d)?;
    parse_minor(&s)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("'{s}' is not a Kubernetes minor version like 1.35")))
}

pub(super) fn opt_version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = String::deserialize(d)?;
    let e = |_| serde::de::Error::custom(format!("version '{v}' must look like v1.34.4"));
    crate::assets::check_version(&v).map_err(e).map(|()| Some(v.clone()))
}

pub(super) fn version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = String::deserialize(d)?;
    crate::assets::check_version(&v)
        .map_err(|_| serde::de::Error::custom(format!("kubernetesVersion '{v}' must look like v1.36.3")))?;
    Ok(v)
}

/// Kubernetes' version skew policy for a kubelet against kube-apiserver: up to three minor versions older, never
/// newer. Why `kubelet` breaks it, quoting the rule; `None` when it keeps to it.
pub(crate) fn skew(what: &str, kubelet: &str, api: &str) -> Option<String> {
    let (Some((_, k)), Some((_, a))) = (parse_minor(kubelet), parse_minor(api)) else {
        return Some(format!("cannot compare kubelet {kubelet} with the API server's {api}"));
    };
    const RULE: &str = "Kubernetes' version skew policy: a kubelet may be up to three minor versions older than \
                        kube-apiserver, never newer";
    if k > a {
        Some(format!(
            "{what} {kubelet} is newer than the API server's {api} ({RULE})"
        ))
    } else if a - k > 3 {
        Some(format!(
            "{what} {kubelet} is {} minor versions older than the API server's {api} ({RULE})",
            a - k
        ))
    } else {
        None
    }
}

/// Whether release `a` is older than release `b` (`v1.36.3` < `v1.37.0` < `v1.37.2`); `None` when either is not
/// a release.
pub(crate) fn older(a: &str, b: &str) -> Option<bool> {
    let parts = |v: &str| -> Option<(u32, u32, u32)> {
        let mut it = v.strip_prefix('v')?.split('.');
        Some((
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
            it.next()?.parse().ok()?,
        ))
    };
    Some(parts(a)? < parts(b)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubelet_may_be_three_minors_older_never_newer() {
        assert_eq!(skew("kubelet", "v1.34.4", "v1.37.2"), None);
        assert_eq!(
            skew("kubelet", "v1.37.2", "v1.37.0"),
            None,
            "a patch apart is the same minor"
        );
        let newer = skew("kubeletVersion", "v1.37.2", "v1.36.3").unwrap();
        assert!(
            newer.starts_with("kubeletVersion v1.37.2 is newer than the API server's v1.36.3"),
            "{newer}"
        );
        let old = skew("to", "v1.33.1", "v1.37.2").unwrap();
        assert!(
            old.contains("is 4 minor versions older") && old.contains("never newer"),
            "{old}"
        );
    }

    #[test]
    fn releases_compare_by_number_not_by_text() {
        assert_eq!(older("v1.36.3", "v1.37.2"), Some(true));
        assert_eq!(older("v1.37.10", "v1.37.9"), Some(false));
        assert_eq!(older("v1.37.2", "v1.37.2"), Some(false));
        assert_eq!(older("1.37", "v1.37.2"), None);
    }
}

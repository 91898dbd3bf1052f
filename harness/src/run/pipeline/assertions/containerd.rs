//! containerd's own warnings on a joined node (`crate::assert::containerd`): a check on the canary lines (a
//! containerd no AMI ships yet) or when the scenario asks, a note elsewhere, in containerd's words either way.
use crate::assert::containerd::{deprecations, host_caused, ignored_keys, Warning};
use crate::assert::Check;
use crate::run::node::RunningNode;
use crate::scenario::expect::ContainerdWarnings;

/// What containerd said, as a check or notes; what the host caused ([`host_caused`]) is always a note.
pub(super) enum Verdict {
    /// The check, and a note of what the host caused.
    Check(Check, Option<String>),
    Notes(Vec<String>),
}

pub(super) async fn containerd_warnings(n: &RunningNode) -> Option<Verdict> {
    let line = n.group.containerd_line();
    let checked = match n.expect().containerd_warnings {
        Some(ContainerdWarnings::None) => true,
        Some(ContainerdWarnings::Any) => false,
        None => !line.shipped() && n.group.disk.is_none(),
    };
    let log = n.machine.journal(Some("containerd")).await;
    let mut warnings = ignored_keys(&log);
    let listed = n
        .machine
        .exec(&["ctr", "deprecations", "list", "--format", "json"], &[])
        .await;
    let asked = match listed {
        Ok(out) if out.exit_code == 0 => deprecations(&out.stdout),
        Ok(out) => Err(format!("exit {}: {}", out.exit_code, out.stderr.trim())),
        Err(e) => Err(e.to_string()),
    };
    let mut unread = None;
    match asked {
        Ok(d) => warnings.extend(d),
        Err(e) => unread = Some(format!("`ctr deprecations list` failed ({e})")),
    }
    let (host, warnings): (Vec<Warning>, Vec<Warning>) = warnings.into_iter().partition(host_caused);
    let host_note = (!host.is_empty()).then(|| {
        format!(
            "{}: containerd says, of this host and not of the node's configuration (not checked): {}",
            n.node_name,
            said(&host, None)
        )
    });
    let said = said(&warnings, unread.as_deref());
    let name = crate::assert::registry::CONTAINERD_WARNINGS.on(&n.node_name);
    if checked {
        let why = if n.expect().containerd_warnings.is_some() {
            "containerdWarnings: none".to_string()
        } else {
            format!("containerd {line}, a line no AMI ships yet")
        };
        return Some(Verdict::Check(
            Check::new(
                name,
                warnings.is_empty() && unread.is_none(),
                format!("no key of its configuration ignored, no deprecation reported ({why})"),
                said,
            ),
            host_note,
        ));
    }
    let note = (!warnings.is_empty() || unread.is_some()).then(|| format!("{}: containerd says: {said}", n.node_name));
    Some(Verdict::Notes(note.into_iter().chain(host_note).collect()))
}

fn said(warnings: &[Warning], unread: Option<&str>) -> String {
    let mut parts: Vec<String> = warnings.iter().map(Warning::to_string).collect();
    parts.extend(unread.map(str::to_string));
    if parts.is_empty() {
        "nothing ignored, no deprecation".into()
    } else {
        parts.join("; ")
    }
}

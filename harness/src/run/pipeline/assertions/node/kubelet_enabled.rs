//! `kubelet enabled`: the kubelet unit is enabled, not only started: a node whose bootstrap only started it loses
//! its kubelet on the first reboot (EKS AMIs' bootstrap and nodeadm enable it).
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::assert::Check;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "kubelet enabled",
    form: "kubelet enabled",
    when: "nodes that join, not VMs seen from outside (not nodeadm nodes: AL2023 starts the kubelet through \
           nodeadm-run.service on every boot, \
           and the report says so)",
    proves: "`systemctl is-enabled kubelet.service` says `enabled`: a kubelet that was only started does not come \
             back after a reboot (EKS AMIs' bootstrap and nodeadm enable it)",
    keys: &["bootstrap", "userData"],
};

pub(crate) struct KubeletEnabled;

impl NodeCheck for KubeletEnabled {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let n = f.n;
            if !n.machine.sees_inside() {
                return Finding::Note("kubelet enabled not checked: no guest agent to ask systemd".into());
            }
            if n.nodeadm.is_some() {
                // nodeadm only starts the kubelet; AL2023 brings it back on every boot through
                // nodeadm-run.service, a unit of the AMI rather than of the user data.
                return Finding::Note(
                    "kubelet enabled not checked: nodeadm starts the kubelet on every boot (nodeadm-run.service)"
                        .into(),
                );
            }
            let asked = match &n.container_exit {
                Some(why) => Err(format!("not asked: {why}")),
                None => n
                    .machine
                    .exec(&["systemctl", "is-enabled", "kubelet.service"], &[])
                    .await
                    .map_err(|e| format!("cannot ask systemd: {e}")),
            };
            let actual = match asked {
                Ok(out) => {
                    let state = out.stdout.trim().to_string();
                    if state.is_empty() {
                        format!("exit {}: {}", out.exit_code, out.stderr.trim())
                    } else {
                        state
                    }
                }
                Err(e) => e,
            };
            Finding::Check(Check::new(
                DEF.on(f.name()),
                actual == "enabled",
                "systemctl is-enabled kubelet.service: enabled",
                actual,
            ))
        })
    }
}

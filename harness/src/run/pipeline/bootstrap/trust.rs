//! A machine whose software refuses the certificates AWS's names are served with: its trust anchors lack the run's
//! endpoints CA (a disk of the user's built without `NODEJOIN_ENDPOINTS_CA`'s CA, or run without the setting).
//! That cannot change while the run lasts, and nodeadm retries EC2 for minutes, so the first refusal ends the
//! bootstrap's wait (or, for a machine seen from outside, the watch of its join), quoting it.
use crate::error::Error;
use crate::fakes::instances::Instance;
use crate::run::env::Environment;
use std::time::Duration;

/// How often the call log is read for a refusal.
const EVERY: Duration = Duration::from_secs(1);

/// Waits until the front records a handshake the instance refused; then the node's error, saying why and what to
/// do. Never returns while none is refused.
pub(crate) async fn refused_certificate(env: &Environment, node: &str, instance: &Instance) -> Error {
    loop {
        if let Some(e) = refusal(env, node, instance) {
            return e;
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// The node's error if the front has recorded a handshake the instance refused.
pub(crate) fn refusal(env: &Environment, node: &str, instance: &Instance) -> Option<Error> {
    let c = env
        .calls
        .of(&instance.instance_id)
        .into_iter()
        .find(|c| c.service == "tls")?;
    let ca = match &env.settings.endpoints_ca {
        Some(dir) => format!("the CA in {} ({})", dir.display(), crate::settings::var::ENDPOINTS_CA),
        None => format!(
            "this run's own CA: {} was not set, so a disk of your own cannot trust it",
            crate::settings::var::ENDPOINTS_CA
        ),
    };
    Some(Error::node(
        node,
        format!(
            "the machine refused the certificate the run serves AWS's names with (tls {}): its trust anchors lack \
             the run's endpoints CA, {ca}; add that CA's ca.pem to the image's trust anchors",
            c.action
        ),
    ))
}

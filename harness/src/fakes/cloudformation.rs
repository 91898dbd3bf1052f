//! Fake CloudFormation: `SignalResource`, which `cfn-signal` calls at the end of a self-managed node's user data
//! to tell the AutoScalingGroup's creation policy whether the node bootstrapped. Signed with the instance's
//! credentials (SigV4 verified); every signal is kept for the scenario's assertions. As in AWS, a signal reaches
//! a stack only in the stack's region (`--region`) and names the stack and its AutoScalingGroup resource: any
//! other is refused with CloudFormation's ValidationError, and the user data's `cfn-signal` fails.
use super::instances::Instances;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

const NS: &str = "http://cloudformation.amazonaws.com/doc/2010-05-15/";

/// One `SignalResource` call that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub at: SystemTime,
    pub stack: String,
    pub resource: String,
    pub unique_id: String,
    /// `SUCCESS` or `FAILURE`.
    pub status: String,
    /// The instance whose credentials signed the call.
    pub signed_by: String,
}

pub struct CloudFormation {
    instances: Arc<Instances>,
    signals: Mutex<Vec<Signal>>,
    /// `(stack, logical resource, region)` of the stacks the scenarios' node groups were launched by.
    stacks: Mutex<Vec<(String, String, String)>>,
}

impl CloudFormation {
    pub fn new(instances: Arc<Instances>) -> Arc<Self> {
        Arc::new(Self {
            instances,
            signals: Mutex::new(Vec::new()),
            stacks: Mutex::new(Vec::new()),
        })
    }

    /// A stack in `region` whose `resource` (the AutoScalingGroup) waits for its instances' signals.
    pub fn create_stack(&self, stack: &str, resource: &str, region: &str) {
        if let Ok(mut s) = self.stacks.lock() {
            let entry = (stack.to_string(), resource.to_string(), region.to_string());
            if !s.contains(&entry) {
                s.push(entry);
            }
        }
    }

    /// Why a signal for `stack`/`resource` signed for `region` would not reach a waiting resource, in
    /// CloudFormation's words; `None` when it would.
    fn refusal(&self, stack: &str, resource: &str, region: &str) -> Option<String> {
        let stacks = self.stacks.lock().map(|s| s.clone()).unwrap_or_default();
        let here: Vec<&(String, String, String)> =
            stacks.iter().filter(|(s, _, r)| s == stack && r == region).collect();
        if here.is_empty() {
            return Some(format!("Stack with id {stack} does not exist (in {region})"));
        }
        if !here.iter().any(|(_, res, _)| res == resource) {
            return Some(format!("Resource {resource} does not exist for stack {stack}"));
        }
        None
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self.clone())
    }

    /// Signals sent with `instance_id`'s credentials, oldest first.
    pub fn signals_from(&self, instance_id: &str) -> Vec<Signal> {
        self.signals
            .lock()
            .map(|s| s.iter().filter(|x| x.signed_by == instance_id).cloned().collect())
            .unwrap_or_default()
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    super::query_error(NS, status, code, message)
}

async fn handle(State(cf): State<Arc<CloudFormation>>, call: super::SignedCall) -> Response {
    let (params, creds, region) = match call.verify_query(&cf.instances.iam, "cloudformation", NS, "SignalResource") {
        Ok(x) => (x.params, x.credentials, x.region),
        Err(r) => return *r,
    };
    let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut missing = Vec::new();
    let mut field = |name: &'static str| {
        get(name).unwrap_or_else(|| {
            missing.push(name);
            String::new()
        })
    };
    let signal = Signal {
        at: SystemTime::now(),
        stack: field("StackName"),
        resource: field("LogicalResourceId"),
        unique_id: field("UniqueId"),
        status: field("Status"),
        signed_by: creds.instance_id.clone(),
    };
    if !missing.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "ValidationError",
            &format!("missing required parameters: {}", missing.join(", ")),
        );
    }
    if !matches!(signal.status.as_str(), "SUCCESS" | "FAILURE") {
        return error(
            StatusCode::BAD_REQUEST,
            "ValidationError",
            &format!(
                "1 validation error detected: Value '{}' at 'status' failed to satisfy constraint: Member must satisfy enum value set: [SUCCESS, FAILURE]",
                signal.status
            ),
        );
    }
    if let Some(why) = cf.refusal(&signal.stack, &signal.resource, &region) {
        tracing::info!("cloudformation: signal from {} refused: {why}", signal.unique_id);
        return error(StatusCode::BAD_REQUEST, "ValidationError", &why);
    }
    tracing::info!(
        stack = %signal.stack,
        resource = %signal.resource,
        "cloudformation: {} from {}",
        signal.status,
        signal.unique_id
    );
    if let Ok(mut s) = cf.signals.lock() {
        s.push(signal);
    }
    let body = format!(
        "<SignalResourceResponse xmlns=\"{NS}\"><ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></SignalResourceResponse>",
        super::random_hex(32)
    );
    (StatusCode::OK, [("content-type", "text/xml")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::iam::IssuedCredentials;
    use crate::fakes::sigv4::tests::sign_headers;
    use crate::fakes::FakeServer;

    #[tokio::test]
    async fn signals_are_verified_validated_and_recorded() {
        let instances = Instances::new();
        let i = instances.register(crate::fakes::instances::tests::instance());
        let creds = instances.iam.serve(i.holder(), SystemTime::now()).unwrap().credentials;
        let cf = CloudFormation::new(instances);
        cf.create_stack("nodes", "NodeGroup", "us-west-2");
        let s = FakeServer::start("cloudformation", "127.0.0.1".parse().unwrap(), cf.router())
            .await
            .unwrap();
        let url = format!("{}/", s.url());
        let client = reqwest::Client::new();
        let ct = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
        let send_in = |body: String, creds: &IssuedCredentials, region: &'static str| {
            let mut req = client.post(&url).body(body.clone());
            for (k, v) in sign_headers("POST", &url, &[ct], body.as_bytes(), creds, region, "cloudformation") {
                req = req.header(k, v);
            }
            req.send()
        };
        let send = |body: String, creds: &IssuedCredentials| send_in(body, creds, "us-west-2");
        let ok = format!(
            "Action=SignalResource&Version=2010-05-15&StackName=nodes&LogicalResourceId=NodeGroup&UniqueId={}&Status=FAILURE",
            i.instance_id
        );
        let r = send(ok.clone(), &creds).await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let got = cf.signals_from(&i.instance_id);
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].stack.as_str(), got[0].resource.as_str(), got[0].status.as_str()),
            ("nodes", "NodeGroup", "FAILURE")
        );
        assert_eq!(got[0].unique_id, i.instance_id);

        let bad_status = ok.replace("FAILURE", "MAYBE");
        let r = send(bad_status, &creds).await.unwrap();
        assert_eq!(r.status(), 400);
        assert!(r.text().await.unwrap().contains("ValidationError"));
        let missing = "Action=SignalResource&Version=2010-05-15&StackName=nodes&Status=SUCCESS".to_string();
        let text = send(missing, &creds).await.unwrap().text().await.unwrap();
        assert!(
            text.contains("LogicalResourceId") && text.contains("UniqueId"),
            "{text}"
        );
        let other = send(ok.replace("SignalResource", "DeleteStack"), &creds).await.unwrap();
        assert_eq!(other.status(), 400);
        assert!(other.text().await.unwrap().contains("InvalidAction"));
        // Bound to the stack, its resource and its region, as CloudFormation is: the node's cfn-signal fails.
        for (body, region, says) in [
            (
                ok.replace("StackName=nodes", "StackName=wrong"),
                "us-west-2",
                "Stack with id wrong does not exist",
            ),
            (
                ok.replace("NodeGroup", "Other"),
                "us-west-2",
                "Resource Other does not exist",
            ),
            (
                ok.clone(),
                "eu-west-1",
                "Stack with id nodes does not exist (in eu-west-1)",
            ),
        ] {
            let r = send_in(body, &creds, region).await.unwrap();
            assert_eq!(r.status(), 400);
            let text = r.text().await.unwrap();
            assert!(text.contains("ValidationError") && text.contains(says), "{text}");
        }
        let mut forged = (*creds).clone();
        forged.secret_access_key.push('x');
        assert_eq!(send(ok, &forged).await.unwrap().status(), 403);
        assert_eq!(cf.signals_from(&i.instance_id).len(), 1);
    }
}

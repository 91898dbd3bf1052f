//! Fake STS: GetCallerIdentity for credentials the fake IMDS issued (`aws --endpoint-url` with the STS endpoint a node is given,
//! sts get-caller-identity` in a node), as the caller's regional endpoint: a signature for another region is
//! refused. The token webhook asks the same question in-process for presigned tokens.
use super::iam::IssuedCredentials;
use super::instances::Instances;
use crate::eks::identity::Caller;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What GetCallerIdentity answers for `creds`.
pub fn caller(creds: &IssuedCredentials) -> Caller {
    Caller {
        arn: creds.caller_arn(),
        account: creds.account_id.clone(),
        user_id: creds.user_id(),
        access_key_id: creds.access_key_id.clone(),
    }
}

pub struct Sts {
    pub instances: Arc<Instances>,
}

impl Sts {
    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self.clone())
    }
}

const NS: &str = "https://sts.amazonaws.com/doc/2011-06-15/";

async fn handle(State(sts): State<Arc<Sts>>, call: super::SignedCall) -> Response {
    let (creds, region) = match call.verify_query(&sts.instances.iam, "sts", NS, "GetCallerIdentity") {
        Ok(x) => (x.credentials, x.region),
        Err(r) => return *r,
    };
    // The fake stands for the caller's regional endpoint (SDKs' default), which refuses a signature scoped to
    // another region.
    if let Some(own) = sts.instances.by_id(&creds.instance_id).map(|i| i.region.clone()) {
        if region != own {
            tracing::info!("sts: request refused: signed for {region}, the caller's endpoint is {own}'s");
            return super::query_error(
                NS,
                StatusCode::FORBIDDEN,
                "SignatureDoesNotMatch",
                &format!("Credential should be scoped to a valid region, not '{region}'. "),
            );
        }
    }
    let c = caller(&creds);
    let body = format!(
        "<GetCallerIdentityResponse xmlns=\"{NS}\"><GetCallerIdentityResult><Arn>{}</Arn><UserId>{}</UserId><Account>{}</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></GetCallerIdentityResponse>",
        c.arn,
        c.user_id,
        c.account,
        super::random_hex(32)
    );
    (StatusCode::OK, [("content-type", "text/xml")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::sigv4::tests::sign_headers;
    use crate::fakes::FakeServer;
    use std::time::SystemTime;

    #[tokio::test]
    async fn get_caller_identity() {
        let instances = Instances::new();
        let i = instances.register(crate::fakes::instances::tests::instance());
        let creds = instances.iam.serve(i.holder(), SystemTime::now()).unwrap().credentials;
        let sts = Arc::new(Sts { instances });
        let s = FakeServer::start("sts", "127.0.0.1".parse().unwrap(), sts.router())
            .await
            .unwrap();
        let url = format!("{}/", s.url());
        let body = "Action=GetCallerIdentity&Version=2011-06-15";
        let ct = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
        let client = reqwest::Client::new();
        let send_to = |creds: &IssuedCredentials, region: &str| {
            let mut req = client.post(&url).body(body);
            for (k, v) in sign_headers("POST", &url, &[ct], body.as_bytes(), creds, region, "sts") {
                req = req.header(k, v);
            }
            req.send()
        };
        let send = |creds: &IssuedCredentials| send_to(creds, "us-west-2");
        let text = send(&creds).await.unwrap().text().await.unwrap();
        assert!(
            text.contains(&format!(
                "<Arn>arn:aws:sts::111122223333:assumed-role/NodeRole/{}</Arn>",
                i.instance_id
            )),
            "{text}"
        );
        assert!(text.contains("<Account>111122223333</Account>"));
        let mut forged = (*creds).clone();
        forged.secret_access_key = "not-the-secret".into();
        let r = send(&forged).await.unwrap();
        assert_eq!(r.status(), 403);
        assert!(r.text().await.unwrap().contains("<Code>SignatureDoesNotMatch</Code>"));
        // Signed for another region than the caller's (its regional endpoint refuses it).
        let r = send_to(&creds, "eu-west-1").await.unwrap();
        assert_eq!(r.status(), 403);
        let text = r.text().await.unwrap();
        assert!(
            text.contains("<Code>SignatureDoesNotMatch</Code>") && text.contains("not 'eu-west-1'"),
            "{text}"
        );
    }
}

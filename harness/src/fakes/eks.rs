//! Fake EKS control-plane API: DescribeCluster (`GET /clusters/{name}`), as the AWS CLI calls it for
//! `aws eks describe-cluster` and `aws eks wait cluster-active`.
use super::sigv4;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// What DescribeCluster reports for one cluster.
#[derive(Debug)]
pub struct ClusterRecord {
    pub name: String,
    pub region: String,
    pub account_id: String,
    pub endpoint: String,
    pub ca_base64: String,
    pub service_ipv4_cidr: String,
    pub version: String,
    pub id: String,
    pub created: SystemTime,
    /// DescribeCluster calls that still answer `CREATING` before the cluster turns `ACTIVE`.
    pub creating_for_calls: AtomicU32,
}

impl ClusterRecord {
    pub fn arn(&self) -> String {
        format!("arn:aws:eks:{}:{}:cluster/{}", self.region, self.account_id, self.name)
    }

    /// The DescribeCluster response body; `status` moves CREATING → ACTIVE as calls are made.
    fn describe(&self) -> serde_json::Value {
        let creating = self
            .creating_for_calls
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        let status = if creating { "CREATING" } else { "ACTIVE" };
        let created = self
            .created
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let mut cluster = serde_json::json!({
            "name": self.name,
            "arn": self.arn(),
            "createdAt": created,
            "version": self.version,
            "roleArn": format!("arn:aws:iam::{}:role/eks-cluster-role", self.account_id),
            "kubernetesNetworkConfig": { "serviceIpv4Cidr": self.service_ipv4_cidr, "ipFamily": "ipv4", "elasticLoadBalancing": { "enabled": false } },
            "status": status,
            "platformVersion": "eks.1",
            "id": self.id,
            "accessConfig": { "authenticationMode": "API_AND_CONFIG_MAP" },
            "tags": {},
        });
        // While CREATING, EKS has no endpoint or CA yet.
        if !creating {
            cluster["endpoint"] = self.endpoint.clone().into();
            cluster["certificateAuthority"] = serde_json::json!({ "data": self.ca_base64 });
        }
        serde_json::json!({ "cluster": cluster })
    }
}

/// The fake EKS service: every cluster the harness has announced.
#[derive(Default)]
pub struct Eks {
    clusters: RwLock<HashMap<String, Arc<ClusterRecord>>>,
}

impl Eks {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn put(&self, record: ClusterRecord) -> Arc<ClusterRecord> {
        let record = Arc::new(record);
        if let Ok(mut map) = self.clusters.write() {
            map.insert(record.name.clone(), record.clone());
        }
        record
    }

    pub fn get(&self, name: &str) -> Option<Arc<ClusterRecord>> {
        self.clusters.read().ok()?.get(name).cloned()
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route("/clusters/{name}", get(describe_cluster))
            .with_state(self.clone())
    }
}

/// An error in the shape the AWS REST-JSON protocol uses (botocore reads `x-amzn-ErrorType` and the body).
pub fn aws_json_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "message": message, "__type": code });
    (
        status,
        [
            ("x-amzn-errortype", code.to_string()),
            ("content-type", "application/json".to_string()),
        ],
        body.to_string(),
    )
        .into_response()
}

async fn describe_cluster(State(eks): State<Arc<Eks>>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    let Some(cluster) = eks.get(&name) else {
        tracing::info!(cluster = %name, "eks: DescribeCluster for an unknown cluster");
        return aws_json_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("No cluster found for name: {name}."),
        );
    };
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    if let Err(message) = sigv4::check_scope(auth, &cluster.region, "eks") {
        tracing::info!(cluster = %name, "eks: DescribeCluster refused: {message}");
        let code = if auth.is_none() {
            "MissingAuthenticationTokenException"
        } else {
            "InvalidSignatureException"
        };
        return aws_json_error(StatusCode::FORBIDDEN, code, &message);
    }
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        cluster.describe().to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::FakeServer;

    const AUTH: &str = "AWS4-HMAC-SHA256 Credential=ASIAX/20261122/eu-west-1/eks/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn record(creating: u32) -> ClusterRecord {
        ClusterRecord {
            name: "demo".into(),
            region: "eu-west-1".into(),
            account_id: "111122223333".into(),
            endpoint: "https://172.18.0.1:6443".into(),
            ca_base64: "Q0E=".into(),
            service_ipv4_cidr: "10.100.0.0/16".into(),
            version: "1.36".into(),
            id: "c0ffee".into(),
            created: SystemTime::now(),
            creating_for_calls: AtomicU32::new(creating),
        }
    }

    async fn start(creating: u32) -> FakeServer {
        let eks = Eks::new();
        eks.put(record(creating));
        FakeServer::start("eks", "127.0.0.1".parse().unwrap(), eks.router())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn describe_shape() {
        let s = start(0).await;
        let r = reqwest::Client::new()
            .get(format!("{}/clusters/demo", s.url()))
            .header("authorization", AUTH)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: serde_json::Value = r.json().await.unwrap();
        let c = &v["cluster"];
        assert_eq!(c["status"], "ACTIVE");
        assert_eq!(c["endpoint"], "https://172.18.0.1:6443");
        assert_eq!(c["certificateAuthority"]["data"], "Q0E=");
        assert_eq!(c["kubernetesNetworkConfig"]["serviceIpv4Cidr"], "10.100.0.0/16");
        assert_eq!(c["kubernetesNetworkConfig"]["ipFamily"], "ipv4");
        assert_eq!(c["arn"], "arn:aws:eks:eu-west-1:111122223333:cluster/demo");
        assert_eq!(c["id"], "c0ffee");
        assert_eq!(c["version"], "1.36");
    }

    #[tokio::test]
    async fn creating_then_active() {
        let s = start(2).await;
        let c = reqwest::Client::new();
        let mut seen = vec![];
        for _ in 0..3 {
            let v: serde_json::Value = c
                .get(format!("{}/clusters/demo", s.url()))
                .header("authorization", AUTH)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            seen.push(v["cluster"]["status"].as_str().unwrap().to_string());
            if seen.last().unwrap() == "CREATING" {
                assert!(v["cluster"].get("endpoint").is_none());
            }
        }
        assert_eq!(seen, ["CREATING", "CREATING", "ACTIVE"]);
    }

    #[tokio::test]
    async fn unknown_cluster_and_bad_auth() {
        let s = start(0).await;
        let c = reqwest::Client::new();
        let r = c
            .get(format!("{}/clusters/nope", s.url()))
            .header("authorization", AUTH)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        assert_eq!(r.headers()["x-amzn-errortype"], "ResourceNotFoundException");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["message"], "No cluster found for name: nope.");
        let r = c.get(format!("{}/clusters/demo", s.url())).send().await.unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(r.headers()["x-amzn-errortype"], "MissingAuthenticationTokenException");
        let wrong_region = AUTH.replace("eu-west-1", "us-east-2");
        let r = c
            .get(format!("{}/clusters/demo", s.url()))
            .header("authorization", wrong_region)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(r.headers()["x-amzn-errortype"], "InvalidSignatureException");
    }
}

//! Fake EKS control-plane API: DescribeCluster (`GET /clusters/{name}`), as the AWS CLI calls it for
//! `aws eks describe-cluster` and `aws eks wait cluster-active`, and the access-entry calls
//! (CreateAccessEntry, ListAccessEntries, DescribeAccessEntry). Every request's SigV4 signature is verified
//! against the credentials the fake IMDS issued.
use super::instances::Instances;
use super::{aws_json_error, SignedCall};
use crate::eks::identity::AuthenticationMode;
use crate::eks::identity::{AccessEntry, AccessEntryType};
use axum::extract::{Path, State};
use axum::http::StatusCode;
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
    /// The scenario's VPC: `resourcesVpcConfig` names it and its subnet.
    pub vpc: Arc<super::vpc::Vpc>,
    pub version: String,
    pub id: String,
    pub created: SystemTime,
    /// DescribeCluster calls that still answer `CREATING` before the cluster turns `ACTIVE`.
    pub creating_for_calls: AtomicU32,
    /// DescribeCluster answers `CREATING` for this long from the first DescribeCluster call: counted from the
    /// node's first look rather than from the scenario's start, so a slow (loaded) machine still sees the fault.
    pub creating_for: Option<std::time::Duration>,
    /// When the first DescribeCluster call came.
    pub first_described: std::sync::OnceLock<SystemTime>,
    pub authentication_mode: AuthenticationMode,
    pub access_entries: RwLock<Vec<AccessEntry>>,
}

impl ClusterRecord {
    pub fn arn(&self) -> String {
        format!("arn:aws:eks:{}:{}:cluster/{}", self.region, self.account_id, self.name)
    }

    /// The DescribeCluster response body; `status` moves CREATING → ACTIVE as calls are made.
    fn describe(&self) -> serde_json::Value {
        let first = *self.first_described.get_or_init(SystemTime::now);
        let creating = self.creating_for.is_some_and(|d| SystemTime::now() < first + d)
            || self
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
            "resourcesVpcConfig": {
                "vpcId": self.vpc.vpc_id,
                "subnetIds": [self.vpc.subnet_id],
                "securityGroupIds": [],
                "clusterSecurityGroupId": "sg-0nodejoin",
                "endpointPublicAccess": true,
                "endpointPrivateAccess": false,
                "publicAccessCidrs": ["0.0.0.0/0"],
            },
            "status": status,
            "platformVersion": "eks.1",
            "id": self.id,
            "accessConfig": { "authenticationMode": self.authentication_mode.as_str() },
            "tags": {},
        });
        // While CREATING, EKS has no endpoint or CA yet.
        if !creating {
            cluster["endpoint"] = self.endpoint.clone().into();
            cluster["certificateAuthority"] = serde_json::json!({ "data": self.ca_base64 });
        }
        serde_json::json!({ "cluster": cluster })
    }

    /// CreateAccessEntry: validates and stores an entry; a second entry for the same principal is an error.
    pub fn create_access_entry(
        &self,
        entry: AccessEntry,
    ) -> Result<serde_json::Value, (StatusCode, &'static str, String)> {
        let mut entries = self.access_entries.write().map_err(|_| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "ServerException",
                "lock poisoned".to_string(),
            )
        })?;
        if entries.iter().any(|e| e.principal_arn == entry.principal_arn) {
            return Err((
                StatusCode::CONFLICT,
                "ResourceInUseException",
                format!(
                    "The specified access entry resource is already in use on this cluster ({}).",
                    entry.principal_arn
                ),
            ));
        }
        let json = self.entry_json(&entry);
        entries.push(entry);
        Ok(json)
    }

    pub fn access_entries(&self) -> Vec<AccessEntry> {
        self.access_entries.read().map(|e| e.clone()).unwrap_or_default()
    }

    fn entry_json(&self, e: &AccessEntry) -> serde_json::Value {
        serde_json::json!({
            "clusterName": self.name,
            "principalArn": e.principal_arn,
            "kubernetesGroups": e.kubernetes_groups,
            "accessEntryArn": format!("arn:aws:eks:{}:{}:access-entry/{}/{}", self.region, self.account_id, self.name, crate::eks::identity::AccessEntryType::as_str(&e.entry_type).to_lowercase()),
            "username": e.username,
            "type": e.entry_type.as_str(),
            "tags": {},
        })
    }
}

/// The fake EKS service: every cluster the harness has announced.
pub struct Eks {
    clusters: RwLock<HashMap<String, Arc<ClusterRecord>>>,
    instances: Arc<Instances>,
}

impl Eks {
    pub fn new(instances: Arc<Instances>) -> Arc<Self> {
        Arc::new(Self {
            clusters: RwLock::new(HashMap::new()),
            instances,
        })
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
            .route(
                "/clusters/{name}/access-entries",
                get(list_access_entries).post(create_access_entry),
            )
            .route("/clusters/{name}/access-entries/{arn}", get(describe_access_entry))
            .with_state(self.clone())
    }
}

/// Finds the cluster and verifies the caller's signature; the error is the AWS-shaped response.
fn authorize(eks: &Eks, name: &str, call: &SignedCall, action: &str) -> Result<Arc<ClusterRecord>, Box<Response>> {
    let Some(cluster) = eks.get(name) else {
        tracing::info!(cluster = %name, "eks: {action} for an unknown cluster");
        return Err(Box::new(aws_json_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("No cluster found for name: {name}."),
        )));
    };
    let verified = call.verify_json(&eks.instances.iam, "eks", Some(&cluster.region))?;
    // Every caller here holds an instance's role, whose worker-node policy (AmazonEKSWorkerNodePolicy) allows
    // eks:DescribeCluster and nothing else of EKS's API: a node that could write access entries could map itself.
    if !WORKER_NODE_ACTIONS.contains(&action) {
        let caller = verified.credentials.caller_arn();
        tracing::info!(cluster = %name, "eks: {action} refused to {caller}");
        return Err(Box::new(aws_json_error(
            StatusCode::FORBIDDEN,
            "AccessDeniedException",
            &format!(
                "User: {caller} is not authorized to perform: eks:{action} on resource: {}",
                cluster.arn()
            ),
        )));
    }
    Ok(cluster)
}

/// What a node's role may call (AmazonEKSWorkerNodePolicy's EKS actions).
const WORKER_NODE_ACTIONS: [&str; 1] = ["DescribeCluster"];

fn json_ok(v: serde_json::Value) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], v.to_string()).into_response()
}

async fn describe_cluster(State(eks): State<Arc<Eks>>, Path(name): Path<String>, call: SignedCall) -> Response {
    match authorize(&eks, &name, &call, "DescribeCluster") {
        Ok(cluster) => json_ok(cluster.describe()),
        Err(r) => *r,
    }
}

async fn list_access_entries(State(eks): State<Arc<Eks>>, Path(name): Path<String>, call: SignedCall) -> Response {
    match authorize(&eks, &name, &call, "ListAccessEntries") {
        Ok(cluster) => {
            let arns: Vec<String> = cluster.access_entries().into_iter().map(|e| e.principal_arn).collect();
            json_ok(serde_json::json!({ "accessEntries": arns }))
        }
        Err(r) => *r,
    }
}

async fn describe_access_entry(
    State(eks): State<Arc<Eks>>,
    Path((name, arn)): Path<(String, String)>,
    call: SignedCall,
) -> Response {
    let cluster = match authorize(&eks, &name, &call, "DescribeAccessEntry") {
        Ok(c) => c,
        Err(r) => return *r,
    };
    match cluster.access_entries().iter().find(|e| e.principal_arn == arn) {
        Some(e) => json_ok(serde_json::json!({ "accessEntry": cluster.entry_json(e) })),
        None => aws_json_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            &format!("The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'. ({arn})"),
        ),
    }
}

async fn create_access_entry(State(eks): State<Arc<Eks>>, Path(name): Path<String>, call: SignedCall) -> Response {
    let cluster = match authorize(&eks, &name, &call, "CreateAccessEntry") {
        Ok(c) => c,
        Err(r) => return *r,
    };
    let invalid = |m: String| aws_json_error(StatusCode::BAD_REQUEST, "InvalidParameterException", &m);
    let v: serde_json::Value = match serde_json::from_slice(&call.body) {
        Ok(v) => v,
        Err(e) => return invalid(format!("request body is not JSON: {e}")),
    };
    let Some(principal) = v["principalArn"].as_str() else {
        return invalid("principalArn is required".into());
    };
    let entry_type = match v["type"].as_str() {
        None => AccessEntryType::Standard,
        Some(t) => match AccessEntryType::parse(t) {
            Some(t) => t,
            None => {
                return invalid(format!(
                    "The type {t} is not supported (STANDARD, EC2_LINUX, EC2_WINDOWS)"
                ))
            }
        },
    };
    let groups: Vec<String> = v["kubernetesGroups"]
        .as_array()
        .map(|a| a.iter().filter_map(|g| g.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let entry = match AccessEntry::new(principal, entry_type, v["username"].as_str(), &groups) {
        Ok(e) => e,
        Err(m) => return invalid(m),
    };
    if cluster.authentication_mode == AuthenticationMode::ConfigMap {
        return invalid(format!(
            "The cluster's authentication mode is CONFIG_MAP; access entries need API or API_AND_CONFIG_MAP ({})",
            cluster.name
        ));
    }
    match cluster.create_access_entry(entry) {
        Ok(json) => json_ok(serde_json::json!({ "accessEntry": json })),
        Err((status, code, message)) => aws_json_error(status, code, &message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::iam::IssuedCredentials;
    use crate::fakes::sigv4::tests::sign_headers;
    use crate::fakes::FakeServer;

    fn record(creating: u32, mode: AuthenticationMode) -> ClusterRecord {
        ClusterRecord {
            name: "demo".into(),
            region: "eu-west-1".into(),
            account_id: "111122223333".into(),
            endpoint: "https://172.18.0.1:6443".into(),
            ca_base64: "Q0E=".into(),
            service_ipv4_cidr: "10.100.0.0/16".into(),
            vpc: crate::fakes::vpc::Vpc::new("demo", &Default::default()),
            version: "1.36".into(),
            id: "c0ffee".into(),
            created: SystemTime::now(),
            creating_for_calls: AtomicU32::new(creating),
            creating_for: None,
            first_described: Default::default(),
            authentication_mode: mode,
            access_entries: RwLock::new(Vec::new()),
        }
    }

    struct Fixture {
        eks: Arc<Eks>,
        server: FakeServer,
        creds: Arc<IssuedCredentials>,
        client: reqwest::Client,
    }

    impl Fixture {
        async fn start(creating: u32, mode: AuthenticationMode) -> Self {
            let instances = Instances::new();
            let i = instances.register(crate::fakes::instances::tests::instance());
            let creds = instances.iam.serve(i.holder(), SystemTime::now()).unwrap().credentials;
            let eks = Eks::new(instances);
            eks.put(record(creating, mode));
            let server = FakeServer::start("eks", "127.0.0.1".parse().unwrap(), eks.clone().router())
                .await
                .unwrap();
            Self {
                eks,
                server,
                creds,
                client: reqwest::Client::new(),
            }
        }

        async fn call(&self, method: &str, path: &str, body: &str, region: &str) -> reqwest::Response {
            let url = format!("{}{path}", self.server.url());
            let extra: &[(&str, &str)] = if body.is_empty() {
                &[]
            } else {
                &[("content-type", "application/json")]
            };
            let headers = sign_headers(method, &url, extra, body.as_bytes(), &self.creds, region, "eks");
            let mut req = self
                .client
                .request(method.parse().unwrap(), &url)
                .body(body.to_string());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.send().await.unwrap()
        }
    }

    #[tokio::test]
    async fn describe_shape() {
        let f = Fixture::start(0, AuthenticationMode::ConfigMap).await;
        let r = f.call("GET", "/clusters/demo", "", "eu-west-1").await;
        assert_eq!(r.status(), 200);
        let v: serde_json::Value = r.json().await.unwrap();
        let c = &v["cluster"];
        assert_eq!(c["status"], "ACTIVE");
        assert_eq!(c["endpoint"], "https://172.18.0.1:6443");
        assert_eq!(c["certificateAuthority"]["data"], "Q0E=");
        assert_eq!(c["kubernetesNetworkConfig"]["serviceIpv4Cidr"], "10.100.0.0/16");
        assert_eq!(c["kubernetesNetworkConfig"]["ipFamily"], "ipv4");
        let vpc = crate::fakes::vpc::Vpc::new("demo", &Default::default());
        assert_eq!(c["resourcesVpcConfig"]["vpcId"], vpc.vpc_id.as_str());
        assert_eq!(c["resourcesVpcConfig"]["subnetIds"], serde_json::json!([vpc.subnet_id]));
        assert_eq!(c["arn"], "arn:aws:eks:eu-west-1:111122223333:cluster/demo");
        assert_eq!(c["accessConfig"]["authenticationMode"], "CONFIG_MAP");
        assert_eq!(c["id"], "c0ffee");
        assert_eq!(c["version"], "1.36");
    }

    #[tokio::test]
    async fn creating_then_active() {
        let f = Fixture::start(2, AuthenticationMode::ApiAndConfigMap).await;
        let mut seen = vec![];
        for _ in 0..3 {
            let v: serde_json::Value = f
                .call("GET", "/clusters/demo", "", "eu-west-1")
                .await
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
        let f = Fixture::start(0, AuthenticationMode::ApiAndConfigMap).await;
        let r = f.call("GET", "/clusters/nope", "", "eu-west-1").await;
        assert_eq!(r.status(), 404);
        assert_eq!(r.headers()["x-amzn-errortype"], "ResourceNotFoundException");
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["message"], "No cluster found for name: nope.");
        let r = f
            .client
            .get(format!("{}/clusters/demo", f.server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        assert_eq!(r.headers()["x-amzn-errortype"], "MissingAuthenticationTokenException");
        let r = f.call("GET", "/clusters/demo", "", "us-east-2").await;
        assert_eq!(r.status(), 403);
        assert_eq!(r.headers()["x-amzn-errortype"], "InvalidSignatureException");
        // Signed with a key IMDS never issued.
        let mut stranger = (*f.creds).clone();
        stranger.access_key_id = "ASIASTRANGER00000000".into();
        let url = format!("{}/clusters/demo", f.server.url());
        let mut req = f.client.get(&url);
        for (k, v) in sign_headers("GET", &url, &[], b"", &stranger, "eu-west-1", "eks") {
            req = req.header(k, v);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.headers()["x-amzn-errortype"], "UnrecognizedClientException");
    }

    /// A node's credentials may describe the cluster and nothing more: reading or writing access entries is
    /// AccessDeniedException (AmazonEKSWorkerNodePolicy), so an unmapped node cannot map itself.
    #[tokio::test]
    async fn node_credentials_cannot_read_or_write_access_entries() {
        let f = Fixture::start(0, AuthenticationMode::Api).await;
        let arn = "arn:aws:iam::111122223333:role/NodeRole";
        let body = serde_json::json!({ "principalArn": arn, "type": "EC2_LINUX" }).to_string();
        for (method, path, body) in [
            ("POST", "/clusters/demo/access-entries", body.as_str()),
            ("GET", "/clusters/demo/access-entries", ""),
        ] {
            let r = f.call(method, path, body, "eu-west-1").await;
            assert_eq!(r.status(), 403, "{method} {path}");
            assert_eq!(r.headers()["x-amzn-errortype"], "AccessDeniedException");
            let text = r.text().await.unwrap();
            assert!(text.contains("is not authorized to perform: eks:"), "{text}");
        }
        assert!(f.eks.get("demo").unwrap().access_entries().is_empty());
        assert_eq!(f.call("GET", "/clusters/demo", "", "eu-west-1").await.status(), 200);
    }

    /// Access entries as the harness creates them from a scenario: EC2 types get EKS's username, a second entry
    /// for a principal conflicts, and a STANDARD username with a reserved prefix is refused.
    #[test]
    fn access_entries_are_validated_as_eks_validates_them() {
        let cluster = record(0, AuthenticationMode::Api);
        let arn = "arn:aws:iam::111122223333:role/NodeRole";
        let entry = AccessEntry::new(arn, AccessEntryType::Ec2Linux, None, &[]).unwrap();
        let json = cluster.create_access_entry(entry.clone()).unwrap();
        assert_eq!(json["username"], "system:node:{{EC2PrivateDNSName}}");
        assert_eq!(cluster.create_access_entry(entry).unwrap_err().0, StatusCode::CONFLICT);
        assert!(AccessEntry::new(arn, AccessEntryType::Ec2Linux, Some("x"), &[]).is_err());
        for reserved in ["system:kube-controller-manager", "eks:x", "aws:x", "amazon:x", "iam:x"] {
            let err = AccessEntry::new(arn, AccessEntryType::Standard, Some(reserved), &[]).unwrap_err();
            assert!(err.contains("can't start with"), "{reserved}: {err}");
        }
        assert!(AccessEntry::new(arn, AccessEntryType::Standard, Some("ops-admin"), &[]).is_ok());
    }
}

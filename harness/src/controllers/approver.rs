//! EKS's kubelet-serving CSR approver, played by the harness.
//!
//! Approves a `kubernetes.io/kubelet-serving` CSR only when the requester is `system:node:<name>` in group
//! `system:nodes`, the subject is `O=system:nodes, CN=system:node:<name>`, the usages are within {server auth,
//! digital signature, key encipherment}, and every SAN is one of that instance's own DNS names or IPs (per the
//! fake EC2 world). Anything else is left pending, and the reason is recorded for the report.
use super::cache::{next_change, ClusterCache};
use crate::fakes::instances::Instances;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use kube::api::{Api, PostParams};
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use x509_parser::prelude::*;

pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// One approval decision.
#[derive(Debug, Clone)]
pub struct Decision {
    pub csr: String,
    pub requester: String,
    pub approved: bool,
    pub reason: String,
    /// When it was made: a shared control plane outlives scenarios, and a node name can come back.
    pub at: std::time::SystemTime,
}

impl crate::fakes::capped::Weigh for Decision {
    fn weight(&self) -> usize {
        self.csr.len() + self.requester.len() + self.reason.len()
    }
}

#[derive(Default)]
pub struct Approver {
    /// By requester (a node's CSRs come from its own identity), each capped: a node that files CSRs in a loop
    /// grows no log without bound.
    decisions: Mutex<crate::fakes::capped::Capped<String, Decision>>,
}

/// The SANs and subject of a PEM CSR.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CsrContent {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

pub fn parse_csr(pem: &[u8]) -> Result<CsrContent, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem).map_err(|e| format!("CSR is not PEM: {e}"))?;
    let (_, req) =
        X509CertificationRequest::from_der(&pem.contents).map_err(|e| format!("CSR is not DER PKCS#10: {e}"))?;
    let (common_name, organizations) = crate::pki::subject_names(&req.certification_request_info.subject);
    let mut out = CsrContent {
        common_name,
        organizations,
        ..Default::default()
    };
    for ext in req.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            let (dns, ips, other) = crate::pki::split_sans(&san.general_names);
            if let Some(o) = other.first() {
                return Err(format!("unsupported SAN {o}"));
            }
            out.dns_names.extend(dns);
            out.ips.extend(ips);
        }
    }
    Ok(out)
}

/// The decision for one CSR: `Ok(node)` to approve, `Err(reason)` to leave it pending.
pub fn evaluate(csr: &CertificateSigningRequest, instances: &Instances) -> Result<String, String> {
    let spec = &csr.spec;
    let user = spec.username.clone().unwrap_or_default();
    let node = user
        .strip_prefix("system:node:")
        .ok_or_else(|| format!("requester '{user}' is not a node (system:node:<name>)"))?;
    let groups = spec.groups.clone().unwrap_or_default();
    if !groups.iter().any(|g| g == "system:nodes") {
        return Err(format!(
            "requester {user} is not in group system:nodes (groups: {})",
            groups.join(", ")
        ));
    }
    let allowed = ["server auth", "digital signature", "key encipherment"];
    let usages = spec.usages.clone().unwrap_or_default();
    if let Some(bad) = usages.iter().find(|u| !allowed.contains(&u.as_str())) {
        return Err(format!("usage '{bad}' is not allowed for a serving certificate"));
    }
    if !usages.iter().any(|u| u == "server auth") {
        return Err("usages lack 'server auth'".into());
    }
    let content = parse_csr(&spec.request.0)?;
    if content.common_name != user || content.organizations != ["system:nodes"] {
        return Err(format!(
            "subject CN={} O={} does not match requester {user} / system:nodes",
            content.common_name,
            content.organizations.join(",")
        ));
    }
    let instance = instances
        .by_private_dns_name(node)
        .ok_or_else(|| format!("no EC2 instance has PrivateDnsName {node}"))?;
    if content.dns_names.is_empty() && content.ips.is_empty() {
        return Err("the CSR has no SANs".into());
    }
    let own_dns = [instance.private_dns_name()];
    if let Some(d) = content.dns_names.iter().find(|d| !own_dns.contains(d)) {
        return Err(format!(
            "DNS SAN {d} does not belong to instance {}",
            instance.instance_id
        ));
    }
    if let Some(ip) = content.ips.iter().find(|ip| **ip != IpAddr::V4(instance.private_ip)) {
        return Err(format!(
            "IP SAN {ip} does not belong to instance {}",
            instance.instance_id
        ));
    }
    Ok(node.to_string())
}

impl Approver {
    pub fn decisions(&self) -> Vec<Decision> {
        let mut all: Vec<Decision> = self
            .decisions
            .lock()
            .map(|d| d.all().cloned().collect())
            .unwrap_or_default();
        all.sort_by_key(|d| d.at);
        all
    }

    fn record(&self, mut d: Decision) {
        // The CSR's reason may quote what the node asked for: kept to a bound.
        d.reason = crate::fakes::capped::clip(&d.reason, crate::fakes::capped::REASON_TEXT);
        tracing::info!(csr = %d.csr, requester = %d.requester, approved = d.approved, "approver: {}", d.reason);
        if let Ok(mut all) = self.decisions.lock() {
            all.push(d.requester.clone(), d);
        }
    }

    /// Runs until the task is aborted: decides each new serving CSR once, as the cache shows it.
    pub async fn run(self: Arc<Self>, client: kube::Client, cache: Arc<ClusterCache>, instances: Arc<Instances>) {
        let api: Api<CertificateSigningRequest> = Api::all(client);
        let mut seen: HashSet<String> = HashSet::new();
        let mut changes = cache.subscribe();
        loop {
            for csr in cache.snapshot().map(|s| s.csrs).unwrap_or_default() {
                let Some(uid) = csr.metadata.uid.clone() else {
                    continue;
                };
                let decided = csr
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| !c.is_empty());
                if csr.spec.signer_name != SERVING_SIGNER || decided || seen.contains(&uid) {
                    continue;
                }
                if let Some(decision) = self.decide(&api, &csr, &instances).await {
                    seen.insert(uid);
                    self.record(decision);
                }
            }
            // A failed approval is retried on the next change or after a second.
            next_change(&mut changes, super::RETRY).await;
        }
    }

    /// Approves `csr` or leaves it pending; `None` when the approval could not be written (to be retried).
    async fn decide(
        &self,
        api: &Api<CertificateSigningRequest>,
        csr: &CertificateSigningRequest,
        instances: &Instances,
    ) -> Option<Decision> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        let requester = csr.spec.username.clone().unwrap_or_default();
        let (approved, reason) = match evaluate(csr, instances) {
            Ok(node) => {
                let mut approved = csr.clone();
                let status = approved.status.get_or_insert_with(Default::default);
                status
                    .conditions
                    .get_or_insert_with(Vec::new)
                    .push(CertificateSigningRequestCondition {
                        type_: "Approved".into(),
                        status: "True".into(),
                        reason: Some("NodejoinServingApprover".into()),
                        message: Some(format!("SANs belong to {node}")),
                        ..Default::default()
                    });
                if let Err(e) = api
                    .replace_subresource("approval", &name, &PostParams::default(), &approved)
                    .await
                {
                    tracing::warn!(csr = %name, "approval failed, will retry: {e}");
                    return None;
                }
                (true, format!("approved: SANs belong to {node}"))
            }
            Err(reason) => (false, format!("left pending: {reason}")),
        };
        Some(Decision {
            csr: name,
            requester,
            approved,
            reason,
            at: std::time::SystemTime::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequestSpec;
    use k8s_openapi::ByteString;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, SanType};

    fn instances() -> Arc<Instances> {
        let i = Instances::new();
        let mut one = crate::fakes::instances::tests::instance();
        one.role_name = None;
        i.register(one);
        i
    }

    const NODE: &str = "ip-172-18-0-5.us-west-2.compute.internal";

    fn csr(
        cn: &str,
        org: &str,
        sans: Vec<SanType>,
        user: &str,
        groups: &[&str],
        usages: &[&str],
    ) -> CertificateSigningRequest {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, org);
        dn.push(DnType::CommonName, cn);
        params.distinguished_name = dn;
        params.subject_alt_names = sans;
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        CertificateSigningRequest {
            spec: CertificateSigningRequestSpec {
                request: ByteString(pem.into_bytes()),
                signer_name: SERVING_SIGNER.into(),
                username: Some(user.into()),
                groups: Some(groups.iter().map(|g| g.to_string()).collect()),
                usages: Some(usages.iter().map(|u| u.to_string()).collect()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn good_sans() -> Vec<SanType> {
        vec![
            SanType::DnsName(NODE.try_into().unwrap()),
            SanType::IpAddress("172.18.0.5".parse().unwrap()),
        ]
    }

    const USAGES: &[&str] = &["digital signature", "server auth"];
    const GROUPS: &[&str] = &["system:nodes", "system:authenticated"];

    #[test]
    fn approves_a_proper_request() {
        let user = format!("system:node:{NODE}");
        let c = csr(&user, "system:nodes", good_sans(), &user, GROUPS, USAGES);
        assert_eq!(evaluate(&c, &instances()).unwrap(), NODE);
    }

    #[test]
    fn refuses_foreign_sans_wrong_requester_and_usages() {
        let i = instances();
        let user = format!("system:node:{NODE}");
        let foreign_ip = vec![
            SanType::DnsName(NODE.try_into().unwrap()),
            SanType::IpAddress("10.0.0.9".parse().unwrap()),
        ];
        assert!(
            evaluate(&csr(&user, "system:nodes", foreign_ip, &user, GROUPS, USAGES), &i)
                .unwrap_err()
                .contains("10.0.0.9")
        );
        let foreign_dns = vec![SanType::DnsName("evil.example.com".try_into().unwrap())];
        assert!(
            evaluate(&csr(&user, "system:nodes", foreign_dns, &user, GROUPS, USAGES), &i)
                .unwrap_err()
                .contains("evil")
        );
        assert!(
            evaluate(&csr(&user, "system:nodes", good_sans(), "alice", GROUPS, USAGES), &i)
                .unwrap_err()
                .contains("not a node")
        );
        assert!(evaluate(
            &csr(
                &user,
                "system:nodes",
                good_sans(),
                &user,
                &["system:authenticated"],
                USAGES
            ),
            &i
        )
        .unwrap_err()
        .contains("system:nodes"));
        assert!(evaluate(
            &csr(&user, "system:nodes", good_sans(), &user, GROUPS, &["client auth"]),
            &i
        )
        .unwrap_err()
        .contains("client auth"));
        assert!(evaluate(
            &csr("system:node:other", "system:nodes", good_sans(), &user, GROUPS, USAGES),
            &i
        )
        .unwrap_err()
        .contains("subject"));
        assert!(evaluate(&csr(&user, "system:nodes", vec![], &user, GROUPS, USAGES), &i)
            .unwrap_err()
            .contains("no SANs"));
        let ghost = "system:node:ip-1-2-3-4.us-west-2.compute.internal";
        assert!(
            evaluate(&csr(ghost, "system:nodes", good_sans(), ghost, GROUPS, USAGES), &i)
                .unwrap_err()
                .contains("no EC2 instance")
        );
    }
}

//! Finding a node's CSRs: the client CSR (signer `kube-apiserver-client-kubelet`, subject
//! `CN=system:node:<name>`) and the serving CSR (signer `kubelet-serving`, requested by `system:node:<name>`).
use crate::controllers::approver::{parse_csr, SERVING_SIGNER};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use std::borrow::Borrow;

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// State of a node's CSR of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsrState {
    pub name: Option<String>,
    pub requester: Option<String>,
    pub approved: bool,
    pub issued: bool,
}

fn state(csr: &CertificateSigningRequest) -> CsrState {
    let status = csr.status.as_ref();
    CsrState {
        name: csr.metadata.name.clone(),
        requester: csr.spec.username.clone(),
        approved: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Approved" && c.status == "True")),
        issued: status
            .and_then(|s| s.certificate.as_ref())
            .is_some_and(|c| !c.0.is_empty()),
    }
}

/// The most advanced client CSR for `node` (issued beats approved beats pending).
pub fn client_csr<C: Borrow<CertificateSigningRequest>>(all: &[C], node: &str) -> Option<CsrState> {
    let cn = format!("system:node:{node}");
    best(all.iter().map(Borrow::borrow).filter(|c| {
        c.spec.signer_name == CLIENT_SIGNER
            && parse_csr(&c.spec.request.0)
                .map(|p| p.common_name == cn)
                .unwrap_or(false)
    }))
}

/// The most advanced serving CSR for `node`: requested by the node, or asking for its name whoever requested it
/// (a kubelet whose role maps to another user, awslabs/amazon-eks-ami#610: its CSR stays pending).
pub fn serving_csr<C: Borrow<CertificateSigningRequest>>(all: &[C], node: &str) -> Option<CsrState> {
    let user = format!("system:node:{node}");
    best(all.iter().map(Borrow::borrow).filter(|c| {
        c.spec.signer_name == SERVING_SIGNER
            && (c.spec.username.as_deref() == Some(user.as_str())
                || parse_csr(&c.spec.request.0).is_ok_and(|p| p.common_name == user))
    }))
}

/// Whether `csr` is one of `node`'s (client or serving).
pub fn belongs_to(csr: &CertificateSigningRequest, node: &str) -> bool {
    let one = std::slice::from_ref(csr);
    client_csr(one, node).is_some() || serving_csr(one, node).is_some()
}

fn best<'a>(csrs: impl Iterator<Item = &'a CertificateSigningRequest>) -> Option<CsrState> {
    csrs.map(state).max_by_key(|s| (s.issued, s.approved))
}

//! The rest of the control plane, as far as pods need it: writes go through the
//! ServiceAccount admission plugin (pods), every namespace gets the objects the
//! controllers make in it, and service accounts' tokens are issued.
//!
//! The controllers' objects, a `default` ServiceAccount and the `kube-root-ca.crt`
//! ConfigMap (`ca.crt`: the cluster's CA), are made when a namespace is first written
//! into (namespaces always exist here), at start for `default`, `kube-system`,
//! `kube-public` and `kube-node-lease`, and again when deleted, each a write of its
//! own. Simplified: a changed `kube-root-ca.crt` is not put back.

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::{Error, Result};
use super::resource::{CONFIGMAPS, PODS, ResourceType, SERVICEACCOUNTS, SERVICES};
use super::services::{self, Allocator};
use super::store::{DeleteOptions, Deleted, Store};
use super::token::{self, Signer};
use super::{admission, runtime_class};

/// The namespaces a new cluster has.
const INITIAL_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// The root CA publisher's description of its ConfigMap.
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
     kube-apiserver when using internal endpoints such as the internal service IP or \
     kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes \
     clusters.";

/// The store with admission, controllers and the token issuer around it.
#[derive(Debug)]
pub struct Cluster {
    pub store: Arc<Store>,
    pub signer: Signer,
    /// The CA (PEM) the `kube-root-ca.crt` ConfigMaps publish.
    root_ca: String,
    /// The shortest token lifetime a TokenRequest may ask for, in seconds.
    min_token_expiration: i64,
    /// Services' cluster IPs.
    cluster_ips: Allocator,
}

impl Cluster {
    pub fn new(
        store: Arc<Store>,
        signer: Signer,
        root_ca: String,
        min_token_expiration: i64,
    ) -> Cluster {
        let cluster = Cluster {
            store,
            signer,
            root_ca,
            min_token_expiration,
            cluster_ips: Allocator::default(),
        };
        for namespace in INITIAL_NAMESPACES {
            cluster.ensure_namespace(namespace);
        }
        cluster
    }

    /// A create, after the namespace's controllers and, for pods, admission.
    pub fn create(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value> {
        if let Some(namespace) = namespace.filter(|_| resource.namespaced) {
            self.ensure_namespace(namespace);
            if resource == &PODS && object.is_object() {
                admission::admit_pod(&self.store, namespace, &mut object)?;
                runtime_class::admit_pod(&self.store, &mut object)?;
            }
            if resource == &SERVICES {
                self.cluster_ips.prepare(&mut object);
            }
        }
        self.store.create(resource, namespace, object)
    }

    /// A delete; the controllers put back what they own.
    pub fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        let deleted = self.store.delete(resource, namespace, name, options)?;
        let owned = (resource == &SERVICEACCOUNTS && name == "default")
            || (resource == &CONFIGMAPS && name == ROOT_CA_CONFIGMAP);
        if let (true, Some(namespace), Deleted::Gone(_)) = (owned, namespace, &deleted) {
            self.ensure_namespace(namespace);
        }
        Ok(deleted)
    }

    /// The `kubernetes` Service of `default`, for the server listening on `addr`.
    pub fn ensure_master_service(&self, addr: std::net::SocketAddr) {
        services::ensure_master(&self.store, addr);
    }

    /// A TokenRequest for the service account `namespace/name`.
    pub fn token(&self, namespace: &str, name: &str, request: Value) -> Result<Value> {
        token::create(
            &self.store,
            &self.signer,
            self.min_token_expiration,
            namespace,
            name,
            request,
        )
    }

    /// Makes the controllers' objects in `namespace` that are missing.
    fn ensure_namespace(&self, namespace: &str) {
        let account = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": { "name": "default", "namespace": namespace },
        });
        let root_ca = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_CONFIGMAP,
                "namespace": namespace,
                "annotations": { "kubernetes.io/description": ROOT_CA_DESCRIPTION },
            },
            "data": { "ca.crt": self.root_ca },
        });
        for (resource, object) in [(&SERVICEACCOUNTS, account), (&CONFIGMAPS, root_ca)] {
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if matches!(
                self.store.get(resource, Some(namespace), &name),
                Err(Error::NotFound { .. })
            ) {
                // A concurrent write may have made it first: AlreadyExists is fine, and
                // the objects are valid, so nothing else can fail.
                let _ = self.store.create(resource, Some(namespace), object);
            }
        }
    }
}

//! Object access for tests, without HTTP: the same store operations (and the same
//! rules) as the API, as the rest of a cluster (a scheduler, kubectl) would apply them.
//! Resources are named by plural (`pods`, `nodes`, `leases`, `events`, `configmaps`,
//! `secrets`, `serviceaccounts`, `persistentvolumeclaims`, `persistentvolumes`, or
//! `events.events.k8s.io`).

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::TestApiServer;
use super::error::{Error, Result};
use super::patch::Patch;
use super::resource::{self, ResourceType};
use super::store::{DeleteOptions, Deleted};
use super::strategy::meta;

fn resource(name: &str) -> Result<&'static ResourceType> {
    resource::lookup(name).ok_or(Error::NoRoute)
}

/// The resource of an object, by its `apiVersion` and `kind`.
fn resource_of(object: &Value) -> Result<&'static ResourceType> {
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default();
    resource::by_kind(field("apiVersion"), field("kind")).ok_or_else(|| {
        Error::BadRequest(format!(
            "no served resource for {}/{}",
            field("apiVersion"),
            field("kind")
        ))
    })
}

/// The namespace an object is written to: its own, or `default` (as kubectl does).
fn namespace_of<'a>(resource: &ResourceType, object: &'a Value) -> Option<&'a str> {
    resource
        .namespaced
        .then(|| meta(object, "namespace").filter(|ns| !ns.is_empty()).unwrap_or("default"))
}

fn to_value<K: Serialize>(object: &K) -> Result<Value> {
    serde_json::to_value(object)
        .map_err(|e| Error::BadRequest(format!("cannot encode the object: {e}")))
}

fn from_value<K: DeserializeOwned>(object: Value) -> Result<K> {
    serde_json::from_value(object)
        .map_err(|e| Error::Internal(format!("cannot decode the stored object: {e}")))
}

impl TestApiServer {
    /// Creates an object (its `apiVersion` and `kind` say of which resource), as a POST
    /// would (pods through admission, see [`TestApiServer::create_pod`]; the namespace's
    /// `default` ServiceAccount and `kube-root-ca.crt` made first if missing): the
    /// stored object, with uid, creationTimestamp and resourceVersion.
    pub fn create(&self, object: Value) -> Result<Value> {
        let resource = resource_of(&object)?;
        let namespace = namespace_of(resource, &object).map(str::to_string);
        self.shared.cluster.create(resource, namespace.as_deref(), object)
    }

    /// The object, as a GET would return it.
    pub fn get(&self, resource: &str, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.shared.store.get(self::resource(resource)?, namespace, name)
    }

    /// Replaces an object, as a PUT would (a `metadata.resourceVersion` in it must be
    /// the current one; main-resource writes keep the old status).
    pub fn update(&self, object: Value) -> Result<Value> {
        self.write(object, false)
    }

    /// Replaces an object's status, as a PUT on `/status` would.
    pub fn update_status(&self, object: Value) -> Result<Value> {
        self.write(object, true)
    }

    fn write(&self, object: Value, status_only: bool) -> Result<Value> {
        let resource = resource_of(&object)?;
        let namespace = namespace_of(resource, &object).map(str::to_string);
        let name = meta(&object, "name").unwrap_or_default().to_string();
        self.shared.store.update(resource, namespace.as_deref(), &name, status_only, |_| Ok(object))
    }

    /// Patches an object (or, with `status_only`, its status) as a PATCH would.
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Patch,
        status_only: bool,
    ) -> Result<Value> {
        let resource = self::resource(resource)?;
        self.shared
            .store
            .update(resource, namespace, name, status_only, |current| patch.apply(current))
    }

    /// Resizes a pod's containers as a strategic merge PATCH of `pods/resize` would
    /// (K6): only their cpu and memory change, under the subresource's rules.
    pub fn resize_pod(&self, namespace: &str, name: &str, patch: Value) -> Result<Value> {
        let patch = Patch::Strategic(patch);
        let key = (Some(namespace), name);
        self.shared.store.update_with(&resource::PODS, key, super::resize::prepare_update, |old| {
            patch.apply(old)
        })
    }

    /// Deletes an object as a DELETE with `gracePeriodSeconds` would: pods bound to a
    /// node with a grace period are only marked (`deletionTimestamp`); the rest go at
    /// once. Returns the object's last state, or its new state when only marked.
    pub fn delete(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        grace: Option<i64>,
    ) -> Result<Value> {
        let options = DeleteOptions { grace_period_seconds: grace, ..DeleteOptions::default() };
        match self.shared.cluster.delete(self::resource(resource)?, namespace, name, &options)? {
            Deleted::Gone(object) | Deleted::Pending(object) => Ok(object),
        }
    }

    /// The objects of a resource (in `namespace`, if given), sorted by namespace and
    /// name.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Value>> {
        let (objects, _) =
            self.shared.store.objects_at(self::resource(resource)?, namespace, None)?;
        Ok(objects.into_iter().map(|(_, object)| Value::clone(&object)).collect())
    }

    /// [`TestApiServer::create`] for a typed object (`Pod`, `Node`, `Lease`, …).
    pub fn create_typed<K: k8s_openapi::Resource + Serialize + DeserializeOwned>(
        &self,
        object: &K,
    ) -> Result<K> {
        let mut value = to_value(object)?;
        value["apiVersion"] = K::API_VERSION.into();
        value["kind"] = K::KIND.into();
        from_value(self.create(value)?)
    }

    /// [`TestApiServer::get`] for a typed object.
    pub fn get_typed<K: k8s_openapi::Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<K> {
        let resource = resource::by_kind(K::API_VERSION, K::KIND).ok_or(Error::NoRoute)?;
        from_value(self.shared.store.get(resource, namespace, name)?)
    }

    /// [`TestApiServer::list`] for a typed resource.
    pub fn list_typed<K: k8s_openapi::Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<K>> {
        let resource = resource::by_kind(K::API_VERSION, K::KIND).ok_or(Error::NoRoute)?;
        let (objects, _) = self.shared.store.objects_at(resource, namespace, None)?;
        objects.into_iter().map(|(_, object)| from_value(Value::clone(&object))).collect()
    }

    /// Creates a pod (its namespace, or `default`). As on the real server, the status
    /// is reset to `Pending` (set one with [`TestApiServer::update_status`]), and the
    /// ServiceAccount admission plugin runs: the pod gets `serviceAccountName:
    /// default` and the `kube-api-access-*` volume unless it opts out
    /// (`automountServiceAccountToken: false`).
    pub fn create_pod(&self, pod: &Pod) -> Result<Pod> {
        self.create_typed(pod)
    }

    pub fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod> {
        self.get_typed(Some(namespace), name)
    }

    /// Every pod, sorted by namespace and name.
    pub fn pods(&self) -> Result<Vec<Pod>> {
        self.list_typed(None)
    }

    /// Removes a pod now (a delete with grace period 0: what the kubelet does once the
    /// containers are gone, or a force delete).
    pub fn delete_pod(&self, namespace: &str, name: &str) -> Result<()> {
        self.delete("pods", Some(namespace), name, Some(0)).map(drop)
    }

    /// A token of the service account `namespace/account`, as a TokenRequest with
    /// `spec` would give it.
    pub fn create_token(&self, namespace: &str, account: &str, spec: Value) -> Result<String> {
        let answer = self.shared.cluster.token(namespace, account, json!({ "spec": spec }))?;
        let token = answer.pointer("/status/token").and_then(Value::as_str).unwrap_or_default();
        Ok(token.to_owned())
    }
}

//! The HTTP face of the server: authentication, routing of a request to its verb on a
//! resource, request bodies and query parameters, and JSON responses.
//!
//! Only JSON is spoken (`application/json`; `application/yaml` is also read for create
//! and update bodies). Simplified: `dryRun` is refused (400) rather than served,
//! `deletecollection` is not served (405), and the only subresources are `status` and
//! a service account's `token` (POST only). Every request is authenticated (`authn`);
//! `SelfSubjectReview`s are answered with who it is, `TokenReview`s and
//! `SubjectAccessReview`s by `reviews`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::audit::{Audit, Refusal, Refusals};
use super::authn::{self, User};
use super::bootstrap;
use super::cluster::Cluster;
use super::csr;
use super::discovery;
use super::ephemeral;
use super::error::{self, Error, Result};
use super::fault::{Faults, STORM_REFUSAL};
use super::list::{self, ListOptions};
use super::node_authorizer::{self, Attributes};
use super::node_restriction::{self, Write as NodeWrite};
use super::patch::Patch;
use super::proxy::{self, Proxied};
use super::resize;
use super::resource::{self, PathError, Target};
use super::resource::{CERTIFICATESIGNINGREQUESTS, PODS};
use super::reviews;
use super::signer::CertificateSigner;
use super::store::{DeleteOptions, Deleted, Store};
use super::watch::{self, WatchRequest, Watchers};

/// A response body: a whole JSON document or a watch stream.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The largest request body taken (the real server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// What every connection's requests are served from.
#[derive(Debug)]
pub struct Shared {
    pub store: Arc<Store>,
    /// The store with admission, controllers and tokens: every create and delete.
    pub cluster: Cluster,
    pub watchers: Arc<Watchers>,
    pub audit: Audit,
    /// Body bytes each way, by request.
    pub traffic: super::audit::Traffic,
    /// API Priority and Fairness as a client sees it (module `flow`).
    pub flow: super::flow::FlowControl,
    pub faults: Faults,
    /// When set, every request needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    pub bookmark_interval: Duration,
    /// What SubjectAccessReviews are answered from.
    pub rules: reviews::Rules,
    /// How the proxy dials nodes (the kubelet-client certificate).
    pub kubelet_client: Arc<rustls::ClientConfig>,
    /// The cluster signer and client-certificate authenticator (module `signer`).
    pub certificates: CertificateSigner,
    /// Requests by the user who made them.
    pub users: Audit,
    /// The test approves every serving request as it comes ([`csr::SERVING_SIGNER`]).
    pub approve_serving: std::sync::atomic::AtomicBool,
    /// What the Node authorizer and NodeRestriction refused.
    pub refusals: Refusals,
    /// What nodes asked, against `deploy/rbac.yaml` (module `rbac`).
    pub node_requests: super::rbac::NodeRequests,
    /// Bearer tokens that authenticate as nodes: token → node name.
    pub node_tokens: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

/// The client certificate a connection presented (its first), if any.
pub type PeerCertificate = Option<Arc<rustls::pki_types::CertificateDer<'static>>>;

/// Who a request is: a client certificate the cluster CA signed (an invalid one is a
/// 401 unless a token authenticates), else the bearer token (module `authn`).
fn authenticate(shared: &Shared, peer: &PeerCertificate, headers: &HeaderMap) -> Result<User> {
    if let Some(user) = node_token_user(shared, headers) {
        return Ok(user);
    }
    let by_certificate = peer.as_ref().map(|der| shared.certificates.authenticate(der));
    if let Some(Ok(user)) = by_certificate {
        return Ok(user);
    }
    let by_token = authn::authenticate(
        &shared.store,
        &shared.cluster.signer,
        shared.token.as_deref(),
        headers,
    );
    match (by_token, by_certificate) {
        (Ok(user), Some(Err(error))) if user.is_anonymous() => Err(error),
        (result, _) => result,
    }
}

/// The node a bearer token of [`Shared::node_tokens`] stands for, as a client
/// certificate `CN=system:node:<name>, O=system:nodes` would.
fn node_token_user(shared: &Shared, headers: &HeaderMap) -> Option<User> {
    let token = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))?
        .trim();
    let tokens = shared.node_tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let node = tokens.get(token)?;
    Some(User(serde_json::json!({
        "username": format!("{}{node}", node_authorizer::NODE_USER_PREFIX),
        "groups": [node_authorizer::NODES_GROUP, "system:authenticated"],
    })))
}

/// The Node authorizer, for a node's request (every other user is let through); a
/// refusal is recorded.
fn authorize(shared: &Shared, user: &User, attrs: &Attributes) -> Result<()> {
    let Some(node) = node_authorizer::node_identity(user) else { return Ok(()) };
    // What the node asked, allowed or not, for `deploy/rbac.yaml`'s checks.
    if let Some(request) = super::rbac::Request::of(attrs) {
        shared.node_requests.record(request);
    }
    let decision = if shared.faults.forbids(&attrs.verb) {
        Err(format!("no relationship found between node '{node}' and this object {STORM_REFUSAL}"))
    } else {
        node_authorizer::authorize(&shared.store, node, attrs)
    };
    let reason = match decision {
        Ok(()) => return Ok(()),
        Err(_) if node.is_empty() => {
            format!("unknown node for user {:?}", user.name())
        }
        Err(reason) => reason,
    };
    let error = node_authorizer::forbidden(user, attrs, &reason);
    let resource = if attrs.resource.is_empty() { attrs.path.clone() } else { attrs.combined() };
    let object = match (attrs.namespace.as_str(), attrs.name.as_str()) {
        ("", name) => name.to_owned(),
        (namespace, name) => format!("{namespace}/{name}"),
    };
    refused(shared, user, (&attrs.verb, &resource, &object), &error);
    Err(error)
}

/// NodeRestriction, for a node's write of `target` (nothing for other users); a
/// refusal is recorded.
fn admit(
    shared: &Shared,
    user: &User,
    verb: &str,
    target: &Target,
    write: NodeWrite<'_>,
) -> Result<()> {
    let Some(node) = node_authorizer::node_identity(user) else { return Ok(()) };
    let subresource = target.subresource.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let name = target.name.as_deref().unwrap_or_default();
    let result = node_restriction::admit(
        &shared.store,
        node,
        (target.resource, subresource),
        (namespace, name),
        write,
    );
    if let Err(error) = &result {
        let object =
            if namespace.is_empty() { name.to_owned() } else { format!("{namespace}/{name}") };
        refused(shared, user, (verb, &audit_resource(target), &object), error);
    }
    result
}

fn refused(
    shared: &Shared,
    user: &User,
    (verb, resource, object): (&str, &str, &str),
    error: &Error,
) {
    let refusal = Refusal {
        user: user.name().to_owned(),
        verb: verb.to_owned(),
        resource: resource.to_owned(),
        object: object.to_owned(),
        message: error.to_string(),
    };
    tracing::warn!(%refusal, "refused a node's request");
    shared.refusals.record(refusal);
}

/// Serves one request.
pub async fn handle(
    shared: Arc<Shared>,
    peer: PeerCertificate,
    request: Request<Incoming>,
) -> Response<Body> {
    if let Some(proxied) = proxy::route(request.uri().path()) {
        return proxy_to_node(&shared, &peer, request, proxied).await;
    }
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let query: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let route = resource::parse_path(&path);
    let (verb, resource) = match &route {
        Ok(target) => (verb(&parts.method, target, &query).to_owned(), audit_resource(target)),
        Err(_) if parts.method == Method::POST && path == reviews::TOKEN_REVIEWS => {
            ("create".to_owned(), "tokenreviews".to_owned())
        }
        Err(_) if parts.method == Method::POST && path == reviews::SUBJECT_ACCESS_REVIEWS => {
            ("create".to_owned(), "subjectaccessreviews".to_owned())
        }
        Err(_) => (parts.method.as_str().to_ascii_lowercase(), path.clone()),
    };
    shared.audit.record(&verb, &resource);
    if let Ok(Target { name: Some(name), namespace, .. }) = &route {
        let object = namespace.as_ref().map_or_else(|| name.clone(), |ns| format!("{ns}/{name}"));
        shared.audit.record_object(&verb, &resource, &object);
    }
    let body =
        Received { body, verb: verb.clone(), resource: resource.clone(), shared: shared.clone() };
    let response = respond(&shared, &peer, parts, body, (&verb, &path, &query), route).await;
    metered(response, shared, verb, resource)
}

/// A request's body, counted as it is read ([`super::audit::Traffic`]).
struct Received {
    body: Incoming,
    verb: String,
    resource: String,
    shared: Arc<Shared>,
}

/// The response's body, counted as it is sent (a watch's events one by one).
fn metered(
    response: Response<Body>,
    shared: Arc<Shared>,
    verb: String,
    resource: String,
) -> Response<Body> {
    response.map(|body| {
        body.map_frame(move |frame| {
            if let Some(data) = frame.data_ref() {
                shared.traffic.sent(&verb, &resource, data.len());
            }
            frame
        })
        .boxed_unsync()
    })
}

/// Authenticates, admits (flow control, injected faults) and serves a request.
async fn respond(
    shared: &Arc<Shared>,
    peer: &PeerCertificate,
    parts: hyper::http::request::Parts,
    body: Received,
    (verb, path, query): (&str, &str, &[(String, String)]),
    route: std::result::Result<Target, PathError>,
) -> Response<Body> {
    let user = match authenticate(shared, peer, &parts.headers) {
        Ok(user) => user,
        Err(Error::Unauthorized)
            if bootstrap::anonymous_read(&parts.method, path, &parts.headers) =>
        {
            bootstrap::anonymous()
        }
        Err(error) => return error_response(&error),
    };
    shared.users.record(verb, user.name());
    if let Err(seconds) = shared.flow.admit() {
        return error_response(&Error::TooManyRequests { retry_after: Some(seconds) });
    }
    if let Some(fault) = shared.faults.take(verb, &body.resource) {
        return error_response(&fault.error());
    }
    let reviewed = match path {
        reviews::TOKEN_REVIEWS => Some(("authentication.k8s.io", "tokenreviews")),
        reviews::SUBJECT_ACCESS_REVIEWS => Some(("authorization.k8s.io", "subjectaccessreviews")),
        authn::SELF_SUBJECT_REVIEWS => Some(("authentication.k8s.io", "selfsubjectreviews")),
        _ => None,
    };
    let attrs = Attributes::of_request(route.as_ref().ok(), reviewed, verb, path, query);
    if let Err(error) = authorize(shared, &user, &attrs) {
        return error_response(&error);
    }
    if parts.method == Method::POST && path == authn::SELF_SUBJECT_REVIEWS {
        return json_response(StatusCode::CREATED, &authn::self_subject_review(&user));
    }
    if parts.method == Method::POST
        && (path == reviews::TOKEN_REVIEWS || path == reviews::SUBJECT_ACCESS_REVIEWS)
    {
        return review(shared, path, &parts.headers, body)
            .await
            .unwrap_or_else(|error| error_response(&error));
    }
    let result = match route {
        Ok(target) => {
            serve(shared, &user, &parts.method, &parts.headers, body, target, query).await
        }
        Err(PathError::NotFound) if parts.method == Method::GET => discovery::document(path)
            .map(|doc| json_response(StatusCode::OK, &doc))
            .ok_or(Error::NoRoute),
        Err(_) => Err(Error::NoRoute),
    };
    result.unwrap_or_else(|error| error_response(&error))
}

/// A request for a node (`pods/exec`, `nodes/proxy`, ...): authenticated and audited as
/// any other, then proxied (module `proxy`).
async fn proxy_to_node(
    shared: &Shared,
    peer: &PeerCertificate,
    request: Request<Incoming>,
    proxied: Proxied,
) -> Response<Body> {
    let verb = if request.method() == Method::GET { "get" } else { "create" };
    let resource = match &proxied {
        Proxied::Pod { subresource, .. } => format!("pods/{}", subresource.name()),
        Proxied::Node { .. } => "nodes/proxy".to_owned(),
    };
    shared.audit.record(verb, &resource);
    if let Err(error) = authenticate(shared, peer, request.headers()) {
        return error_response(&error);
    }
    if let Some(fault) = shared.faults.take(verb, &resource) {
        return error_response(&fault.error());
    }
    proxy::serve(&shared.store, &shared.kubelet_client, request, proxied)
        .await
        .unwrap_or_else(|error| error_response(&error))
}

/// The audit verb of a request.
fn verb(method: &Method, target: &Target, query: &[(String, String)]) -> &'static str {
    let watch = query.iter().any(|(k, v)| k == "watch" && matches!(v.as_str(), "true" | "1"));
    match (method, target.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if watch => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => "unknown",
    }
}

/// `pods` or `pods/status`.
fn audit_resource(target: &Target) -> String {
    match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource.plural),
        None => target.resource.plural.to_string(),
    }
}

async fn serve(
    shared: &Arc<Shared>,
    user: &User,
    method: &Method,
    headers: &HeaderMap,
    body: Received,
    target: Target,
    query: &[(String, String)],
) -> Result<Response<Body>> {
    let store = &shared.store;
    let cluster = &shared.cluster;
    let resource = target.resource;
    let namespace = target.namespace.as_deref();
    let status_only = target.subresource.is_some();
    if query.iter().any(|(k, v)| k == "dryRun" && !v.is_empty()) {
        return Err(Error::BadRequest("dryRun is not supported by the test API server".into()));
    }
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let ok = |object: Value| Ok(json_response(StatusCode::OK, &object));
    if target.subresource.as_deref() == Some("token") {
        let (&Method::POST, Some(namespace), Some(name)) = (method, namespace, &target.name) else {
            return Err(Error::MethodNotAllowed);
        };
        let request = decode_object(content_type, &read_body(body).await?)?;
        admit(shared, user, "create", &target, NodeWrite::Create { object: &request })?;
        return Ok(json_response(StatusCode::CREATED, &cluster.token(namespace, name, request)?));
    }
    let prepare = match target.subresource.as_deref() {
        Some(ephemeral::SUBRESOURCE) => Some(ephemeral::prepare_update as Prepare),
        Some(resize::SUBRESOURCE) => Some(resize::prepare_update as Prepare),
        _ => None,
    };
    if let Some(prepare) = prepare {
        let request = (method, content_type, body);
        return serve_pod_spec_subresource(shared, user, request, &target, prepare).await;
    }
    let write = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
    if resource == &CERTIFICATESIGNINGREQUESTS && write {
        return serve_csr(shared, user, method, content_type, body, target).await;
    }
    match (method, target.name.as_deref()) {
        (&Method::GET, Some(name)) => ok(store.get(resource, namespace, name)?),
        (&Method::GET, None) => {
            let options = ListOptions::from_query(resource, query)?;
            if !options.watch {
                return ok(list::list(store, resource, namespace, &options).await?);
            }
            let request = WatchRequest::new(resource, namespace, &options)?;
            let guard = shared.watchers.enter(resource.plural.to_string());
            let events = watch::stream(store.clone(), request, shared.bookmark_interval, guard);
            let body = StreamBody::new(events.map(|line| Ok(Frame::data(line))));
            Ok(with_json_type(Response::new(body.boxed_unsync())))
        }
        (&Method::POST, None) if !status_only => {
            if resource.namespaced && namespace.is_none() {
                return Err(Error::MethodNotAllowed);
            }
            let object = decode_object(content_type, &read_body(body).await?)?;
            admit(shared, user, "create", &target, NodeWrite::Create { object: &object })?;
            Ok(json_response(StatusCode::CREATED, &cluster.create(resource, namespace, object)?))
        }
        (&Method::PUT, Some(name)) => {
            let object = decode_object(content_type, &read_body(body).await?)?;
            let sent = object.clone();
            let update = |old: &Value| {
                admit(shared, user, "update", &target, NodeWrite::Update { old, new: &object })?;
                Ok(object.clone())
            };
            match store.update(resource, namespace, name, status_only, update) {
                Err(Error::NotFound { .. }) if resource.create_on_update && !status_only => {
                    admit(shared, user, "create", &target, NodeWrite::Create { object: &sent })?;
                    let created = cluster.create(resource, namespace, sent)?;
                    Ok(json_response(StatusCode::CREATED, &created))
                }
                result => ok(result?),
            }
        }
        (&Method::PATCH, Some(name)) => {
            let patch = Patch::from_request(content_type, &read_body(body).await?)?;
            ok(store.update(resource, namespace, name, status_only, |old| {
                let new = patch.apply(old)?;
                admit(shared, user, "patch", &target, NodeWrite::Update { old, new: &new })?;
                Ok(new)
            })?)
        }
        (&Method::DELETE, Some(name)) if !status_only => {
            admit(shared, user, "delete", &target, NodeWrite::Delete)?;
            let options = delete_options(&read_body(body).await?, query)?;
            match cluster.delete(resource, namespace, name, &options)? {
                Deleted::Gone(object) if !resource.returns_deleted => {
                    let uid =
                        object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                    ok(error::success(&resource.group_resource(), name, uid))
                }
                Deleted::Gone(object) | Deleted::Pending(object) => ok(object),
            }
        }
        _ => Err(Error::MethodNotAllowed),
    }
}

/// What a PUT or PATCH of a subresource makes of the stored object.
type Change = Box<dyn FnOnce(&Value) -> Result<Value> + Send>;

/// How a pod's subresource makes the stored pod from the old one and what was sent.
type Prepare = fn(&Value, Value) -> Result<Value>;

/// The pod subresources that change a part of its spec: `pods/ephemeralcontainers` (X1,
/// module `ephemeral`) and `pods/resize` (K6, module `resize`). GET gives the pod; PUT
/// and PATCH change only that part, as `prepare` says.
async fn serve_pod_spec_subresource(
    shared: &Arc<Shared>,
    user: &User,
    (method, content_type, body): (&Method, &str, Received),
    target: &Target,
    prepare: Prepare,
) -> Result<Response<Body>> {
    let store = &shared.store;
    let (namespace, name) =
        (target.namespace.as_deref(), target.name.as_deref().unwrap_or_default());
    let change: Change = match *method {
        Method::GET => {
            return Ok(json_response(StatusCode::OK, &store.get(&PODS, namespace, name)?));
        }
        Method::PUT => {
            let object = decode_object(content_type, &read_body(body).await?)?;
            Box::new(move |_| Ok(object))
        }
        Method::PATCH => {
            let patch = Patch::from_request(content_type, &read_body(body).await?)?;
            Box::new(move |old| patch.apply(old))
        }
        _ => return Err(Error::MethodNotAllowed),
    };
    let verb = if *method == Method::PUT { "update" } else { "patch" };
    let updated = store.update_with(&PODS, (namespace, name), prepare, |old| {
        let new = change(old)?;
        admit(shared, user, verb, target, NodeWrite::Update { old, new: &new })?;
        Ok(new)
    })?;
    Ok(json_response(StatusCode::OK, &updated))
}

/// Writes of `certificatesigningrequests` (module `csr`); reads are any resource's.
async fn serve_csr(
    shared: &Arc<Shared>,
    user: &User,
    method: &Method,
    content_type: &str,
    body: Received,
    target: Target,
) -> Result<Response<Body>> {
    let store = &shared.store;
    let resource = target.resource;
    let subresource = target.subresource.as_deref();
    let (name, write) = match (method, target.name.as_deref()) {
        (&Method::POST, None) => {
            let object = decode_object(content_type, &read_body(body).await?)?;
            let approve_serving = shared.approve_serving.load(std::sync::atomic::Ordering::Relaxed);
            let created = csr::create(
                store,
                &shared.certificates,
                &shared.rules,
                user,
                object,
                approve_serving,
            )?;
            return Ok(json_response(StatusCode::CREATED, &created));
        }
        (&Method::PUT, Some(name)) => {
            let sent = decode_object(content_type, &read_body(body).await?)?;
            (name, Write::Put(sent))
        }
        (&Method::PATCH, Some(name)) => {
            (name, Write::Patch(Patch::from_request(content_type, &read_body(body).await?)?))
        }
        _ => return Err(Error::MethodNotAllowed),
    };
    let updated = store.update(resource, None, name, subresource.is_some(), |old| {
        let new = match &write {
            Write::Put(sent) => sent.clone(),
            Write::Patch(patch) => patch.apply(old)?,
        };
        Ok(match subresource {
            Some("approval") => csr::approval_update(old, &new),
            Some(_) => csr::status_update(old, &new),
            None => new,
        })
    })?;
    if subresource == Some("approval") {
        csr::sign_if_approved(store, &shared.certificates, name)?;
    }
    Ok(json_response(StatusCode::OK, &updated))
}

/// A PUT or PATCH body.
enum Write {
    Put(Value),
    Patch(Patch),
}

/// A TokenReview or SubjectAccessReview: answered (201), not stored.
async fn review(
    shared: &Shared,
    path: &str,
    headers: &HeaderMap,
    body: Received,
) -> Result<Response<Body>> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let object = decode_object(content_type, &read_body(body).await?)?;
    let answer = if path == reviews::TOKEN_REVIEWS {
        let signer = &shared.cluster.signer;
        reviews::token_review(&shared.store, signer, shared.token.as_deref(), object)?
    } else {
        reviews::subject_access_review(&shared.rules, object)?
    };
    Ok(json_response(StatusCode::CREATED, &answer))
}

async fn read_body(body: Received) -> Result<Bytes> {
    match Limited::new(body.body, MAX_BODY).collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            body.shared.traffic.received(&body.verb, &body.resource, bytes.len());
            Ok(bytes)
        }
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(Error::TooLarge),
        Err(e) => Err(Error::BadRequest(format!("cannot read the request body: {e}"))),
    }
}

/// A create or update body, by its content type.
fn decode_object(content_type: &str, body: &[u8]) -> Result<Value> {
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    let object: Value = match media_type {
        "" | "application/json" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| Error::BadRequest(format!("the request body is not valid JSON: {e}")))?,
        // One-line messages, as the API server's (no source snippet).
        "application/yaml" => serde_saphyr::from_slice_with_options(
            body,
            serde_saphyr::options! { with_snippet: false },
        )
        .map_err(|e| Error::BadRequest(format!("the request body is not valid YAML: {e}")))?,
        _ => return Err(Error::UnsupportedMediaType("application/json, application/yaml".into())),
    };
    if !object.is_object() {
        return Err(Error::BadRequest("the request body is not an object".into()));
    }
    Ok(object)
}

/// `DeleteOptions` from the body (when there is one), else from the query.
fn delete_options(body: &[u8], query: &[(String, String)]) -> Result<DeleteOptions> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|e| {
            Error::BadRequest(format!("the DeleteOptions body is not valid JSON: {e}"))
        })?
    };
    if body.get("dryRun").and_then(Value::as_array).is_some_and(|d| !d.is_empty()) {
        return Err(Error::BadRequest("dryRun is not supported by the test API server".into()));
    }
    let from_query = query.iter().find(|(k, _)| k == "gracePeriodSeconds").map(|(_, v)| v);
    let grace_period_seconds =
        match (body.get("gracePeriodSeconds"), from_query) {
            (Some(grace), _) if !grace.is_null() => Some(grace.as_i64().ok_or_else(|| {
                Error::BadRequest("gracePeriodSeconds must be an integer".into())
            })?),
            (_, Some(grace)) => Some(grace.parse().map_err(|_| {
                Error::BadRequest(format!("invalid gracePeriodSeconds: {grace:?}"))
            })?),
            _ => None,
        };
    let precondition = |field: &str| {
        body.get("preconditions")
            .and_then(|p| p.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeleteOptions {
        grace_period_seconds,
        uid: precondition("uid"),
        resource_version: precondition("resourceVersion"),
    })
}

fn with_json_type(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = with_json_type(Response::new(Full::new(Bytes::from(body)).boxed_unsync()));
    *response.status_mut() = status;
    response
}

fn error_response(error: &Error) -> Response<Body> {
    let status = StatusCode::from_u16(error.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error.status());
    if let Some(seconds) = error.retry_after() {
        response.headers_mut().insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

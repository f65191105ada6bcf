//! A test Kubernetes API server: an in-process stand-in for kube-apiserver that speaks
//! what kube-rs expects, for tests of the agent's API source and status sync.
//!
//! It serves core/v1 `pods` (and `pods/status`), `nodes` (and `nodes/status`),
//! `events`, `configmaps`, `secrets`, `serviceaccounts` (and their `token`
//! subresource, a `TokenRequest`), `services` (and `services/status`),
//! `persistentvolumeclaims` and the cluster-scoped `persistentvolumes` (each with
//! `/status`), `node.k8s.io/v1` `runtimeclasses`, `coordination.k8s.io/v1` `leases` and
//! `events.k8s.io/v1` `events` over HTTP or HTTPS on `127.0.0.1`, following the real
//! API's conventions: one global `resourceVersion`, list and watch with
//! resourceVersion semantics, bookmarks, 410 `Expired` for a resourceVersion older than
//! the kept history, field and label selectors (`metadata.name` on every resource, so
//! one object can be watched alone), `metav1.Status` errors (403, 404, 409
//! `AlreadyExists`/`Conflict`, 422, 415), merge, strategic merge and JSON patches,
//! graceful pod deletion and delete preconditions.
//!
//! It also plays the parts of the control plane that API pods need (module `cluster`): the
//! ServiceAccount admission plugin on pod create (a default service account, the
//! `kube-api-access-*` projected volume, the service account's pull secrets, and what
//! mirror pods may not refer to), the RuntimeClass one (module `runtime_class`: the
//! class's overhead and scheduling into the pod), the controllers' `default` ServiceAccount and
//! `kube-root-ca.crt` ConfigMap in every namespace (the CA of the server's TLS, or a
//! generated one), and service account tokens: ES256 JWTs with the real claims, bound
//! to pods, that [`TestApiServer::verify_token`] checks. A Secret's `stringData` is
//! merged into `data`, and immutable ConfigMaps and Secrets keep their data. Services
//! get cluster IPs, and the server keeps its own `kubernetes` Service in `default`
//! (module `services`). Requests are authenticated (module `authn`): the service
//! account tokens it issued are checked as the real authenticator checks them, and
//! `authentication.k8s.io/v1` `selfsubjectreviews` says who a request is. A kubelet's
//! reviews are served too (module `reviews`): `tokenreviews` of those tokens, and
//! `authorization.k8s.io/v1` `subjectaccessreviews` answered from RBAC-like rules a test
//! sets ([`TestApiServer::allow`]); the server has a kubelet-client certificate of its
//! own ([`TestApiServer::kubelet_client_identity`]). For joining nodes (module
//! `bootstrap`) it publishes `kube-public/cluster-info`, readable without credentials,
//! and signs it with bootstrap tokens as the bootstrap signer does
//! ([`TestApiServer::add_bootstrap_token`]).
//!
//! For joining and credentials (J1, J2): bootstrap tokens authenticate
//! (`kube-system/bootstrap-token-<id>` Secrets, [`TestApiServer::create_bootstrap_token`];
//! module `bootstrap_auth`), and so do client certificates the cluster CA signed, an
//! expired one being a 401 (module `signer`); `certificates.k8s.io/v1`
//! `certificatesigningrequests` are served with their `approval` and `status`
//! subresources, kube-controller-manager's approver of kubelet client certificates and
//! the cluster signer, whose certificates last a year or what
//! [`Config::signing_duration`] says (module `csr`). Serving requests wait for the test
//! ([`TestApiServer::approve_certificate_signing_request`],
//! [`TestApiServer::approve_serving_requests`]). Requests are also counted by user
//! ([`TestApiServer::requests_by_user`]).
//!
//! For every node identity (a client certificate `CN=system:node:<name>, O=system:nodes`,
//! or a token [`TestApiServer::node_kubeconfig`] maps to one) it runs what kube-apiserver
//! runs (K5): the Node authorizer with its graph and the `system:node` rules (module
//! `node_authorizer`) and the NodeRestriction admission plugin (module
//! `node_restriction`); what they refuse is a 403 with the real message, recorded
//! ([`TestApiServer::refusals`]), and fails the test when the server is dropped unless
//! the test took it. Every node request is also held against `deploy/rbac.yaml` (module
//! `rbac`). Other users are not authorized.
//!
//! Simplified, on purpose (each module's doc says more): JSON only (no protobuf, no
//! gzip); no defaulting beyond a new pod's `Pending` status and QoS class, the
//! ServiceAccount plugin's, a Secret's `type` and a Service's registry defaults; validation of names, pod containers,
//! config keys and immutability only; namespaces always exist; no `managedFields`;
//! server-side apply and `dryRun` are refused (415, 400) rather than served wrongly;
//! no `deletecollection`; core/v1 and events.k8s.io/v1 events are stored apart; tokens
//! bind to pods only. Test-only deviation: [`Config::min_token_expiration`] can lower
//! the shortest token lifetime (600 s on a real server) so tests see refreshes.
//!
//! The [`TestApiServer`] handle also lets a test act as the rest of the cluster: read
//! and write objects without HTTP, compact the history, cut and restore the network,
//! count requests (by verb and resource, object and user) and body bytes each way, make
//! requests fail (500, 429, 503), refuse every write for a while (a storm of 403s from
//! the Node authorizer, of 429s or of 503s, module `fault`), throttle past a rate as API
//! Priority and Fairness does (429 with `Retry-After`, module `flow`) and wait for
//! watches.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use outpost_tests::apiserver::TestApiServer;
//! let server = TestApiServer::start().await?;
//! let kubeconfig = server.kubeconfig(std::path::Path::new("/tmp/test"))?;
//! // … run the agent with --kubeconfig, then:
//! server.wait_for_watchers("pods", 1).await;
//! server.cut().await; // the network drops
//! server.restore().await?; // and comes back
//! # Ok(()) }
//! ```

mod admission;
mod audit;
mod authn;
mod bootstrap;
mod bootstrap_auth;
mod cluster;
mod csr;
mod discovery;
mod ephemeral;
mod error;
mod fault;
mod flow;
mod http;
mod list;
mod net;
mod node_authorizer;
mod node_restriction;
mod objects;
mod patch;
mod proxy;
mod rbac;
mod resize;
mod resource;
mod reviews;
mod runtime_class;
mod selector;
mod services;
mod signer;
mod store;
mod strategy;
mod tls;
mod token;
mod watch;

#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::json;

pub use audit::{Refusal, Transferred};
pub use bootstrap::{KUBEADM_NODE_TOKEN_GROUP, token_secret as bootstrap_token_secret};
pub use error::{Cause, Error as ApiError, GroupResource};
pub use fault::{Fault, STORM_REFUSAL};
pub use flow::Throttle;
pub use net::Connections;
pub use node_restriction::{KUBELET_LABEL_NAMESPACES, KUBELET_LABELS, node_may_set};
pub use patch::Patch;
pub use rbac::REQUESTS_ENV as NODE_REQUESTS_ENV;
pub use reviews::{Rule, Subject};
pub use tls::{KUBELET_CLIENT_GROUP, KUBELET_CLIENT_NAME, KubeletClientIdentity};
pub use token::{ISSUER, KubernetesClaims, ObjectRef, TokenClaims, TokenError};

use cluster::Cluster;
use http::Shared;
use net::Listener;
use store::Store;
use watch::Watchers;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot listen on {ip}:{port}: {source}")]
    Bind {
        ip: std::net::Ipv4Addr,
        port: u16,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Tls(#[from] tls::Error),
    #[error(transparent)]
    SigningKey(#[from] token::KeyError),
    #[error("cannot make the cluster signer: {0}")]
    Signer(String),
    #[error("cannot make a client configuration for the server: {0}")]
    Client(String),
}

/// The server's request counts, read from anywhere ([`TestApiServer::request_counts`]).
#[derive(Clone)]
pub struct RequestCounts(Arc<Shared>);

impl std::fmt::Debug for RequestCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestCounts").finish_non_exhaustive()
    }
}

impl RequestCounts {
    /// As [`TestApiServer::requests`].
    pub fn requests(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.0.audit.snapshot()
    }
}

/// How to start a [`TestApiServer`]; [`TestApiServer::builder`] makes one.
#[derive(Debug, Clone)]
pub struct Config {
    tls: bool,
    token: Option<String>,
    bookmark_interval: Duration,
    history_limit: usize,
    place: net::Place,
    port: u16,
    down: bool,
    min_token_expiration: Duration,
    signing_duration: Duration,
    throttle: Option<Throttle>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tls: false,
            token: None,
            bookmark_interval: Duration::from_secs(1),
            history_limit: 1000,
            place: net::Place::default(),
            port: 0,
            down: false,
            min_token_expiration: Duration::from_secs(600),
            signing_duration: signer::DEFAULT_DURATION,
            throttle: None,
        }
    }
}

impl Config {
    /// Serve HTTPS with a certificate from a freshly made CA ([`TestApiServer::ca_pem`]).
    pub fn tls(mut self) -> Config {
        self.tls = true;
        self
    }

    /// Require `Authorization: Bearer <token>` on every request (401 otherwise).
    pub fn token(mut self, token: &str) -> Config {
        self.token = Some(token.to_string());
        self
    }

    /// How often watches that allow bookmarks get one (default 1 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Config {
        self.bookmark_interval = interval;
        self
    }

    /// How many write events are kept for watches and reads at older
    /// resourceVersions (default 1000); older resourceVersions get 410.
    pub fn history_limit(mut self, events: usize) -> Config {
        self.history_limit = events;
        self
    }

    /// Listen on this port (default: any free port).
    pub fn port(mut self, port: u16) -> Config {
        self.port = port;
        self
    }

    /// Listen on `ip` inside the network namespace `netns` (`/run/netns/NAME`) instead
    /// of on `127.0.0.1`: the test reaches it over a link of its own, and can take that
    /// link down.
    pub fn listen_in(mut self, netns: &Path, ip: std::net::Ipv4Addr) -> Config {
        self.place = net::Place { ip, netns: Some(netns.to_owned()) };
        self
    }

    /// Start with the network cut: the port is chosen, but connects are refused until
    /// [`TestApiServer::restore`].
    pub fn down(mut self) -> Config {
        self.down = true;
        self
    }

    /// The shortest lifetime (`expirationSeconds`) a TokenRequest may ask for (default
    /// 600 s, as on the real server). A test-only deviation: shorter lifetimes let
    /// tests see tokens refreshed.
    pub fn min_token_expiration(mut self, lifetime: Duration) -> Config {
        self.min_token_expiration = lifetime;
        self
    }

    /// How long the certificates the cluster signer issues last
    /// (`--cluster-signing-duration`, default a year). A test-only deviation below
    /// 600 s: no floor on `expirationSeconds`, no backdating (module `signer`), so that
    /// a test sees certificates renewed.
    pub fn signing_duration(mut self, duration: Duration) -> Config {
        self.signing_duration = duration;
        self
    }

    /// Throttles as API Priority and Fairness does past a rate (module `flow`): a
    /// request past it gets 429 `TooManyRequests` with `Retry-After`
    /// ([`TestApiServer::set_throttle`] changes it while the server runs).
    pub fn throttle(mut self, throttle: Throttle) -> Config {
        self.throttle = Some(throttle);
        self
    }

    /// Starts the server.
    pub async fn start(self) -> Result<TestApiServer, Error> {
        let mut material = if self.tls { Some(tls::generate()?) } else { None };
        let (root_ca, issuer) = match material.as_mut() {
            Some(material) => {
                let issuer = std::mem::replace(&mut material.issuer, tls::ca_only()?.1);
                (material.ca_pem.clone(), issuer)
            }
            None => tls::ca_only()?,
        };
        let certificates = signer::CertificateSigner::new(issuer, &root_ca, self.signing_duration)
            .map_err(Error::Signer)?;
        let kubelet_client = tls::kubelet_client()?;
        let store = Arc::new(Store::new(self.history_limit));
        bootstrap::spawn_signer(&store);
        let min_token_expiration =
            i64::try_from(self.min_token_expiration.as_secs()).unwrap_or(i64::MAX);
        let cluster =
            Cluster::new(store.clone(), token::Signer::generate()?, root_ca, min_token_expiration);
        let shared = Arc::new(Shared {
            store,
            cluster,
            watchers: Arc::new(Watchers::default()),
            audit: audit::Audit::default(),
            traffic: audit::Traffic::default(),
            flow: flow::FlowControl::default(),
            faults: fault::Faults::default(),
            token: self.token.clone(),
            bookmark_interval: self.bookmark_interval,
            rules: reviews::Rules::default(),
            kubelet_client: tls::kubelet_client_config(&kubelet_client)?,
            certificates,
            users: audit::Audit::default(),
            approve_serving: std::sync::atomic::AtomicBool::new(false),
            refusals: audit::Refusals::default(),
            node_requests: rbac::NodeRequests::default(),
            node_tokens: std::sync::Mutex::default(),
        });
        let acceptor =
            material.as_ref().map(|m| tokio_rustls::TlsAcceptor::from(m.server_config.clone()));
        let listener =
            Listener::bind(self.place.clone(), self.port, acceptor, shared.clone(), self.down)
                .await
                .map_err(|source| Error::Bind { ip: self.place.ip, port: self.port, source })?;
        shared.flow.set(self.throttle);
        shared.cluster.ensure_master_service(listener.addr());
        Ok(TestApiServer {
            shared,
            listener,
            ca_pem: material.map(|m| m.ca_pem),
            token: self.token,
            kubelet_client,
        })
    }
}

/// A running test API server. Dropping it stops it, and fails the test if a node was
/// refused a request the test did not take ([`TestApiServer::take_refusals`]).
#[derive(Debug)]
pub struct TestApiServer {
    shared: Arc<Shared>,
    listener: Listener,
    ca_pem: Option<String>,
    token: Option<String>,
    kubelet_client: KubeletClientIdentity,
}

impl TestApiServer {
    /// A [`Config`] to start a server with non-default settings.
    pub fn builder() -> Config {
        Config::default()
    }

    /// Plain HTTP on `127.0.0.1`, any free port.
    pub async fn start() -> Result<TestApiServer, Error> {
        Config::default().start().await
    }

    /// HTTPS with a generated CA (see [`TestApiServer::ca_pem`]).
    pub async fn start_tls() -> Result<TestApiServer, Error> {
        Config::default().tls().start().await
    }

    /// Plain HTTP that requires this bearer token.
    pub async fn start_with_token(token: &str) -> Result<TestApiServer, Error> {
        Config::default().token(token).start().await
    }

    /// Plain HTTP, but down until [`TestApiServer::restore`].
    pub async fn start_down() -> Result<TestApiServer, Error> {
        Config::default().down().start().await
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.listener.addr()
    }

    /// `http://IP:PORT` or `https://IP:PORT` (`127.0.0.1` unless listening elsewhere).
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr())
    }

    /// The CA certificate (PEM) that signed the server's certificate, when TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Writes `DIR/kubeconfig` for this server (cluster, user with the token if any,
    /// context `outpost-test` as current context, namespace `default`) and returns its
    /// path.
    pub fn kubeconfig(&self, dir: &Path) -> io::Result<PathBuf> {
        let user = match &self.token {
            Some(token) => json!({ "token": token }),
            None => json!({}),
        };
        self.kubeconfig_for_user(dir, "kubeconfig", user)
    }

    /// A kube client configuration for this server as [`TestApiServer::kubeconfig`]
    /// writes it (its CA when it serves HTTPS, its token if it has one), with kube's
    /// retries off, for clients built in the test's process.
    pub fn client_config(&self) -> Result<kube::Config, Error> {
        let url = self.url();
        let uri = url.parse().map_err(|e| Error::Client(format!("{url}: {e}")))?;
        let mut config = kube::Config::new(uri);
        config.default_retry = false;
        if let Some(ca) = &self.ca_pem {
            use rustls::pki_types::pem::PemObject;
            let der = rustls::pki_types::CertificateDer::from_pem_slice(ca.as_bytes())
                .map_err(|e| Error::Client(format!("the server's CA: {e}")))?;
            config.root_cert = Some(vec![der.to_vec()]);
        }
        if let Some(token) = &self.token {
            config.auth_info.token = Some(token.clone().into());
        }
        Ok(config)
    }

    /// Writes `DIR/NAME`, a kubeconfig for this server as [`TestApiServer::kubeconfig`]
    /// but with `user` as its user (a kubeconfig `AuthInfo`: `{"token": …}`,
    /// `{"client-certificate-data": …, "client-key-data": …}`), and returns its path.
    /// A bootstrap kubeconfig is one with a bootstrap token
    /// ([`TestApiServer::create_bootstrap_token`]).
    pub fn kubeconfig_for_user(
        &self,
        dir: &Path,
        name: &str,
        user: serde_json::Value,
    ) -> io::Result<PathBuf> {
        let mut cluster = json!({ "server": self.url() });
        if let Some(ca) = &self.ca_pem {
            cluster["certificate-authority-data"] = json!(BASE64.encode(ca));
        }
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "outpost-test", "cluster": cluster }],
            "users": [{ "name": "outpost-test", "user": user }],
            "contexts": [{
                "name": "outpost-test",
                "context": { "cluster": "outpost-test", "user": "outpost-test", "namespace": "default" },
            }],
            "current-context": "outpost-test",
            "preferences": {},
        });
        let text = serde_saphyr::to_string(&config).map_err(io::Error::other)?;
        std::fs::create_dir_all(dir)?;
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Writes `DIR/node-kubeconfig`, a kubeconfig whose bearer token authenticates as the
    /// node `node` (`system:node:<node>` in `system:nodes`, as a client certificate the
    /// cluster CA signed would), and returns its path. Everything it asks passes the Node
    /// authorizer and NodeRestriction, as on a real cluster; what they refuse is kept
    /// ([`TestApiServer::refusals`]).
    pub fn node_kubeconfig(&self, dir: &Path, node: &str) -> io::Result<PathBuf> {
        let token = format!("node-{node}-{:016x}", fastrand::u64(..));
        let mut tokens =
            self.shared.node_tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tokens.insert(token.clone(), node.to_owned());
        drop(tokens);
        self.kubeconfig_for_user(dir, "node-kubeconfig", json!({ "token": token }))
    }

    /// What the Node authorizer and NodeRestriction refused a node so far.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.shared.refusals.snapshot()
    }

    /// [`TestApiServer::refusals`], forgetting them: a test that expects refusals takes
    /// and checks them.
    pub fn take_refusals(&self) -> Vec<Refusal> {
        self.shared.refusals.take()
    }

    /// Panics, listing them, if a node was refused anything the test did not take (also
    /// when the server is dropped, unless the thread already panics).
    pub fn assert_no_refusals(&self) {
        let refusals = self.refusals();
        let listed: Vec<String> = refusals.iter().map(ToString::to_string).collect();
        assert!(
            refusals.is_empty(),
            "the Node authorizer or NodeRestriction refused the node {} request(s) (a real \
             cluster refuses them too):\n{}",
            refusals.len(),
            listed.join("\n")
        );
    }

    /// Whether a node of this server asked `verb` on `resource` (`group`: `""` for the
    /// core group).
    pub fn node_asked(&self, verb: &str, group: &str, resource: &str) -> bool {
        self.shared.node_requests.asked(verb, group, resource)
    }

    /// Panics, listing them, if a node asked anything `deploy/rbac.yaml` does not grant
    /// (what a cluster without the Node authorizer would refuse); also when the server is
    /// dropped, unless the thread already panics.
    pub fn assert_node_requests_in_rbac(&self) {
        let outside = self.shared.node_requests.outside_rbac();
        assert!(
            outside.is_empty(),
            "deploy/rbac.yaml does not grant what the node asked: {outside:#?}"
        );
    }

    /// How this server authenticates to kubelets: its kubelet-client certificate and key,
    /// and the CA a node trusts them with (`--client-ca-file`). The certificate's group
    /// ([`KUBELET_CLIENT_GROUP`]) may do everything in SubjectAccessReviews.
    pub fn kubelet_client_identity(&self) -> &KubeletClientIdentity {
        &self.kubelet_client
    }

    /// Adds an RBAC-like grant that SubjectAccessReviews are answered from, e.g.
    /// `Rule::user("system:serviceaccount:default:reader", "get", "nodes/pods")`.
    pub fn allow(&self, rule: Rule) {
        self.shared.rules.add(rule);
    }

    /// Drops every grant [`TestApiServer::allow`] added.
    pub fn clear_rules(&self) {
        self.shared.rules.clear();
    }

    /// Cuts the network: open connections (watches included) are aborted without a
    /// clean end, and new connects are refused until [`TestApiServer::restore`].
    pub async fn cut(&self) {
        self.listener.cut().await;
    }

    /// Serves again on the same port after [`TestApiServer::cut`] (or a down start).
    pub async fn restore(&self) -> io::Result<()> {
        self.listener.restore().await
    }

    /// The connections open now (by the protocol the client chose at the TLS
    /// handshake: HTTP/2 or HTTP/1.1) and accepted since the start.
    pub fn connections(&self) -> Connections {
        self.listener.connections()
    }

    /// Whether the server accepts connections.
    pub fn is_up(&self) -> bool {
        self.listener.is_up()
    }

    /// Drops the whole watch history: every older resourceVersion now gets 410.
    pub fn compact(&self) {
        self.shared.store.compact();
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.resource_version()
    }

    /// All requests received.
    pub fn total_requests(&self) -> u64 {
        self.shared.audit.total()
    }

    /// Requests by (verb, resource): verbs as the audit log names them (`get`, `list`,
    /// `watch`, `create`, `update`, `patch`, `delete`), resources as `pods`,
    /// `pods/status` or `serviceaccounts/token` (a TokenRequest is a `create`); other
    /// paths under their HTTP method and path.
    pub fn requests(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.shared.audit.snapshot()
    }

    /// A handle on [`TestApiServer::requests`] that a task of its own can hold: a
    /// counter that must tick on time while the test's own task is busy.
    pub fn request_counts(&self) -> RequestCounts {
        RequestCounts(self.shared.clone())
    }

    /// Requests with `verb` on `resource` (`pods` excludes `pods/status`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.shared.audit.count(verb, resource)
    }

    /// Requests with `verb` on `resource` of the object `namespace/name` (`name` for
    /// cluster-scoped objects), e.g. `count_object("patch", "pods/status", "default/web")`.
    pub fn count_object(&self, verb: &str, resource: &str, object: &str) -> u64 {
        self.shared.audit.count_object(verb, resource, object)
    }

    /// Body bytes received and sent by (verb, resource), keyed as
    /// [`TestApiServer::requests`] (headers not counted; a watch's events as they are
    /// sent; requests proxied to nodes not counted).
    pub fn bytes(&self) -> std::collections::BTreeMap<(String, String), Transferred> {
        self.shared.traffic.snapshot()
    }

    /// Body bytes received and sent over every request.
    pub fn total_bytes(&self) -> Transferred {
        self.shared.traffic.total()
    }

    /// Forgets the request counts (by request, object and user), the bytes and the
    /// count of throttled requests.
    pub fn reset_requests(&self) {
        self.shared.audit.reset();
        self.shared.users.reset();
        self.shared.traffic.reset();
        self.shared.flow.reset();
    }

    /// Throttles from now on at `throttle` (a full burst first), or stops throttling
    /// (`None`); see [`Config::throttle`].
    pub fn set_throttle(&self, throttle: Option<Throttle>) {
        self.shared.flow.set(throttle);
    }

    /// The rate the server throttles at, if it does.
    pub fn throttle(&self) -> Option<Throttle> {
        self.shared.flow.throttle()
    }

    /// Requests refused with 429 by the throttle (injected faults not included).
    pub fn throttled_requests(&self) -> u64 {
        self.shared.flow.rejected()
    }

    /// Makes the next `count` requests with `verb` on `resource` (named as in
    /// [`TestApiServer::count`]: `patch` on `pods/status`) fail with `fault`, after they
    /// are counted. Arming again for the same request queues behind what is armed.
    pub fn fail_next(&self, count: u64, verb: &str, resource: &str, fault: Fault) {
        self.shared.faults.arm(count, verb, resource, fault);
    }

    /// Fails every write with `fault` until called with `None` (or
    /// [`TestApiServer::clear_faults`]): a storm of 403s from the Node authorizer
    /// ([`Fault::forbidden`]), of 429s or of 503s. Reads pass.
    pub fn storm(&self, fault: Option<Fault>) {
        self.shared.faults.storm(fault);
    }

    /// Injected failures armed and not yet used.
    pub fn faults_remaining(&self) -> u64 {
        self.shared.faults.remaining()
    }

    /// Disarms every injected failure not yet used.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Open watches on `resource` (its plural: `pods`, `leases`).
    pub fn watchers(&self, resource: &str) -> usize {
        self.shared.watchers.count(resource)
    }

    /// Open watches by resource (its plural), e.g. to count a fleet's watches per node.
    pub fn all_watchers(&self) -> std::collections::BTreeMap<String, usize> {
        self.shared.watchers.all()
    }

    /// Waits until at least `n` watches on `resource` are open (wrap it in a timeout).
    pub async fn wait_for_watchers(&self, resource: &str, n: usize) {
        self.shared.watchers.wait_for(resource, n).await;
    }

    /// Creates a bootstrap token (`kube-system/bootstrap-token-<id>`, as `kubeadm token
    /// create` does, in kubeadm's extra group) that expires after `ttl` if given, and
    /// returns it as `ID.SECRET`.
    pub fn create_bootstrap_token(&self, ttl: Option<Duration>) -> Result<String, ApiError> {
        let (id, secret) = bootstrap_auth::generate();
        let expiration = ttl.map(|ttl| {
            let seconds = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
            strategy::seconds_from_now(seconds)
        });
        let object = bootstrap_auth::secret(&id, &secret, expiration.as_deref());
        self.shared.cluster.create(&resource::SECRETS, Some("kube-system"), object)?;
        Ok(format!("{id}.{secret}"))
    }

    /// Approves the CertificateSigningRequest `name` (as `kubectl certificate approve`),
    /// and the signer issues its certificate.
    pub fn approve_certificate_signing_request(&self, name: &str) -> Result<(), ApiError> {
        let message = "This CSR was approved by the test.";
        csr::approve(&self.shared.store, name, "TestApprove", message)?;
        csr::sign_if_approved(&self.shared.store, &self.shared.certificates, name)
    }

    /// Whether every `kubernetes.io/kubelet-serving` request is approved as it is
    /// created, as by a cluster's administrator (the test) who trusts every node.
    pub fn approve_serving_requests(&self, approve: bool) {
        self.shared.approve_serving.store(approve, std::sync::atomic::Ordering::Relaxed);
    }

    /// Requests by user name (`system:node:edge-1`, `system:bootstrap:abcdef`), counted
    /// once authenticated.
    pub fn requests_by_user(&self) -> std::collections::BTreeMap<(String, String), u64> {
        self.shared.users.snapshot()
    }

    /// Requests `user` made.
    pub fn user_requests(&self, user: &str) -> u64 {
        self.shared.users.snapshot().iter().filter(|((_, u), _)| u == user).map(|(_, n)| n).sum()
    }

    /// The claims of a service account token this server issued, if its signature is
    /// the server's, its issuer is [`ISSUER`] and it is valid now.
    pub fn verify_token(&self, token: &str) -> Result<TokenClaims, TokenError> {
        self.shared.cluster.signer.verify(token)
    }

    /// The claims of a service account token this server issued (its signature and
    /// issuer checked), expired or not: to compare an old token with its refresh.
    pub fn decode_token(&self, token: &str) -> Result<TokenClaims, TokenError> {
        self.shared.cluster.signer.decode(token)
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.assert_no_refusals();
            self.assert_node_requests_in_rbac();
            return;
        }
        // The test failed already: what was refused may be why.
        for refusal in self.refusals() {
            eprintln!("refused: {refusal}");
        }
    }
}

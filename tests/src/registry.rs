#![allow(clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking
//! A loopback image registry for the pull tests: Debian's `docker-registry`
//! (distribution 2.8) on 127.0.0.1 and a free port, storing into a temporary directory,
//! optionally behind htpasswd basic auth (`htpasswd -B` from apache2-utils); images are
//! pushed into it with `skopeo`. Stopped when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary of Debian's `docker-registry` package.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// How long the registry may take to answer after starting (a hang detector).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running registry.
#[derive(Debug)]
pub struct Registry {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    user: Option<(String, String)>,
}

impl Registry {
    /// Starts an anonymous registry; panics (see [`crate::prerequisite`]) when the
    /// registry, skopeo or htpasswd is missing (tests using it carry `outpost_has_registry`).
    pub fn start() -> Registry {
        Registry::start_with(None)
    }

    /// Starts a registry that wants `user`'s password (basic auth).
    pub fn start_with_auth(user: &str, password: &str) -> Registry {
        Registry::start_with(Some((user.to_owned(), password.to_owned())))
    }

    fn start_with(user: Option<(String, String)>) -> Registry {
        let tools = [REGISTRY_BIN, "/usr/bin/skopeo", "/usr/bin/htpasswd"];
        let ok = tools.iter().all(|tool| Path::new(tool).is_file());
        crate::prerequisite(ok, "docker-registry, skopeo and apache2-utils (`cargo xtask deps`)");
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("storage").display()
        );
        if let Some((name, password)) = &user {
            let out = Command::new("htpasswd").args(["-Bbn", name, password]).output().unwrap();
            assert!(out.status.success(), "htpasswd: {}", String::from_utf8_lossy(&out.stderr));
            let htpasswd = dir.path().join("htpasswd");
            std::fs::write(&htpasswd, &out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: outpost-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let registry = Registry { child, dir, port, user };
        registry.wait_until_up();
        registry
    }

    /// `127.0.0.1:PORT`: the registry part of image references.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry keeps its blobs (`.../blobs/sha256/<2 hex>/<hex>/data`).
    pub fn blob_data(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Pushes an OCI image-layout tarball as `repository:tag` (with the registry's
    /// credentials); `docker_format` converts the manifest to docker v2 schema 2.
    pub fn push(&self, oci_tarball: &Path, repository_tag: &str, docker_format: bool) {
        let mut skopeo = Command::new("skopeo");
        skopeo.args(["copy", "--quiet", "--dest-tls-verify=false"]);
        if docker_format {
            skopeo.args(["--format", "v2s2"]);
        }
        if let Some((name, password)) = &self.user {
            skopeo.arg(format!("--dest-creds={name}:{password}"));
        }
        let out = skopeo
            .arg(format!("oci-archive:{}", oci_tarball.display()))
            .arg(format!("docker://{}/{repository_tag}", self.host()))
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo copy: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                let request = "GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
                let mut answer = String::new();
                if stream.write_all(request.as_bytes()).is_ok()
                    && stream.read_to_string(&mut answer).is_ok()
                    && answer.starts_with("HTTP/1.1 ")
                {
                    return;
                }
            }
            let log = std::fs::read_to_string(self.dir.path().join("registry.log"));
            assert!(Instant::now() < deadline, "the registry did not start: {log:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nobody listens on now (the kernel's pick for an ephemeral bind).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

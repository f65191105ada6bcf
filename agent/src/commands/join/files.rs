//! What a join writes, kubelet's and kubeadm's layout beside the agent's config: the
//! bootstrap kubeconfig (`bootstrap-kubelet.conf`: the cluster's server and CA, the token
//! as user; mode 0600), and the agent's config with `bootstrapKubeconfig`, `kubeconfig`
//! (`kubelet.conf`, which TLS bootstrapping writes) and `nodeName` set. The config keeps
//! its comments and other settings: those keys' lines are replaced, put below their
//! commented-out examples, or added at the end.

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use outpost_core::bootstrap_token::Token;
use serde_json::json;

use super::{Discovered, Error};

/// The bootstrap kubeconfig's file name (kubeadm's `/etc/kubernetes/bootstrap-kubelet.conf`).
pub const BOOTSTRAP_KUBECONFIG: &str = "bootstrap-kubelet.conf";
/// The kubeconfig TLS bootstrapping writes (kubeadm's `/etc/kubernetes/kubelet.conf`).
pub const KUBECONFIG: &str = "kubelet.conf";
/// The mode of files with credentials.
const PRIVATE: u32 = 0o600;
/// The mode of a new agent config (it holds no credentials).
const PUBLIC: u32 = 0o644;

/// Where a join writes.
#[derive(Debug, Clone)]
pub struct Layout {
    config: PathBuf,
    dir: PathBuf,
}

impl Layout {
    /// The files beside `config`, or in `kubeconfig_dir`; paths made absolute (the agent
    /// reads them from anywhere).
    pub fn new(config: &Path, kubeconfig_dir: Option<&Path>) -> Layout {
        let config = std::path::absolute(config).unwrap_or_else(|_| config.to_owned());
        let dir = match kubeconfig_dir {
            Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()),
            None => config.parent().map_or_else(|| PathBuf::from("/"), Path::to_owned),
        };
        Layout { config, dir }
    }

    pub fn bootstrap_kubeconfig(&self) -> PathBuf {
        self.dir.join(BOOTSTRAP_KUBECONFIG)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join(KUBECONFIG)
    }

    /// A node with a kubeconfig of its own has joined: joining again would leave it.
    pub fn check_not_joined(&self) -> Result<(), Error> {
        let kubeconfig = self.kubeconfig();
        if kubeconfig.exists() { Err(Error::Joined(kubeconfig)) } else { Ok(()) }
    }

    /// Writes the bootstrap kubeconfig, then the config; returns their paths.
    pub fn write(
        &self,
        info: &Discovered,
        token: &Token,
        node_name: Option<&str>,
    ) -> Result<Vec<PathBuf>, Error> {
        let bootstrap = self.bootstrap_kubeconfig();
        write_file(&bootstrap, bootstrap_kubeconfig(info, token).as_bytes(), PRIVATE)?;
        let existing = match fs::read_to_string(&self.config) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(Error::ReadConfig { path: self.config.clone(), source }),
        };
        let mode = fs::metadata(&self.config).map_or(PUBLIC, |m| m.permissions().mode() & 0o7777);
        let mut settings = vec![
            ("bootstrapKubeconfig", bootstrap.display().to_string()),
            ("kubeconfig", self.kubeconfig().display().to_string()),
        ];
        if let Some(name) = node_name {
            settings.push(("nodeName", name.to_owned()));
        }
        let text = edit_config(existing.as_deref().unwrap_or(NEW_CONFIG), &settings);
        write_file(&self.config, text.as_bytes(), mode)?;
        Ok(vec![bootstrap, self.config.clone()])
    }
}

/// The start of a config `outpost join` makes.
const NEW_CONFIG: &str =
    "# Outpost's config, written by `outpost join` (see deploy/outpost.yaml for every setting).\n";

/// The bootstrap kubeconfig: kubeadm's names (cluster `kubernetes`, user
/// `tls-bootstrap-token-user`), the CA embedded, the token as bearer token.
pub fn bootstrap_kubeconfig(info: &Discovered, token: &Token) -> String {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kubernetes",
            "cluster": {
                "server": info.server,
                "certificate-authority-data":
                    base64::engine::general_purpose::STANDARD.encode(&info.ca_pem),
            },
        }],
        "users": [{ "name": "tls-bootstrap-token-user", "user": { "token": token.bearer() } }],
        "contexts": [{
            "name": "tls-bootstrap-token-user@kubernetes",
            "context": { "cluster": "kubernetes", "user": "tls-bootstrap-token-user" },
        }],
        "current-context": "tls-bootstrap-token-user@kubernetes",
        "preferences": {},
    });
    // Only strings and maps: nothing that cannot be written as YAML.
    serde_saphyr::to_string(&config).unwrap_or_default()
}

/// `config` (YAML) with the top-level `settings` set, as double-quoted scalars: a line
/// `key: …` is replaced; else the value goes below a commented-out `# key: …`; else at
/// the end. Everything else is kept as it is.
pub fn edit_config(config: &str, settings: &[(&str, String)]) -> String {
    let mut lines: Vec<String> = config.lines().map(str::to_owned).collect();
    for (key, value) in settings {
        let line = format!("{key}: {}", serde_json::Value::from(value.as_str()));
        let set = |l: &str| l.strip_prefix(key).is_some_and(|rest| rest.starts_with(':'));
        let commented = |l: &str| {
            l.strip_prefix('#')
                .map(str::trim_start)
                .and_then(|l| l.strip_prefix(key))
                .is_some_and(|rest| rest.starts_with(':'))
        };
        if let Some(at) = lines.iter().position(|l| set(l)) {
            lines[at] = line;
        } else if let Some(at) = lines.iter().position(|l| commented(l)) {
            lines.insert(at + 1, line);
        } else {
            lines.push(line);
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// Writes `path` whole (a temporary file renamed over it) with `mode`.
fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    let write = || -> io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("/"));
        fs::create_dir_all(dir)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.tmp"));
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp)?;
        // The umask may have taken bits away; the mode is what was asked.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    };
    write().map_err(|source| Error::Write { path: path.to_owned(), source })
}

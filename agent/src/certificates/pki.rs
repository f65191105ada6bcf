//! kubelet's PKI directory, `<state-dir>/pki`: each certificate the node gets is written
//! with its private key to `kubelet-<kind>-<YYYY-MM-DD-HH-MM-SS>.pem` (mode 0600, the
//! key never leaves the node), and the link `kubelet-<kind>-current.pem` is moved to it
//! at once (a new link renamed over the old one). Older files stay, as kubelet's do.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use outpost_core::certificates::{current_link_name, pem_file_name};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::Error;

/// A certificate with its key, as the PKI directory holds it.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The file (the link's target, or where it was written).
    pub path: PathBuf,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// Its subject's common name.
    pub common_name: String,
}

/// The PKI directory.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn new(state_dir: &Path) -> Pki {
        Pki { dir: state_dir.join("pki") }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `kubelet-<kind>-current.pem`.
    pub fn current_path(&self, kind: &str) -> PathBuf {
        self.dir.join(current_link_name(kind))
    }

    /// The current certificate of `kind`, if its link points at a readable pair.
    pub fn current(&self, kind: &str) -> Result<Option<Pair>, Error> {
        let link = self.current_path(kind);
        let text = match std::fs::read(&link) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Read { path: link, source }),
        };
        let path = std::fs::canonicalize(&link).unwrap_or(link);
        parse(&text, &path).map(Some)
    }

    /// Writes `cert_pem` and `key_pem` to a new file (0600) and points the link at it.
    pub fn store(&self, kind: &str, cert_pem: &str, key_pem: &str) -> Result<Pair, Error> {
        let write =
            |path: &Path, source: std::io::Error| Error::Write { path: path.into(), source };
        std::fs::create_dir_all(&self.dir).map_err(|e| write(&self.dir, e))?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| write(&self.dir, e))?;
        let text = format!("{}\n{}", cert_pem.trim_end(), key_pem);
        // Clock: the local wall clock names the file (kubelet's layout); the link says which is current.
        let mut name = pem_file_name(kind, SystemTime::now());
        let mut path = self.dir.join(&name);
        // Two certificates in one second (a test's short lifetimes): a suffix.
        let mut n = 1;
        while path.exists() {
            name = format!(
                "{}-{n}.pem",
                pem_file_name(kind, SystemTime::now()).trim_end_matches(".pem")
            );
            path = self.dir.join(&name);
            n += 1;
        }
        let pair = parse(text.as_bytes(), &path)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| write(&path, e))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| write(&path, e))?;
        let link = self.current_path(kind);
        let staged = self.dir.join(format!(".{}.new", current_link_name(kind)));
        let _ = std::fs::remove_file(&staged);
        std::os::unix::fs::symlink(&name, &staged).map_err(|e| write(&staged, e))?;
        std::fs::rename(&staged, &link).map_err(|e| write(&link, e))?;
        Ok(pair)
    }
}

/// The certificate (the first) of a PEM file that also holds its key.
pub fn parse(text: &[u8], path: &Path) -> Result<Pair, Error> {
    let invalid = |reason: String| Error::Invalid { path: path.into(), reason };
    let cert = CertificateDer::from_pem_slice(text)
        .map_err(|e| invalid(format!("no PEM certificate: {e}")))?;
    PrivateKeyDer::from_pem_slice(text).map_err(|e| invalid(format!("no PEM private key: {e}")))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&cert)
        .map_err(|e| invalid(format!("not an X.509 certificate: {e}")))?;
    let time = |t: x509_parser::time::ASN1Time| {
        let seconds = u64::try_from(t.timestamp()).unwrap_or(0);
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds)
    };
    let validity = parsed.validity();
    let common_name = parsed
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok(Pair {
        path: path.into(),
        not_before: time(validity.not_before),
        not_after: time(validity.not_after),
        common_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn pair(cn: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// J1: kubelet's layout: a 0600 file per certificate, the current link moved.
    #[test]
    fn j1_store_writes_a_private_file_and_moves_the_link() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path());
        assert!(pki.current("client").unwrap().is_none());
        let (cert, key) = pair("system:node:a");
        let first = pki.store("client", &cert, &key).unwrap();
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let name = first.path.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.starts_with("kubelet-client-20") && name.ends_with(".pem"), "{name}");
        let current = pki.current("client").unwrap().unwrap();
        assert_eq!(current.common_name, "system:node:a");
        let (cert, key) = pair("system:node:b");
        let second = pki.store("client", &cert, &key).unwrap();
        assert_ne!(first.path, second.path);
        assert!(first.path.exists());
        assert_eq!(pki.current("client").unwrap().unwrap().common_name, "system:node:b");
        let link = std::fs::read_link(pki.current_path("client")).unwrap();
        assert_eq!(link, Path::new(second.path.file_name().unwrap()));
    }
}

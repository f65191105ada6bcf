//! The state key (V3): what seals the checkpoints that hold Secrets, so that a stolen
//! disk (an SD card pulled from a box in a field cabinet) does not give them away.
//!
//! The key comes from systemd's credentials (`LoadCredentialEncrypted=outpost.state-key`,
//! sealed by `systemd-creds` to the TPM2 where the board has one, else to the host key),
//! read from `$CREDENTIALS_DIRECTORY/outpost.state-key`, or from a file given with
//! `--state-key-file`. Its bytes (at least 32, random) are not used as they are: HKDF-SHA256
//! derives the sealing key and a short public id from them, so that a checkpoint sealed
//! with another key is told apart from a corrupt one.
//!
//! Sealing is ChaCha20-Poly1305 from `ring`, the crypto crate the TLS stack already
//! links: fast in software on boards without AES instructions (a Raspberry Pi 4's
//! Cortex CPU has none). Each write takes a fresh random 96-bit nonce, and the checkpoint's
//! name is the associated data, so a sealed file cannot be passed off as another one.

use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, KeyType, Salt};
use ring::rand::{SecureRandom as _, SystemRandom};

/// The systemd credential's name (`LoadCredentialEncrypted=outpost.state-key:...`).
pub const CREDENTIAL: &str = "outpost.state-key";
/// The fewest bytes a state key may have.
pub const MIN_LEN: usize = 32;
/// The cipher's name, as the sealed checkpoint's header gives it.
pub const CIPHER: &str = "chacha20-poly1305";

/// HKDF's labels: one derivation for the sealing key, another for the public id.
const SEALING: &[u8] = b"outpost state key: checkpoint sealing v1";
const IDENTITY: &[u8] = b"outpost state key: public id v1";
/// The id's length in bytes (shown as hex).
const ID_LEN: usize = 8;

/// Where the state key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--state-key-file`.
    File(PathBuf),
    /// systemd's credential: `$CREDENTIALS_DIRECTORY/outpost.state-key`.
    Credential(PathBuf),
}

impl Source {
    /// The key `flag` names, else the systemd credential when `credentials_directory`
    /// (`$CREDENTIALS_DIRECTORY`) holds one.
    pub fn find(flag: Option<PathBuf>, credentials_directory: Option<&Path>) -> Option<Source> {
        if let Some(path) = flag {
            return Some(Source::File(path));
        }
        let credential = credentials_directory?.join(CREDENTIAL);
        credential.exists().then_some(Source::Credential(credential))
    }

    pub fn path(&self) -> &Path {
        match self {
            Source::File(path) | Source::Credential(path) => path,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(path) => write!(f, "the key file {}", path.display()),
            Source::Credential(path) => {
                write!(f, "the systemd credential {CREDENTIAL} ({})", path.display())
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the state key, {source_}: {error}")]
    Read {
        source_: Source,
        #[source]
        error: io::Error,
    },
    #[error(
        "the state key, {source_}, has {len} bytes; it needs at least {MIN_LEN} random bytes (make one with `head -c 32 /dev/urandom > FILE`)"
    )]
    Short { source_: Source, len: usize },
    #[error(
        "the state key, {source_}, can be read by group or others (mode {mode:o}); `chmod 600` it"
    )]
    Exposed { source_: Source, mode: u32 },
    /// HKDF or the cipher refused the derived key's length (they take these lengths).
    #[error("cannot derive the sealing key from the state key")]
    Derive,
    /// A sealed checkpoint, and this agent has no key.
    #[error(
        "it is sealed with state key {sealed_with} and this agent has none; give it that key (the systemd credential {CREDENTIAL}, or --state-key-file)"
    )]
    NoKey { sealed_with: String },
    /// A sealed checkpoint, and this agent has another key.
    #[error(
        "it is sealed with state key {sealed_with}, not with this agent's {have}; give the agent that key"
    )]
    OtherKey { sealed_with: String, have: String },
    /// The key is the right one and the bytes do not open: tampered with.
    #[error("it does not open with state key {0} (tampered with)")]
    Forged(String),
}

/// The state key: seals and opens checkpoints.
pub struct StateKey {
    key: LessSafeKey,
    id: String,
    source: Source,
}

impl fmt::Debug for StateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateKey").field("id", &self.id).field("source", &self.source).finish()
    }
}

impl StateKey {
    /// Reads the key from `source`: at least [`MIN_LEN`] bytes, in a file only its owner
    /// can read.
    pub fn load(source: Source) -> Result<StateKey, Error> {
        let path = source.path();
        let read = std::fs::metadata(path).and_then(|m| Ok((m, std::fs::read(path)?)));
        let (metadata, material) = match read {
            Ok(read) => read,
            Err(error) => return Err(Error::Read { source_: source, error }),
        };
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Error::Exposed { source_: source, mode });
        }
        StateKey::derive(&material, source)
    }

    /// The key that `material` derives.
    pub fn derive(material: &[u8], source: Source) -> Result<StateKey, Error> {
        if material.len() < MIN_LEN {
            return Err(Error::Short { source_: source, len: material.len() });
        }
        let prk = Salt::new(HKDF_SHA256, &[]).extract(material);
        let mut sealing = [0u8; 32];
        let mut id = [0u8; ID_LEN];
        for (info, out) in [(SEALING, &mut sealing[..]), (IDENTITY, &mut id[..])] {
            let len = Len(out.len());
            prk.expand(&[info], len).and_then(|okm| okm.fill(out)).map_err(|_| Error::Derive)?;
        }
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &sealing).map_err(|_| Error::Derive)?;
        let id = id.iter().map(|b| format!("{b:02x}")).collect();
        Ok(StateKey { key: LessSafeKey::new(unbound), id, source })
    }

    /// The key's public id (16 hex digits), which sealed checkpoints carry.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// `plain` sealed for checkpoint `name`: a fresh nonce, then the ciphertext and its tag.
    pub fn seal(&self, name: &str, plain: &[u8]) -> io::Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| io::Error::other("the system's random number generator failed"))?;
        let mut body = plain.to_vec();
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(name),
                &mut body,
            )
            .map_err(|_| io::Error::other("sealing failed"))?;
        Ok([&nonce[..], &body, tag.as_ref()].concat())
    }

    /// What [`StateKey::seal`] sealed for checkpoint `name`, if `sealed_with` is this key.
    pub fn open(&self, name: &str, sealed_with: &str, sealed: &[u8]) -> Result<Vec<u8>, Error> {
        if sealed_with != self.id {
            return Err(Error::OtherKey {
                sealed_with: sealed_with.to_owned(),
                have: self.id.clone(),
            });
        }
        let forged = || Error::Forged(self.id.clone());
        let (nonce, body) = sealed.split_at_checked(NONCE_LEN).ok_or_else(forged)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| forged())?;
        let mut body = body.to_vec();
        let plain =
            self.key.open_in_place(nonce, Aad::from(name), &mut body).map_err(|_| forged())?.len();
        body.truncate(plain);
        Ok(body)
    }
}

/// HKDF's output length.
struct Len(usize);

impl KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

//! CA public-key pins: `sha256:<hex>` of a certificate's DER SubjectPublicKeyInfo, as
//! `kubeadm join --discovery-token-ca-cert-hash` takes them.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::Error;

/// The pin of one public key: its SHA-256 over the DER SubjectPublicKeyInfo.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pin([u8; 32]);

impl Pin {
    /// The pin of a DER SubjectPublicKeyInfo.
    pub fn of_spki(spki_der: &[u8]) -> Pin {
        Pin(Sha256::digest(spki_der).into())
    }
}

impl FromStr for Pin {
    type Err = Error;

    fn from_str(s: &str) -> Result<Pin, Error> {
        let bad = |reason: &str| Error::Pin { given: s.to_owned(), reason: reason.to_owned() };
        let Some((kind, hex)) = s.split_once(':') else {
            return Err(bad("there is no \"sha256:\" before the hash"));
        };
        if !kind.eq_ignore_ascii_case("sha256") {
            return Err(bad("only sha256 hashes are supported"));
        }
        if hex.len() != 64 {
            return Err(bad(&format!("the hash has {} hex digits, not 64", hex.len())));
        }
        let mut bytes = [0; 32];
        for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let digit = |c: u8| (c as char).to_digit(16);
            let (Some(high), Some(low)) = (digit(pair[0]), digit(pair[1])) else {
                return Err(bad("the hash has a character that is not a hex digit"));
            };
            *byte = u8::try_from(high * 16 + low).unwrap_or_default();
        }
        Ok(Pin(bytes))
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The pins of every certificate in a PEM bundle, in order; an error when there is no
/// certificate or one does not parse.
pub fn ca_pins(pem: &[u8]) -> Result<Vec<Pin>, Error> {
    let bad = |reason: String| Error::Certificate { reason };
    let mut pins = Vec::new();
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| bad(format!("bad PEM: {e}")))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let (_, cert) = x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| bad(format!("bad certificate: {e}")))?;
        pins.push(Pin::of_spki(cert.public_key().raw));
    }
    if pins.is_empty() {
        return Err(bad("no PEM CERTIFICATE in the bundle".into()));
    }
    Ok(pins)
}

/// Whether one of the bundle's certificates has a pinned public key (kubeadm's
/// `CheckAny`); else an error naming what was found and what was pinned.
pub fn check_pins(bundle: &[Pin], pinned: &[Pin]) -> Result<Pin, Error> {
    if let Some(found) = bundle.iter().find(|pin| pinned.contains(pin)) {
        return Ok(*found);
    }
    let list = |pins: &[Pin]| pins.iter().map(Pin::to_string).collect::<Vec<_>>().join(", ");
    Err(Error::PinMismatch { found: list(bundle), pinned: list(pinned) })
}

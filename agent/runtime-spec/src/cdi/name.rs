//! Qualified CDI device names, `vendor.com/class=name`, and the parts of a spec's `kind`
//! (`vendor.com/class`), checked as the CDI library's `parser` package checks them and
//! refused in its words.
//!
//! A vendor or a class starts with an ASCII letter, ends with a letter or digit, and
//! holds letters, digits, `_`, `-` and `.` between. A device name starts and ends with a
//! letter or digit and may also hold `:` between. Anything else (any non-ASCII byte
//! included) is refused.

/// Why a name or one of its parts is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The name does not split into `vendor/class=name` (the library reports every
    /// such name as missing its vendor).
    #[error("unqualified device {device:?}, missing vendor")]
    MissingVendor { device: String },
    #[error("unqualified device {device:?}, missing class")]
    MissingClass { device: String },
    #[error("unqualified device {device:?}, missing device name")]
    MissingName { device: String },
    /// One of the parts of a qualified name is refused.
    #[error("invalid device {device:?}: {source}")]
    Device {
        device: String,
        #[source]
        source: Box<Error>,
    },
    #[error("invalid vendor. {0}")]
    Vendor(Part),
    #[error("invalid class. {0}")]
    Class(Part),
    #[error("invalid (empty) device name")]
    EmptyDeviceName,
    /// The library's words, which say "class" for a device name.
    #[error("invalid class {name:?}, should start with a letter or digit")]
    DeviceNameStart { name: String },
    #[error("invalid character '{character}' in device name {name:?}")]
    DeviceNameCharacter { name: String, character: char },
    #[error("invalid name {name:?}, should end with a letter or digit")]
    DeviceNameEnd { name: String },
}

/// Why a vendor or a class is refused (after "invalid vendor. " or "invalid class. ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Part {
    #[error("empty name")]
    Empty,
    #[error("{name:?}, should start with letter")]
    Start { name: String },
    #[error("invalid character '{character}' in name {name:?}")]
    Character { name: String, character: char },
    #[error("{name:?}, should end with a letter or digit")]
    End { name: String },
}

/// A qualified device name's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QualifiedName<'a> {
    pub vendor: &'a str,
    pub class: &'a str,
    pub name: &'a str,
}

impl std::fmt::Display for QualifiedName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}={}", self.vendor, self.class, self.name)
    }
}

/// `device`'s vendor, class and name, each checked.
pub fn parse_qualified_name(device: &str) -> Result<QualifiedName<'_>, Error> {
    let Some(parts) = split(device) else {
        return Err(Error::MissingVendor { device: device.to_owned() });
    };
    let checked = validate_vendor_name(parts.vendor)
        .and_then(|()| validate_class_name(parts.class))
        .and_then(|()| validate_device_name(parts.name));
    checked
        .map(|()| parts)
        .map_err(|source| Error::Device { device: device.to_owned(), source: Box::new(source) })
}

/// Whether `device` is a valid qualified name.
pub fn is_qualified_name(device: &str) -> bool {
    parse_qualified_name(device).is_ok()
}

/// `device` split at its first `=` and its qualifier at the first `/`, every part
/// non-empty and the name not starting with `/` (the library's `ParseDevice`); the parts
/// are not checked.
fn split(device: &str) -> Option<QualifiedName<'_>> {
    if device.starts_with('/') {
        return None;
    }
    let (qualifier, name) = device.split_once('=')?;
    let (vendor, class) = parse_qualifier(qualifier)?;
    (!name.is_empty()).then_some(QualifiedName { vendor, class, name })
}

/// A spec's `kind` (`vendor/class`) split at its first `/`, both parts non-empty; not
/// checked.
pub fn parse_qualifier(kind: &str) -> Option<(&str, &str)> {
    kind.split_once('/').filter(|(vendor, class)| !vendor.is_empty() && !class.is_empty())
}

/// A vendor: see the module's documentation.
pub fn validate_vendor_name(vendor: &str) -> Result<(), Error> {
    vendor_or_class(vendor).map_err(Error::Vendor)
}

/// A class: see the module's documentation.
pub fn validate_class_name(class: &str) -> Result<(), Error> {
    vendor_or_class(class).map_err(Error::Class)
}

fn vendor_or_class(name: &str) -> Result<(), Part> {
    let owned = || name.to_owned();
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return Err(Part::Empty);
    };
    if !first.is_ascii_alphabetic() {
        return Err(Part::Start { name: owned() });
    }
    if bytes.len() == 1 {
        return Ok(());
    }
    if let Some(character) =
        inner(name).into_iter().find(|c| !(c.is_ascii_alphanumeric() || "_-.".contains(*c)))
    {
        return Err(Part::Character { name: owned(), character });
    }
    if !last.is_ascii_alphanumeric() {
        return Err(Part::End { name: owned() });
    }
    Ok(())
}

/// A device name: see the module's documentation.
pub fn validate_device_name(name: &str) -> Result<(), Error> {
    let owned = || name.to_owned();
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return Err(Error::EmptyDeviceName);
    };
    if !first.is_ascii_alphanumeric() {
        return Err(Error::DeviceNameStart { name: owned() });
    }
    if bytes.len() == 1 {
        return Ok(());
    }
    if let Some(character) =
        inner(name).into_iter().find(|c| !(c.is_ascii_alphanumeric() || "_-.:".contains(*c)))
    {
        return Err(Error::DeviceNameCharacter { name: owned(), character });
    }
    if !last.is_ascii_alphanumeric() {
        return Err(Error::DeviceNameEnd { name: owned() });
    }
    Ok(())
}

/// The characters between the first and the last byte (the library decodes that byte
/// range, so a character cut at either end reads as U+FFFD).
fn inner(name: &str) -> Vec<char> {
    let bytes = name.as_bytes();
    let middle = bytes.get(1..bytes.len().saturating_sub(1)).unwrap_or_default();
    String::from_utf8_lossy(middle).chars().collect()
}

#[cfg(test)]
mod tests;

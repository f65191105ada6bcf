//! What a scalar means, as go-yaml v2 resolves it: kubelet turns a manifest into JSON with
//! sigs.k8s.io/yaml (on its goyaml.v2 fork) before decoding the pod, so a plain `0644` is
//! the integer 420, `yes` is `true` and `1_000` is 1000 (S12).
//!
//! Plain scalars are looked up in go-yaml's table of spellings first (nulls, YAML 1.1
//! booleans, infinities and NaN), then read as Go's `strconv.ParseInt(s, 0, 64)` reads
//! them with `_` removed (`0x`, `0o`, `0b` and a leading `0` for octal, a sign), then as
//! an unsigned integer, then as a float of YAML's shape. Anything else is a string, and
//! so is every quoted or block scalar without a tag. Timestamps stay strings: go-yaml
//! keeps them so when it decodes into an untyped value, as kubelet does.

/// Why a tagged scalar cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(in crate::manifest) enum Error {
    /// The text is not of its tag's kind (go-yaml: "cannot decode !!str `abc` as a
    /// !!int").
    #[error("cannot decode `{text}` as a !!{tag}")]
    Mismatch { text: String, tag: &'static str },
}

/// A resolved scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(in crate::manifest) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    /// Past `i64::MAX`: go-yaml's `uint64`.
    Uint(u64),
    Float(f64),
    /// The text itself.
    Str,
}

/// A scalar's explicit core tag (`!!str`, `!!int`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::manifest) enum Tag {
    Str,
    Int,
    Float,
    Bool,
    Null,
    /// Any other tag (`!!binary`, `!!timestamp`, a local `!tag`): the text, as go-yaml
    /// leaves a tag it cannot resolve.
    Other,
}

/// A plain (unquoted, untagged) scalar.
pub(in crate::manifest) fn plain(text: &str) -> Scalar {
    if let Some(scalar) = spelled(text) {
        return scalar;
    }
    match text.as_bytes().first() {
        Some(b'.') => float(text).map_or(Scalar::Str, Scalar::Float),
        Some(b'0'..=b'9' | b'+' | b'-') => number(text),
        _ => Scalar::Str,
    }
}

/// A scalar with an explicit tag, quoted or not. `Err` when the text is not of the tag's
/// kind (go-yaml: "cannot decode !!str `abc` as a !!int").
pub(in crate::manifest) fn tagged(text: &str, tag: Tag) -> Result<Scalar, Error> {
    let resolved = plain(text);
    let fits = match (tag, resolved) {
        (Tag::Str | Tag::Other, _) => return Ok(Scalar::Str),
        (Tag::Int, Scalar::Int(_) | Scalar::Uint(_)) => true,
        (Tag::Float, Scalar::Float(_)) => true,
        (Tag::Float, Scalar::Int(i)) => return Ok(Scalar::Float(i as f64)),
        (Tag::Float, Scalar::Uint(u)) => return Ok(Scalar::Float(u as f64)),
        (Tag::Bool, Scalar::Bool(_)) | (Tag::Null, Scalar::Null) => true,
        _ => false,
    };
    if fits {
        Ok(resolved)
    } else {
        let name = match tag {
            Tag::Int => "int",
            Tag::Float => "float",
            Tag::Bool => "bool",
            _ => "null",
        };
        Err(Error::Mismatch { text: text.to_owned(), tag: name })
    }
}

/// go-yaml's table of whole spellings.
fn spelled(text: &str) -> Option<Scalar> {
    Some(match text {
        "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Scalar::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Scalar::Bool(false)
        }
        ".nan" | ".NaN" | ".NAN" => Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Scalar::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// An integer, else a float of YAML's shape, else the text.
fn number(text: &str) -> Scalar {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(value) = go_int(&plain) {
        if let Ok(int) = i64::try_from(value) {
            return Scalar::Int(int);
        }
        // ParseUint takes no sign.
        if !plain.starts_with(['+', '-'])
            && let Ok(uint) = u64::try_from(value)
        {
            return Scalar::Uint(uint);
        }
        // Out of both ranges: Go's parsers fail, and go-yaml tries a float.
    }
    if yaml_float_shape(&plain)
        && let Some(value) = float(&plain)
    {
        return Scalar::Float(value);
    }
    Scalar::Str
}

/// Go's `strconv.ParseInt(s, 0, ...)` syntax: a sign, then `0x`/`0X` hex, `0b`/`0B`
/// binary, `0o`/`0O` or a bare leading `0` octal, else decimal; at least one digit.
fn go_int(text: &str) -> Option<i128> {
    let (negative, unsigned) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = match unsigned.get(..2) {
        Some("0x" | "0X") => (16, &unsigned[2..]),
        Some("0b" | "0B") => (2, &unsigned[2..]),
        Some("0o" | "0O") => (8, &unsigned[2..]),
        _ if unsigned.len() > 1 && unsigned.starts_with('0') => (8, &unsigned[1..]),
        _ => (10, unsigned),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Past 128 bits it is out of both ranges anyway.
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// go-yaml's float pattern: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn yaml_float_shape(text: &str) -> bool {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let mut rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = digits(fraction);
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    } else {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        rest = &rest[n..];
        if let Some(fraction) = rest.strip_prefix('.') {
            rest = &fraction[digits(fraction)..];
        }
    }
    if let Some(exponent) = rest.strip_prefix(['e', 'E']) {
        let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        let n = digits(exponent);
        return n > 0 && n == exponent.len();
    }
    rest.is_empty()
}

/// Go's `strconv.ParseFloat(s, 64)` for the shapes that reach it: a value out of range
/// is an error there, so the text stays a string.
fn float(text: &str) -> Option<f64> {
    let value: f64 = text.parse().ok()?;
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests;

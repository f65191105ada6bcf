//! The config file of the managed containerd (containerd 1.6, format version 2): no CRI
//! plugin (Outpost speaks containerd's own API), its own gRPC and ttrpc sockets, no debug
//! socket and no metrics listener, everything it stores under Outpost's directories.

use std::fmt::Write;
use std::path::Path;

/// Where the managed containerd keeps things, as its config names them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout<'a> {
    pub root: &'a Path,
    pub state: &'a Path,
    pub opt: &'a Path,
    pub socket: &'a Path,
    pub ttrpc_socket: &'a Path,
}

/// A path that is not UTF-8 cannot be written into containerd's TOML config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotUtf8<'a>(pub &'a Path);

/// The config template (`containerd.toml`), shared with `cargo xtask containerd start`:
/// `{root}`, `{state}`, `{socket}`, `{ttrpc}` and `{opt}` stand for TOML strings.
const TEMPLATE: &str = include_str!("containerd.toml");

/// The config file's text.
pub(super) fn render(layout: Layout<'_>) -> Result<String, NotUtf8<'_>> {
    Ok(TEMPLATE
        .replace("{root}", &toml_path(layout.root)?)
        .replace("{state}", &toml_path(layout.state)?)
        .replace("{socket}", &toml_path(layout.socket)?)
        .replace("{ttrpc}", &toml_path(layout.ttrpc_socket)?)
        .replace("{opt}", &toml_path(layout.opt)?))
}

fn toml_path(path: &Path) -> Result<String, NotUtf8<'_>> {
    path.to_str().map(toml_string).ok_or(NotUtf8(path))
}

/// A TOML basic string: quotes, backslashes and control characters escaped.
pub(super) fn toml_string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(quoted, "\\u{:04X}", u32::from(c));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

//! Go's `strconv.Quote`, for messages that must read as kubelet's (which quote with
//! `%q`) and for kubelet's file formats that quote with it.

use std::fmt::Write as _;

/// `text` as Go's `strconv.Quote` writes it. Go keeps the characters it deems printable;
/// this escapes control characters, spaces other than ASCII's, the common invisible
/// format characters and private-use ones (Go also escapes unassigned code points, which
/// std cannot tell).
pub fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{b}' => quoted.push_str("\\v"),
            c if printable(c) => quoted.push(c),
            c if u32::from(c) < 0x80 => {
                let _ = write!(quoted, "\\x{:02x}", u32::from(c));
            }
            c if u32::from(c) < 0x10000 => {
                let _ = write!(quoted, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(quoted, "\\U{:08x}", u32::from(c));
            }
        }
    }
    quoted.push('"');
    quoted
}

fn printable(c: char) -> bool {
    let invisible = matches!(
        c,
        '\u{ad}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{feff}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{f0000}'..='\u{10ffff}'
    );
    !c.is_control() && (c == ' ' || !c.is_whitespace()) && !invisible
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quoted_as_go_quotes() {
        assert_eq!(quote("v1"), "\"v1\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("a\nb\tc\u{1}"), "\"a\\nb\\tc\\x01\"");
        assert_eq!(quote("gpu-é"), "\"gpu-é\"");
        assert_eq!(quote("\u{200b}\u{10ffff}"), "\"\\u200b\\U0010ffff\"");
    }
}

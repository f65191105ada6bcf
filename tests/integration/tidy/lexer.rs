//! Just enough of Rust's lexical grammar to tell comments and string literals from code:
//! line and (nested) block comments, strings with escapes, raw and byte strings, char
//! literals and lifetimes. Everything else is code.

/// A comment or a string literal of a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The line it starts on (1-based).
    pub line: usize,
    /// Its byte range in the file, quotes and comment markers included.
    pub start: usize,
    pub end: usize,
    /// The comment's text, or the literal's content (escapes as written).
    pub text: String,
}

/// The comments and string literals of `source`, in order.
#[derive(Debug, Default)]
pub struct Lexed {
    pub comments: Vec<Token>,
    pub strings: Vec<Token>,
}

pub fn lex(source: &str) -> Lexed {
    let bytes = source.as_bytes();
    let mut out = Lexed::default();
    let mut i = 0;
    let line_at = |at: usize| source[..at].matches('\n').count() + 1;
    let token = |start: usize, end: usize, text: &str| Token {
        line: line_at(start),
        start,
        end,
        text: text.to_owned(),
    };
    while i < bytes.len() {
        let rest = &source[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').map_or(bytes.len(), |n| i + n);
            out.comments.push(token(i, end, &source[i..end]));
            i = end;
        } else if rest.starts_with("/*") {
            let mut depth = 0;
            let mut j = i;
            while j < bytes.len() {
                if source[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if source[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            out.comments.push(token(i, j, &source[i..j]));
            i = j;
        } else if let Some((open, hashes)) = raw_string_start(source, i) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = i + open;
            let end = source[body..].find(&close).map_or(bytes.len(), |n| body + n);
            out.strings.push(token(i, end + close.len(), &source[body..end]));
            i = (end + close.len()).min(bytes.len());
        } else if bytes[i] == b'"' || (rest.starts_with("b\"") && !ident_before(source, i)) {
            let body = if bytes[i] == b'"' { i + 1 } else { i + 2 };
            let mut j = body;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            let end = j.min(bytes.len());
            out.strings.push(token(i, end + 1, &source[body..end]));
            i = end + 1;
        } else if bytes[i] == b'\'' {
            i = after_quote(source, i);
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// Whether an identifier character stands just before `at` (`b"` in `rb"` or `ab"` is
/// not a byte string's start).
fn ident_before(source: &str, at: usize) -> bool {
    source[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// At a raw string's start (`r"`, `r#"`, `br##"`...): the length of its opening and its
/// number of `#`.
fn raw_string_start(source: &str, at: usize) -> Option<(usize, usize)> {
    if ident_before(source, at) {
        return None;
    }
    let rest = &source[at..];
    let prefix = if rest.starts_with("br") {
        2
    } else if rest.starts_with('r') {
        1
    } else {
        return None;
    };
    let hashes = rest[prefix..].chars().take_while(|c| *c == '#').count();
    rest[prefix + hashes..].starts_with('"').then_some((prefix + hashes + 1, hashes))
}

/// Past a `'`: a char literal (`'a'`, `'\''`, `'"'`) or a lifetime's quote.
fn after_quote(source: &str, at: usize) -> usize {
    let rest = &source[at + 1..];
    let mut chars = rest.char_indices();
    match chars.next() {
        Some((_, '\\')) => {
            // An escape: the literal ends at the next quote after the escaped character.
            let after = rest[1..].char_indices().nth(1).map_or(rest.len(), |(n, _)| n + 1);
            rest[after..].find('\'').map_or(source.len(), |n| at + 1 + after + n + 1)
        }
        Some((_, c)) => match chars.next() {
            Some((n, '\'')) => at + 1 + n + 1,
            _ => at + 1 + c.len_utf8(), // a lifetime or a label
        },
        None => source.len(),
    }
}

#[test]
fn comments_and_strings_are_told_from_code() {
    let source = "let url = \"http://x//y\"; // M9: a comment\nlet c = '\"'; let r = r#\"a \"// S1\" b\"#;\n/* outer /* inner */ still */ fn f<'a>(x: &'a str) {}\nlet e = '\\''; let s = \"q\\\"// not\";\n";
    let lexed = lex(source);
    let comments: Vec<&str> = lexed.comments.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(comments, ["// M9: a comment", "/* outer /* inner */ still */"]);
    let strings: Vec<&str> = lexed.strings.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(strings, ["http://x//y", "a \"// S1\" b", "q\\\"// not"]);
    assert_eq!(lexed.comments[1].line, 3);
}

//! Kubernetes' `$(VAR)` expansion of env values, commands and args.
//!
//! `$(NAME)` becomes NAME's value when NAME is defined, else stays as written; `$$` is an
//! escaped `$`; any other `$` (including an unclosed `$(`) is kept.

/// Expands `input`, looking names up with `lookup`.
pub(super) fn expand<'v>(input: &str, lookup: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            out.push('$');
            rest = escaped;
        } else if let Some(reference) = after.strip_prefix('(') {
            match reference.split_once(')') {
                Some((name, tail)) => {
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = tail;
                }
                None => {
                    // Unclosed: kept as written.
                    out.push_str("$(");
                    rest = reference;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;

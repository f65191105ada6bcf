//! `#[needs(pods)]`, `#[needs(bpf, pods)]`: the test is ignored, with the reason, unless
//! `tests/build.rs` found every prerequisite named (it sets `outpost_has_<name>`; under
//! `CI=true` it sets them all, so the test runs and fails if one is missing). It stands
//! for `#[cfg_attr(not(all(outpost_has_a, outpost_has_b)), ignore = "needs ...")]`, with
//! the reasons of `tests/prerequisites.rs`, declared once for every test.
//!
//! It goes above `#[test]` (or `#[tokio::test]`): the test harness reads `#[ignore]`
//! when `#[test]` expands, so an attribute macro below it would come too late (the tidy
//! test `needs_comes_before_the_test_attribute` checks the order).

use proc_macro::TokenStream;

/// Each prerequisite's name and what it takes.
const PREREQUISITES: &[(&str, &str)] = include!("../../prerequisites.rs");

/// See the crate's documentation.
#[proc_macro_attribute]
pub fn needs(args: TokenStream, item: TokenStream) -> TokenStream {
    match attribute(&args.to_string()) {
        Ok(attribute) => match attribute.parse::<TokenStream>() {
            Ok(mut out) => {
                out.extend(item);
                out
            }
            Err(e) => error(&format!("#[needs]: {e}")),
        },
        Err(message) => error(&message),
    }
}

/// The `cfg_attr` that `#[needs(args)]` stands for.
fn attribute(args: &str) -> Result<String, String> {
    let names: Vec<&str> = args.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err("#[needs(...)] names at least one prerequisite".to_owned());
    }
    let mut cfgs = Vec::new();
    let mut reasons: Vec<&str> = Vec::new();
    for name in &names {
        let Some((_, reason)) = PREREQUISITES.iter().find(|(known, _)| known == name) else {
            let known: Vec<&str> = PREREQUISITES.iter().map(|(n, _)| *n).collect();
            return Err(format!("#[needs]: no prerequisite {name:?}; known: {}", known.join(", ")));
        };
        cfgs.push(format!("outpost_has_{name}"));
        reasons.push(reason);
    }
    let reason = format!("needs {}", reasons.join("; and "));
    Ok(format!("#[cfg_attr(not(all({})), ignore = {:?})]", cfgs.join(", "), reason))
}

fn error(message: &str) -> TokenStream {
    format!("compile_error!({message:?});").parse().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::attribute;

    #[test]
    fn one_or_more_prerequisites_make_one_cfg_attr() {
        let one = attribute("pods").unwrap();
        assert!(
            one.starts_with(
                "#[cfg_attr(not(all(outpost_has_pods)), ignore = \"needs root, the test containerd"
            ),
            "{one}"
        );
        let two = attribute("bpf, pods").unwrap();
        assert!(two.contains("not(all(outpost_has_bpf, outpost_has_pods))"), "{two}");
        assert!(
            two.contains("BTF (/sys/kernel/btf/vmlinux); and root, the test containerd"),
            "{two}"
        );
    }

    #[test]
    fn an_unknown_or_missing_prerequisite_is_a_compile_error() {
        assert!(attribute("").is_err());
        assert!(attribute("podz").unwrap_err().contains("known: root, containerd, pods"));
    }
}

use proptest::prelude::*;

use super::*;

fn vars(name: &str) -> Option<&'static str> {
    match name {
        "A" => Some("alpha"),
        "EMPTY" => Some(""),
        "DOLLAR" => Some("$(A)"),
        _ => None,
    }
}

fn run(input: &str) -> String {
    expand(input, vars)
}

#[test]
fn references() {
    assert_eq!(run("$(A)"), "alpha");
    assert_eq!(run("x-$(A)-y"), "x-alpha-y");
    assert_eq!(run("$(A)$(A)"), "alphaalpha");
    assert_eq!(run("[$(EMPTY)]"), "[]");
    assert_eq!(run("$(MISSING)"), "$(MISSING)");
    assert_eq!(run("$()"), "$()");
    assert_eq!(run("$(DOLLAR)"), "$(A)", "values are not expanded again");
}

#[test]
fn escapes() {
    assert_eq!(run("$$(A)"), "$(A)");
    assert_eq!(run("$$$(A)"), "$alpha");
    assert_eq!(run("$$$$"), "$$");
    assert_eq!(run("a$$b"), "a$b");
}

#[test]
fn other_dollars_are_kept() {
    assert_eq!(run("$"), "$");
    assert_eq!(run("a$"), "a$");
    assert_eq!(run("$A"), "$A");
    assert_eq!(run("$HOME/x"), "$HOME/x");
    assert_eq!(run("$("), "$(");
    assert_eq!(run("$(A"), "$(A");
    assert_eq!(run("$(A $(A)"), "$(A $(A)", "the name runs to the first ')'");
    assert_eq!(run("$($(A))"), "$($(A))");
    assert_eq!(run("€$(A)€"), "€alpha€");
}

proptest! {
    /// Text without `$` is left alone.
    #[test]
    fn no_dollar_is_identity(text in "[^$]*") {
        prop_assert_eq!(run(&text), text);
    }

    /// Escaping every `$` protects any text: `$` → `$$` expands back to the original.
    #[test]
    fn escaped_text_round_trips(text in ".*") {
        prop_assert_eq!(run(&text.replace('$', "$$")), text);
    }
}

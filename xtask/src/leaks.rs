//! `cargo xtask leaks [--clean]`: what Outpost's agents, tests and benches left on this
//! machine (the inventory is `outpost-leaks`, which the test nodes and chaos trials use
//! too). CI runs it after the tests and last, and fails when anything is left.

use anyhow::bail;
use outpost_leaks::Scope;

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let clean_up = match args {
        [] => false,
        [flag] if flag == "--clean" => true,
        _ => bail!("usage: cargo xtask leaks [--clean]"),
    };
    check(&Scope::machine(Some(crate::containerd::Paths::new().socket())), clean_up)
}

/// Fails, listing them, when `scope` has leftovers (after removing them, with `clean_up`).
pub fn check(scope: &Scope, clean_up: bool) -> anyhow::Result<()> {
    let left = scope.inventory();
    for leftover in &left {
        println!("leaks: left: {leftover}");
    }
    if left.is_empty() {
        println!("leaks: nothing Outpost made is left");
        return Ok(());
    }
    if !clean_up {
        bail!(
            "{} things Outpost made are left (`cargo xtask leaks --clean` removes them)",
            left.len()
        );
    }
    let still = outpost_leaks::clean(scope);
    for leftover in &still {
        println!("leaks: cannot remove: {leftover}");
    }
    if !still.is_empty() {
        bail!("{} leftovers could not be removed", still.len());
    }
    println!("leaks: removed {} leftovers", left.len());
    Ok(())
}

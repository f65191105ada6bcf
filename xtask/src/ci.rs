//! `cargo xtask ci`: what CI runs, in order, stopping at the first failure.

use crate::{bench, deps};

pub fn run() -> anyhow::Result<()> {
    let steps: [&[&str]; 4] = [
        &["fmt", "--all", "--", "--check"],
        &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
        &["build", "--workspace", "--all-targets"],
        &["test", "--workspace"],
    ];
    let total = steps.len() + 2;
    println!("==> ci step 1/{total}: cargo xtask deps");
    deps::run()?;
    for (i, args) in steps.into_iter().enumerate() {
        println!("==> ci step {}/{total}: cargo {}", i + 2, args.join(" "));
        crate::run(crate::cargo(args))?;
    }
    println!("==> ci step {total}/{total}: cargo xtask bench --quick");
    bench::run(&bench::Options { quick: true })?;
    println!("==> ci: all {total} steps passed");
    Ok(())
}

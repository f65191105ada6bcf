//! The `outpost` binary: parse arguments, set up logging, dispatch. Nothing else.

use std::process::ExitCode;

use clap::Parser;
use outpost::cli::{Cli, Command};
use outpost::{commands, logging};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_level = logging::init(cli.log_format);
    let result = match cli.command {
        Command::Version => {
            println!("outpost {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Validate(args) => validate(args),
        Command::Run(args) => run(*args, log_level),
        Command::Join(args) => commands::join::join(&args).map_err(Into::into),
        Command::Images(command) => commands::images::images(command).map_err(Into::into),
        Command::Pods(args) => commands::pods::pods(&args).map_err(Into::into),
        Command::Describe(args) => commands::describe::describe(&args).map_err(Into::into),
        Command::Status(args) => commands::status::status(&args).map_err(Into::into),
        Command::Manifests(command) => commands::manifests::manifests(&command).map_err(Into::into),
        Command::Logs(args) => commands::logs::logs(&args).map_err(Into::into),
        Command::Exec(args) => commands::exec::exec(&args).map_err(Into::into),
        Command::Debug(args) => commands::debug::debug(&args).map_err(Into::into),
        Command::ContainerLog(args) => commands::container_log::container_log(args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| anyhow::anyhow!(e)),
        Command::ContainerLogNode(args) => commands::container_log::container_log_node(args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(Into::into),
        Command::PodInit(_) => {
            outpost::runtime::netns::pid::run_init().map(|()| ExitCode::SUCCESS).map_err(Into::into)
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("outpost: {e:#}");
        ExitCode::FAILURE
    })
}

fn validate(args: outpost::cli::ValidateArgs) -> anyhow::Result<ExitCode> {
    let node = outpost::cli::validate_node_name(args.node_name.as_deref());
    let facts = commands::validate::node_facts(&args)?;
    let source = commands::validate::source(&args.source);
    let mut out = std::io::stdout().lock();
    let summary = commands::validate::validate(&args.files, &node, &facts, source, &mut out)?;
    eprintln!(
        "{} file(s), {} pod(s), {} invalid, {} warning(s)",
        summary.files, summary.pods, summary.invalid_files, summary.warnings
    );
    Ok(if summary.invalid_files == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn run(args: outpost::cli::RunArgs, log_level: logging::LogLevel) -> anyhow::Result<ExitCode> {
    // Before the runtime's threads exist: these edit the environment and malloc's setup.
    let systemd = outpost::systemd::take_env();
    outpost::host::allocator::configure();
    let runtime = commands::run::runtime()?;
    runtime.block_on(commands::run::run(args.settings, args.dry_run, systemd, log_level))?;
    Ok(ExitCode::SUCCESS)
}

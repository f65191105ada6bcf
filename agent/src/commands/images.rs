//! `outpost images ...`: the images in containerd's `outpost` namespace.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{ImagesCommand, ImportArgs};
use crate::error_chain::describe;
use crate::runtime::containerd::{self, Containerd};
use crate::runtime::image;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start the async runtime")]
    Runtime(#[source] io::Error),
    #[error(transparent)]
    Containerd(#[from] containerd::Error),
    #[error("cannot write the result")]
    Output(#[source] io::Error),
}

/// Runs an `images` subcommand on a runtime of its own.
pub fn images(command: ImagesCommand) -> Result<ExitCode, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    match command {
        ImagesCommand::Import(args) => {
            runtime.block_on(import(&args, &mut io::stdout().lock(), &mut io::stderr().lock()))
        }
    }
}

/// `outpost images import TAR...`: imports each tarball (a failed one does not stop the
/// others); prints `imported NAME DIGEST` per image to `out` and each failure to `err`;
/// exits 1 if any tarball failed.
pub async fn import(
    args: &ImportArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<ExitCode, Error> {
    let containerd = Containerd::connect(&args.containerd_socket)
        .await?
        .with_namespace(&args.containerd_namespace)?;
    let mut failed: Vec<&PathBuf> = Vec::new();
    for tarball in &args.tarballs {
        match image::import(&containerd, tarball).await {
            Ok(images) => {
                for image in images {
                    writeln!(out, "imported {} {}", image.name, image.digest)
                        .map_err(Error::Output)?;
                }
            }
            Err(e) => {
                writeln!(err, "outpost: {}", describe(&e)).map_err(Error::Output)?;
                failed.push(tarball);
            }
        }
    }
    Ok(if failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

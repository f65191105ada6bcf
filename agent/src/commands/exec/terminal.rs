//! The local terminal of `outpost exec -t`: raw mode while the command runs (restored when
//! the [`RawMode`] guard drops, on every way out, a panic's unwinding included) and the
//! window's size.

use std::io::IsTerminal;
use std::os::fd::AsFd;

use rustix::termios::{self, OptionalActions, Termios};

use crate::api::streams::status::TerminalSize;

/// Whether stdin is a terminal (what `-t` needs).
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// The window's size: stdout's terminal, else stdin's; `None` when neither is one.
pub fn size() -> Option<TerminalSize> {
    let from = |fd: std::os::fd::BorrowedFd<'_>| {
        termios::tcgetwinsize(fd)
            .ok()
            .filter(|w| w.ws_col > 0 && w.ws_row > 0)
            .map(|w| TerminalSize { width: w.ws_col, height: w.ws_row })
    };
    from(std::io::stdout().as_fd()).or_else(|| from(std::io::stdin().as_fd()))
}

/// Stdin's terminal in raw mode: keys go to the remote command as typed (Ctrl-C
/// included), and nothing is echoed locally. Dropping it restores the settings.
#[derive(Debug)]
pub struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Puts stdin's terminal in raw mode.
    pub fn enter() -> std::io::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(stdin.as_fd(), OptionalActions::Now, &raw)?;
        Ok(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // Nothing more can be done if the terminal is gone.
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), OptionalActions::Now, &self.saved);
    }
}

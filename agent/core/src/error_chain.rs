//! One line for an error and its causes, as logs, `/readyz` and the CLI show them.

use std::error::Error;

/// `outer: inner: innermost`, leaving out a cause whose text the line already holds
/// (many errors print their source themselves, and some causes repeat their parent).
pub fn describe(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let line = inner.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_added_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("listing pods: {0}")]
        struct Repeats(#[source] std::io::Error);
        #[derive(Debug, thiserror::Error)]
        #[error("listing pods")]
        struct Hides(#[source] std::io::Error);
        let refused =
            || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(describe(&Repeats(refused())), "listing pods: connection refused");
        assert_eq!(describe(&Hides(refused())), "listing pods: connection refused");
    }
}

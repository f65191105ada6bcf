//! The env files `env[].valueFrom.fileKeyRef` reads (KEP-3721, kubelet 1.34's `EnvFiles`),
//! parsed as kubelet 1.34's `ParseEnv` does: line by line, whatever follows a `#` is a
//! comment, a line with an `=` is `KEY=VALUE` split at its first `=` (neither side
//! trimmed), other lines are skipped; the first line with the key gives its value. A line
//! longer than Go's `bufio.Scanner` takes (64 KiB) fails the read, as it fails kubelet's.

/// The longest line kubelet's scanner reads (`bufio.MaxScanTokenSize`), its newline aside.
pub const MAX_LINE: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "line {line} is longer than {MAX_LINE} bytes, the most kubelet reads of a line; \
         split the value or put it in a volume file the application reads"
    )]
    LineTooLong { line: usize },
}

/// The value of `key` in the env file `content`; `None` when no line sets it.
pub fn lookup<'c>(content: &'c str, key: &str) -> Result<Option<&'c str>, Error> {
    for (index, line) in lines(content).enumerate() {
        // A line that fills the scanner's 64 KiB buffer before its newline.
        if line.len() >= MAX_LINE {
            return Err(Error::LineTooLong { line: index + 1 });
        }
        let line = line.split_once('#').map_or(line, |(before, _)| before);
        if let Some((name, value)) = line.split_once('=')
            && name == key
        {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// Go's `bufio.ScanLines`: lines ended by `\n`, a `\r` before it dropped, and a last line
/// without a newline kept unless it is empty.
fn lines(content: &str) -> impl Iterator<Item = &str> {
    let body = content.strip_suffix('\n').unwrap_or(content);
    let lines = (!content.is_empty()).then(|| body.split('\n')).into_iter().flatten();
    lines.map(|line| line.strip_suffix('\r').unwrap_or(line))
}

#[cfg(test)]
mod tests;

//! A bound on YAML flow nesting, checked on the text before the parser reads it.
//!
//! Pod manifests nest flow collections (`[` or `{`) a few levels deep. Text that opens
//! thousands of them, by accident or by brute force, is rejected here, before the parser
//! spends time and memory on it, with the position of the bracket that went too deep.
//!
//! The estimate follows YAML's lexical rules for quoted scalars, comments, block scalars
//! and document markers. Brackets in comments are ignored. Opening brackets in quoted and
//! block scalars count, and closing ones there never lower the estimate below where the
//! scalar began, so a scalar misread by this lexer can only raise the estimate. It is a
//! lexer, not a parser: text crafted to fool it could still reach the parser (and
//! the loader's depth limit then stops it), but nesting by accident or by brute force is stopped.

/// The deepest flow nesting accepted.
pub(super) const MAX_FLOW_DEPTH: usize = 64;

/// `Err(offset)` at the bracket that passes [`MAX_FLOW_DEPTH`].
pub(super) fn check(text: &str) -> Result<(), usize> {
    let mut lexer = Lexer { depth: 0, floor: 0, state: State::Plain };
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        lexer.line(line.as_bytes()).map_err(|column| offset + column)?;
        offset += line.len();
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Outside any scalar the lexer tracks: brackets are flow indicators.
    Plain,
    Single,
    Double,
    /// The content of a `|` or `>` scalar: lines indented deeper than this, or blank.
    Block(usize),
}

#[derive(Debug)]
struct Lexer {
    depth: usize,
    /// Closing brackets do not lower `depth` below this: the depth where the current
    /// string began (0 outside strings).
    floor: usize,
    state: State,
}

impl Lexer {
    fn line(&mut self, line: &[u8]) -> Result<(), usize> {
        let indent = line.iter().take_while(|&&b| b == b' ').count();
        let mut start = 0;
        if is_document_marker(line) {
            // A new document starts at flow depth 0; a marker inside a quoted scalar or a
            // flow collection is an error that stops the parser.
            *self = Lexer { depth: 0, floor: 0, state: State::Plain };
            start = 3;
        } else if let State::Block(parent) = self.state {
            let blank = line[indent..].iter().all(u8::is_ascii_whitespace);
            if blank || indent > parent {
                return self.literal(line);
            }
            self.leave_string();
        }

        let mut i = start;
        while i < line.len() {
            let byte = line[i];
            let previous = if i == 0 { b' ' } else { line[i - 1] };
            match self.state {
                State::Plain => match byte {
                    b'[' | b'{' => self.open(i)?,
                    b']' | b'}' => self.close(),
                    b'"' | b'\'' if starts_token(previous) => {
                        self.enter_string(if byte == b'"' { State::Double } else { State::Single });
                    }
                    // A comment, to the end of the line (fold markers like `{{{` are
                    // common in comments, and not counted).
                    b'#' if previous.is_ascii_whitespace() => return Ok(()),
                    b'|' | b'>'
                        if previous.is_ascii_whitespace() && is_block_header(&line[i + 1..]) =>
                    {
                        self.enter_string(State::Block(indent));
                        return Ok(());
                    }
                    _ => {}
                },
                State::Double => match byte {
                    b'\\' => i += 1,
                    b'"' => self.leave_string(),
                    b'[' | b'{' => self.open(i)?,
                    b']' | b'}' => self.close(),
                    _ => {}
                },
                State::Single => match byte {
                    b'\'' if line.get(i + 1) == Some(&b'\'') => i += 1,
                    b'\'' => self.leave_string(),
                    b'[' | b'{' => self.open(i)?,
                    b']' | b'}' => self.close(),
                    _ => {}
                },
                // A block scalar's header ends its line (see above).
                State::Block(_) => return Ok(()),
            }
            i += 1;
        }
        Ok(())
    }

    /// Brackets in a block scalar's line.
    fn literal(&mut self, line: &[u8]) -> Result<(), usize> {
        for (i, &byte) in line.iter().enumerate() {
            match byte {
                b'[' | b'{' => self.open(i)?,
                b']' | b'}' => self.close(),
                _ => {}
            }
        }
        Ok(())
    }

    fn open(&mut self, at: usize) -> Result<(), usize> {
        self.depth += 1;
        if self.depth > MAX_FLOW_DEPTH { Err(at) } else { Ok(()) }
    }

    fn close(&mut self) {
        if self.depth > self.floor {
            self.depth -= 1;
        }
    }

    fn enter_string(&mut self, state: State) {
        self.state = state;
        self.floor = self.depth;
    }

    fn leave_string(&mut self) {
        self.state = State::Plain;
        self.floor = 0;
    }
}

/// Whether a quote after this byte opens a quoted scalar (rather than being part of a
/// plain one, as in `it's`).
fn starts_token(previous: u8) -> bool {
    previous.is_ascii_whitespace() || matches!(previous, b'[' | b'{' | b',' | b':')
}

/// `---` or `...` at the start of a line, alone or followed by white space.
fn is_document_marker(line: &[u8]) -> bool {
    (line.starts_with(b"---") || line.starts_with(b"..."))
        && line.get(3).is_none_or(u8::is_ascii_whitespace)
}

/// What may follow `|` or `>` on a block scalar's first line: indentation and chomping
/// indicators, then white space and a comment.
fn is_block_header(rest: &[u8]) -> bool {
    let after = rest
        .iter()
        .position(|&b| !(b.is_ascii_digit() || b == b'+' || b == b'-'))
        .map_or(rest.len(), |end| end);
    let rest = &rest[after..];
    match rest.iter().position(|b| !b.is_ascii_whitespace()) {
        None => true,
        Some(first) => first > 0 && rest[first] == b'#',
    }
}

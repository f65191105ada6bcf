use proptest::prelude::*;

use super::*;

#[test]
fn keys_values_and_comments_as_kubelet_reads_them() {
    let file = "# written by the init container\nDB_HOST=db.internal\nDB_PORT=5432 # the default\nNAME= spaced value \nEMPTY=\nURL=a=b\nnot a variable\nDB_HOST=second\r\nCRLF=yes\r\n";
    assert_eq!(lookup(file, "DB_HOST"), Ok(Some("db.internal")), "the first line wins");
    assert_eq!(lookup(file, "DB_PORT"), Ok(Some("5432 ")), "a comment ends the value");
    assert_eq!(lookup(file, "NAME"), Ok(Some(" spaced value ")), "nothing is trimmed");
    assert_eq!(lookup(file, "EMPTY"), Ok(Some("")));
    assert_eq!(lookup(file, "URL"), Ok(Some("a=b")), "split at the first =");
    assert_eq!(lookup(file, "CRLF"), Ok(Some("yes")), "\\r\\n ends a line");
    assert_eq!(lookup(file, "MISSING"), Ok(None));
    assert_eq!(lookup(file, "DB_HOST "), Ok(None), "keys are compared as written");
    assert_eq!(lookup("", "A"), Ok(None));
    assert_eq!(lookup("A=1", "A"), Ok(Some("1")), "a last line without a newline");
    assert_eq!(lookup("#A=1\n", "A"), Ok(None));
    assert_eq!(lookup(" A=1\n", " A"), Ok(Some("1")), "leading blanks are part of the key");
}

#[test]
fn a_line_longer_than_kubelets_scanner_takes_fails() {
    let long = format!("A=1\nB={}\n", "x".repeat(MAX_LINE));
    assert_eq!(lookup(&long, "A"), Ok(Some("1")), "lines before it are read");
    assert_eq!(lookup(&long, "B"), Err(Error::LineTooLong { line: 2 }));
    let fits = format!("B={}\n", "x".repeat(MAX_LINE - 3));
    assert_eq!(lookup(&fits, "B").map(|v| v.map(str::len)), Ok(Some(MAX_LINE - 3)));
}

proptest! {
    /// A file written as `KEY=VALUE` lines gives each key its first value back, whatever
    /// else (comments, blank and other lines) is around it.
    #[test]
    fn written_variables_are_read_back(
        vars in proptest::collection::vec(("[A-Z_][A-Z0-9_]{0,8}", "[^#\r\n]{0,20}"), 1..8),
        noise in proptest::collection::vec("(#[^\n]*|[^=#\n]*)", 0..4),
        crlf in any::<bool>(),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let mut file = String::new();
        for (i, (key, value)) in vars.iter().enumerate() {
            if let Some(line) = noise.get(i) { file.push_str(line); file.push_str(end); }
            file.push_str(&format!("{key}={value}{end}"));
        }
        for (key, _) in &vars {
            let first = vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
            let expected = first.map(|v| v.strip_suffix('\r').unwrap_or(v));
            prop_assert_eq!(lookup(&file, key), Ok(expected));
        }
    }

    /// Any text parses or fails with a line number within the file; never a panic.
    #[test]
    fn any_text_is_read_without_panic(text in "(?s).{0,200}", key in ".{0,5}") {
        if let Err(Error::LineTooLong { line }) = lookup(&text, &key) {
            prop_assert!(line >= 1);
        }
    }
}

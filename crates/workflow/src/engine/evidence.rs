//! `file:line` evidence for a checklist item marked done: its syntax, and whether the lines it
//! points at hold an implementation. Reading the file is the adapter's job; it hands the lines
//! over as an [`EvidenceFile`].

use std::sync::OnceLock;

use regex::Regex;

/// `path:N` or `path:N-M`, 1-based and inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceRef {
    pub path: String,
    pub start: usize,
    pub end: usize,
}

/// What the adapter found at an evidence path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvidenceFile {
    /// The path leaves the repository (`..`, absolute, or a symlink out).
    Outside,
    /// No such regular file (or not readable as text).
    Missing,
    /// The file's lines.
    Lines(Vec<String>),
}

/// Parses evidence; None when it is not of the form `path:N` or `path:N-M` with 1 ≤ N ≤ M.
pub fn parse(evidence: &str) -> Option<EvidenceRef> {
    parse_any_order(evidence).filter(|r| r.start <= r.end)
}

/// Like [`parse`], but keeps a range written backwards (`path:9-3`), so that it can be told
/// apart from text that is no evidence at all.
pub fn parse_any_order(evidence: &str) -> Option<EvidenceRef> {
    static FORMAT: OnceLock<Regex> = OnceLock::new();
    let re = FORMAT
        .get_or_init(|| Regex::new(r"^(?P<path>[^\s:][^:]*):(?P<start>\d+)(?:-(?P<end>\d+))?$").expect("valid regex"));
    let caps = re.captures(evidence.trim())?;
    let start: usize = caps["start"].parse().ok()?;
    let end: usize = match caps.name("end") {
        Some(m) => m.as_str().parse().ok()?,
        None => start,
    };
    (start >= 1 && end >= 1).then(|| EvidenceRef { path: caps["path"].to_owned(), start, end })
}

/// Whether every line of `lines` is a placeholder rather than code, judged by the file's
/// extension: blank lines, comments, `pass`, `...`, TODO markers, `raise NotImplementedError`,
/// `todo!()`, `unimplemented!()`, and not-implemented throws or panics.
pub fn is_empty_implementation(path: &str, lines: &[String]) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let hash_comments = matches!(ext.as_str(), "py" | "pyi" | "rb" | "sh" | "bash" | "yml" | "yaml" | "toml");
    let mut in_block = false;
    for raw in lines {
        let line = raw.trim();
        if in_block {
            if let Some(i) = line.find("*/") {
                in_block = false;
                if !is_placeholder(line[i + 2..].trim(), &ext, hash_comments) {
                    return false;
                }
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("/*") {
            match rest.find("*/") {
                Some(i) => {
                    if !is_placeholder(rest[i + 2..].trim(), &ext, hash_comments) {
                        return false;
                    }
                }
                None => in_block = true,
            }
            continue;
        }
        if !is_placeholder(line, &ext, hash_comments) {
            return false;
        }
    }
    true
}

/// Whether a line of `lines` stands in for code still to write: `pass`, `...`, a TODO or
/// FIXME, `raise NotImplementedError`, `todo!()`, `unimplemented!()`, a not-implemented throw
/// or panic. A doc comment or signature the session wrote is evidence; a stub it wrote is not.
pub fn has_stub_marker(lines: &[String]) -> bool {
    static STUB: OnceLock<Regex> = OnceLock::new();
    let stub = STUB.get_or_init(|| {
        Regex::new(
            r#"(?ix)(
                ^(pass|\.\.\.);?$
              | \b(todo|fixme|xxx)\b
              | \bnotimplemented(error)?\b
              | \b(todo|unimplemented)!\s*\(
              | not\s+(yet\s+)?implemented
              | \bunsupportedoperation
            )"#,
        )
        .expect("valid regex")
    });
    lines.iter().any(|l| stub.is_match(l.trim()))
}

fn is_placeholder(line: &str, ext: &str, hash_comments: bool) -> bool {
    static NOT_IMPLEMENTED: OnceLock<Regex> = OnceLock::new();
    let not_implemented = NOT_IMPLEMENTED.get_or_init(|| {
        Regex::new(
            r#"(?ix)^(
                (todo|fixme|xxx)\b.*
              | pass;?
              | \.\.\.;?
              | raise\s+notimplemented(error)?(\(.*\))?
              | (todo|unimplemented)!\s*\(.*\)\s*;?
              | panic!\s*\(\s*"[^"]*(not\s+(yet\s+)?implemented|todo)[^"]*"\s*\)\s*;?
              | throw\s+new\s+\w*(notimplemented|unsupportedoperation)\w*\s*\(.*\)\s*;?
              | throw\s+new\s+error\s*\(\s*['"`][^'"`]*(not\s+(yet\s+)?implemented|todo)[^'"`]*['"`]\s*\)\s*;?
              | raise\s+['"][^'"]*not\s+implemented[^'"]*['"]
              | raise\s+notimplementederror.*
              | return\s+nil\s*//.*todo.*
              | [{}();,]*
            )$"#,
        )
        .expect("valid regex")
    });
    if line.is_empty() {
        return true;
    }
    let is_comment = line.starts_with("//")
        || line.starts_with("*")
        || (hash_comments && line.starts_with('#'))
        || (ext == "py" && (line.starts_with("\"\"\"") || line.starts_with("'''")))
        || line.starts_with("<!--");
    if is_comment {
        return true;
    }
    // A header (`fn f() {`, `def f():`, a decorator) is neither code nor placeholder: a stub
    // body under a real signature is still a stub.
    let python = ext == "py" || ext == "pyi";
    let is_header = line.ends_with('{')
        || line.starts_with('@')
        || (python && line.ends_with(':') && ["def ", "async def ", "class "].iter().any(|k| line.starts_with(k)));
    if is_header {
        return true;
    }
    // A header with its body on the same line: `fn f() { todo!() }`.
    if let Some(open) = line.find('{')
        && line.ends_with('}')
    {
        let body = line[open + 1..line.len() - 1].trim();
        return body.is_empty() || not_implemented.is_match(body);
    }
    if python
        && let Some((head, body)) = line.split_once(':')
        && ["def ", "async def ", "class "].iter().any(|k| head.starts_with(k))
    {
        let body = body.trim();
        return body.is_empty() || not_implemented.is_match(body);
    }
    not_implemented.is_match(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn parses_the_two_forms_and_rejects_the_rest() {
        assert_eq!(parse("auth.py:42"), Some(EvidenceRef { path: "auth.py".into(), start: 42, end: 42 }));
        assert_eq!(parse("src/auth.py:42-58"), Some(EvidenceRef { path: "src/auth.py".into(), start: 42, end: 58 }));
        for bad in [
            "auth.py line 42",
            "line 42 in auth.py",
            "around line 42",
            "auth.py:",
            "auth.py:0",
            "a.py:9-3",
            ":3",
            "a.py:x",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn stub_markers_are_found_in_any_language() {
        let has = |text: &str| has_stub_marker(&text.lines().map(str::to_owned).collect::<Vec<_>>());
        for stub in [
            "    pass",
            "    ...",
            "    todo!()",
            "    # TODO: later",
            "    raise NotImplementedError",
            "  throw new Error('not implemented');",
        ] {
            assert!(has(&format!("def f():\n{stub}")), "{stub:?}");
        }
        for doc in [
            "def f():\n    \"\"\"Says what f does.\"\"\"",
            "/// Logs the user in.\npub fn login() {",
            "# Explains passing tokens",
        ] {
            assert!(!has(doc), "{doc:?}");
        }
    }

    #[test]
    fn placeholders_are_empty_implementations() {
        let stubs = [
            ("a.py", "    pass\n"),
            ("a.py", "# TODO: later\n    ...\n"),
            ("a.py", "    raise NotImplementedError\n"),
            ("a.py", "    raise NotImplementedError(\"soon\")\n"),
            ("a.rs", "    todo!()\n"),
            ("a.rs", "    unimplemented!(\"x\");\n"),
            ("a.rs", "    // nothing yet\n\n"),
            ("a.rs", "    panic!(\"not implemented\")\n"),
            ("a.js", "  throw new Error('Not implemented');\n"),
            ("A.java", "  throw new UnsupportedOperationException();\n"),
            ("a.c", "/* TODO\n   later */\n"),
            ("a.rs", "fn f() { todo!() }\n"),
            ("a.rs", "pub fn login(&self) -> bool {\n    todo!()\n}\n"),
            ("a.py", "@staticmethod\ndef login(user):\n    pass\n"),
            ("a.py", "def login(user): ...\n"),
        ];
        for (path, text) in stubs {
            assert!(is_empty_implementation(path, &lines(text)), "{path}: {text:?}");
        }
    }

    #[test]
    fn real_code_is_not_empty() {
        let code = [
            ("a.py", "    return a + b\n"),
            ("a.py", "    # TODO: faster\n    return sorted(x)\n"),
            ("a.rs", "    let x = compute();\n    todo!()\n"),
            ("a.rs", "fn f() { 1 }\n"),
            ("a.js", "  throw new Error('bad input');\n"),
            ("a.rs", "    panic!(\"index out of range\")\n"),
            ("a.py", "def login(user):\n    return check(user)\n"),
            ("a.rs", "pub fn login(&self) -> bool {\n    self.ok\n}\n"),
        ];
        for (path, text) in code {
            assert!(!is_empty_implementation(path, &lines(text)), "{path}: {text:?}");
        }
    }
}

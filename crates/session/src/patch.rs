//! The paths a Codex `apply_patch` touches, read from the patch text.
//!
//! The format is Codex's own envelope:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path          (then `+` lines)
//! *** Update File: path       (optionally `*** Move to: new path`, then hunks)
//! *** Delete File: path
//! *** End Patch
//! ```
//!
//! Every file header names a path the patch writes, and a move writes its destination too; the
//! hook judges each one. Hunk lines (`+`, `-`, ` `, `@@`) are content and never read as headers,
//! so a patch that adds a line `*** Add File: x` to a file does not count `x`.

const FILE_HEADERS: &[&str] = &["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"];

/// Every path `patch` adds, updates, deletes or moves from or to, in order, without repeats.
pub fn touched_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        // Headers start the line; content lines start with `+`, `-`, ` ` or `@@`.
        let line = line.trim_end_matches('\r');
        let Some(path) = FILE_HEADERS.iter().find_map(|h| line.strip_prefix(h)) else { continue };
        let path = path.trim();
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_names_a_path_and_content_lines_do_not() {
        let patch = "*** Begin Patch\n\
                     *** Add File: app/new.py\n\
                     +*** Add File: not/a/header.py\n\
                     +x = 1\n\
                     *** Update File: app/calc.py\n\
                     *** Move to: app/calculator.py\n\
                     @@ def add(a, b):\n\
                     -    return a + b\n\
                     +    return b + a\n\
                     *** Delete File: app/old.py\n\
                     *** Update File: app/calc.py\n\
                     *** End Patch\n";
        assert_eq!(touched_paths(patch), ["app/new.py", "app/calc.py", "app/calculator.py", "app/old.py"]);
    }

    #[test]
    fn a_patch_without_headers_touches_nothing() {
        assert!(touched_paths("").is_empty());
        assert!(touched_paths("*** Begin Patch\n*** End Patch\n").is_empty());
    }
}

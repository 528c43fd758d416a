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
//! hook judges each one. Codex reads a header after trimming its line (a header indented by a
//! space is still applied), and older releases keep the spaces after `*** Move to:` in the
//! path; so a line is a header here whenever it is one once trimmed, and a path is judged both
//! trimmed and as written. A hunk's context line that looks like a header is judged too: that
//! may refuse a patch Codex would apply, never the other way round. Lines starting with `+` or
//! `-` are content, so a patch that adds a line `*** Add File: x` does not count `x`.

const FILE_HEADERS: &[&str] = &["*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"];

/// Every path `patch` adds, updates, deletes or moves from or to, in order, without repeats.
pub fn touched_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |path: &str| {
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_owned());
        }
    };
    for line in patch.lines() {
        let trimmed = line.trim();
        let Some(rest) = FILE_HEADERS.iter().find_map(|h| trimmed.strip_prefix(h)) else { continue };
        push(rest.trim());
        // A move's destination as older releases take it: the rest of the line, spaces and all.
        if let Some(raw) = line.trim_end_matches('\r').strip_prefix("*** Move to: ")
            && !raw.trim().is_empty()
        {
            push(raw);
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
    fn headers_codex_reads_after_trimming_count_and_spaced_paths_count_both_ways() {
        let patch = "*** Begin Patch\n \
                     *** Update File: app/calc.py\n\
                     \t*** Delete File:   app/old.py\n\
                     *** Update File: a.py\n\
                     *** Move to: app/moved.py  \n\
                     +*** Add File: not/a/header.py\n\
                     *** End Patch\n";
        let paths = touched_paths(patch);
        for p in ["app/calc.py", "app/old.py", "app/moved.py", "app/moved.py  ", "a.py"] {
            assert!(paths.iter().any(|x| x == p), "{p:?} missing from {paths:?}");
        }
        assert!(!paths.iter().any(|x| x.contains("not/a/header")), "{paths:?}");
    }

    #[test]
    fn a_heredoc_wrapped_patch_is_read_through_its_wrapper() {
        let patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: app/new.py\n+x\n*** End Patch\nEOF\n";
        assert_eq!(touched_paths(patch), ["app/new.py"]);
    }

    #[test]
    fn a_patch_without_headers_touches_nothing() {
        assert!(touched_paths("").is_empty());
        assert!(touched_paths("*** Begin Patch\n*** End Patch\n").is_empty());
    }
}

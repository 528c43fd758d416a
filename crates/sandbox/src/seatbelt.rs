//! macOS: the policy as a seatbelt profile for `sandbox-exec`, the mechanism Codex's and
//! Claude Code's own sandboxes use there. Everything is allowed but writing; writing is allowed
//! beneath the policy's trees and, in place, to its files. SBPL lets a later rule override an
//! earlier one, so the denial comes first.
//!
//! The profile is text and is tested on every platform; running it needs macOS, which no
//! machine of this project's CI is (docs/SECURITY.md says so).

use crate::Policy;

/// The program that applies a profile.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The seatbelt profile of `policy`.
pub fn profile(policy: &Policy) -> String {
    let mut out = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
    if !policy.writable_trees.is_empty() {
        out.push_str("(allow file-write*");
        for dir in &policy.writable_trees {
            out.push_str(&format!(" (subpath {})", quoted(&dir.display().to_string())));
        }
        out.push_str(")\n");
    }
    if !policy.writable_files.is_empty() {
        out.push_str("(allow file-write-data");
        for file in &policy.writable_files {
            out.push_str(&format!(" (literal {})", quoted(&file.display().to_string())));
        }
        out.push_str(")\n");
    }
    out
}

/// An SBPL string literal.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(target_os = "macos")]
pub(crate) fn support() -> crate::Support {
    if std::path::Path::new(SANDBOX_EXEC).exists() {
        crate::Support::Kernel { mechanism: "seatbelt", complete: true, detail: SANDBOX_EXEC.to_owned() }
    } else {
        crate::Support::Advisory { why: format!("{SANDBOX_EXEC} is missing") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn writes_are_denied_first_then_allowed_where_the_policy_says_with_paths_quoted() {
        let policy = Policy {
            writable_trees: vec![PathBuf::from("/tmp"), PathBuf::from("/r/target")],
            writable_files: vec![PathBuf::from("/r/a \"b\"\\c.py")],
        };
        let p = profile(&policy);
        let deny = p.find("(deny file-write*)").unwrap();
        let allow = p.find("(allow file-write* (subpath \"/tmp\") (subpath \"/r/target\"))").unwrap();
        assert!(deny < allow, "{p}");
        assert!(p.contains("(allow file-write-data (literal \"/r/a \\\"b\\\"\\\\c.py\"))"), "{p}");
        assert!(p.starts_with("(version 1)\n(allow default)\n"), "{p}");
    }

    #[test]
    fn an_empty_policy_denies_every_write() {
        assert_eq!(profile(&Policy::default()), "(version 1)\n(allow default)\n(deny file-write*)\n");
    }
}

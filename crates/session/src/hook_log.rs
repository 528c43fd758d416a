//! What the hooks refused during a session, for its report: one JSON line per refusal in the
//! work tree's git directory (`code-intel/hook-refusals/<session>.jsonl`), out of the agent's
//! reach under the kernel sandbox. Capped at [`MAX_RECORDS`] lines; a line that cannot be
//! written is lost, never the verdict. A local record: a teammate's clone has none of it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The most refusals one session's log keeps (the rest are counted by nobody: the report says
/// the log is full).
pub const MAX_RECORDS: usize = 200;

/// The most characters kept of a refused call's input and of the reason.
const MAX_TEXT: usize = 300;

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRefusal {
    pub at: String,
    /// `claude` or `codex`.
    pub client: String,
    pub tool: String,
    /// The command, the path or the patch's first line, shortened.
    pub input: String,
    /// The first line of what the hook told the agent, shortened.
    pub reason: String,
}

impl HookRefusal {
    pub fn new(client: &str, tool: &str, input: &str, reason: &str) -> HookRefusal {
        HookRefusal {
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            client: client.to_owned(),
            tool: shorten(tool),
            input: shorten(input),
            reason: shorten(reason.lines().next().unwrap_or_default()),
        }
    }
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_TEXT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The log of `session_id` in the git directory `git_dir`; None for an id that is not one of
/// ours (it names a file).
fn path(git_dir: &Path, session_id: &str) -> Option<PathBuf> {
    let plain = !session_id.is_empty()
        && session_id.len() <= 64
        && session_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    plain.then(|| git_dir.join("code-intel").join("hook-refusals").join(format!("{session_id}.jsonl")))
}

/// Appends `refusal` to the log of `session_id`, unless the log is full.
pub fn record(git_dir: &Path, session_id: &str, refusal: &HookRefusal) {
    let Some(path) = path(git_dir, session_id) else { return };
    if read(git_dir, session_id).len() >= MAX_RECORDS {
        return;
    }
    let Ok(mut line) = serde_json::to_string(refusal) else { return };
    line.push('\n');
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(&path))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        tracing::warn!("cannot log the hook's refusal in {}: {e}", path.display());
    }
}

/// The refusals logged for `session_id`, oldest first; lines that do not read as one are
/// skipped.
pub fn read(git_dir: &Path, session_id: &str) -> Vec<HookRefusal> {
    let Some(path) = path(git_dir, session_id) else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).take(MAX_RECORDS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_kept_per_session_shortened_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(1000);
        record(dir.path(), "20261128_101010_abcdef01", &HookRefusal::new("claude", "Bash", &long, "no\nmore"));
        let got = read(dir.path(), "20261128_101010_abcdef01");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].input.chars().count(), MAX_TEXT + 1);
        assert_eq!(got[0].reason, "no");
        assert!(read(dir.path(), "another").is_empty());
        record(dir.path(), "../escape", &HookRefusal::new("codex", "Bash", "x", "y"));
        assert!(!dir.path().join("code-intel/escape.jsonl").exists());
        for _ in 0..MAX_RECORDS + 5 {
            record(dir.path(), "s", &HookRefusal::new("codex", "Bash", "x", "y"));
        }
        assert_eq!(read(dir.path(), "s").len(), MAX_RECORDS);
    }
}

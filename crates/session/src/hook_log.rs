//! What the hooks saw during a session, kept in the work tree's git directory (out of the
//! agent's reach under the kernel sandbox): what they refused, for its report (one JSON line per
//! refusal, `code-intel/hook-refusals/<session>.jsonl`, capped at [`MAX_RECORDS`]), and which
//! files the client's own tools read (`code-intel/reads/<session>`, one path per line, capped
//! at [`MAX_READS`]), which count as explored. A line that cannot be written is lost, never the
//! verdict. A local record: a teammate's clone has none of it.

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
    plain_id(session_id).then(|| git_dir.join("code-intel").join("hook-refusals").join(format!("{session_id}.jsonl")))
}

fn plain_id(session_id: &str) -> bool {
    !session_id.is_empty()
        && session_id.len() <= 64
        && session_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The most reads one session's log keeps.
pub const MAX_READS: usize = 2000;

fn reads_path(git_dir: &Path, session_id: &str) -> Option<PathBuf> {
    plain_id(session_id).then(|| git_dir.join("code-intel").join("reads").join(session_id))
}

/// Notes that the client's own tool showed the files `rels` (paths relative to the work tree).
pub fn record_reads(git_dir: &Path, session_id: &str, rels: &[String]) {
    let Some(path) = reads_path(git_dir, session_id) else { return };
    let known = reads(git_dir, session_id);
    let new: Vec<&String> = rels.iter().filter(|r| !r.is_empty() && !r.contains('\n') && !known.contains(*r)).collect();
    if new.is_empty() || known.len() + new.len() > MAX_READS {
        return;
    }
    let text: String = new.iter().map(|r| format!("{r}\n")).collect();
    append(&path, &text);
}

/// Appends `text` to the file at `path` (made with its directory when missing); a failure is
/// logged and lost.
fn append(path: &Path, text: &str) {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(path))
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        tracing::warn!("cannot append to {}: {e}", path.display());
    }
}

/// The files the client's own tools read during `session_id`, as the hooks saw them.
pub fn reads(git_dir: &Path, session_id: &str) -> Vec<String> {
    let Some(path) = reads_path(git_dir, session_id) else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    text.lines().filter(|l| !l.is_empty()).take(MAX_READS).map(str::to_owned).collect()
}

/// Appends `refusal` to the log of `session_id`, unless the log is full.
pub fn record(git_dir: &Path, session_id: &str, refusal: &HookRefusal) {
    let Some(path) = path(git_dir, session_id) else { return };
    if read(git_dir, session_id).len() >= MAX_RECORDS {
        return;
    }
    let Ok(mut line) = serde_json::to_string(refusal) else { return };
    line.push('\n');
    append(&path, &line);
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
        record_reads(dir.path(), "s", &["src/a.py".into(), "src/b.py".into()]);
        record_reads(dir.path(), "s", &["src/a.py".into()]);
        assert_eq!(reads(dir.path(), "s"), ["src/a.py", "src/b.py"]);
        record_reads(dir.path(), "../x", &["src/a.py".into()]);
        assert!(reads(dir.path(), "../x").is_empty());
    }
}

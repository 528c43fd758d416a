//! What must pass before the server commits the task's work at PRE_COMMIT, as a `git commit`
//! would have to: the garbage check on what is about to be committed (a file kept with a
//! reason in the review passes), then the repository's own pre-commit hook, run against an index
//! holding exactly the tree about to be committed.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gix::ObjectId;

use code_intel_gitstate::worktree::{Change, ChangeKind};

/// How long the repository's hook may run.
const HOOK_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of the hook's output is kept for the agent.
const HOOK_OUTPUT_BYTES: usize = 4000;
/// Set for a hook the server runs: git-code-intel's own hook then leaves the garbage check to
/// the server, which knows the files kept with a reason.
pub const SERVER_COMMIT_ENV: &str = "CODE_INTEL_SERVER_COMMIT";

/// What gates the commit.
pub struct CommitGate<'a> {
    pub rules: &'a code_intel_codebase::garbage::GarbageRules,
    /// Files the review keeps with a reason: their findings do not block.
    pub kept_with_reason: &'a BTreeSet<String>,
    pub max_file_size: u64,
    /// A tree that already passed the gate (checked before the operation lock was taken, so a
    /// slow hook never holds the lock every work tree of the repository waits on): committing
    /// exactly that tree needs no second run.
    pub passed: Option<ObjectId>,
}

/// Why the commit was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRefusal {
    /// Garbage findings, one line each.
    Garbage(Vec<String>),
    /// The repository's pre-commit hook failed: its path and output.
    Hook { hook: String, output: String },
    /// The check itself failed.
    Error(String),
}

/// Checks `committed` (the changes going into `tree`) against the gate.
pub fn check(
    repo: &gix::Repository,
    root: &Path,
    gate: &CommitGate,
    committed: &[&Change],
    tree: ObjectId,
) -> Result<(), GateRefusal> {
    let contents: Vec<code_intel_codebase::garbage::Content> = committed
        .iter()
        .filter(|c| c.kind != ChangeKind::Deleted)
        .map(|c| {
            let old = c
                .old
                .filter(|(id, _)| repo.find_header(*id).map(|h| h.size()).unwrap_or(u64::MAX) <= gate.max_file_size)
                .and_then(|(id, _)| repo.find_object(id).ok())
                .map(|o| o.data.clone())
                .unwrap_or_default();
            code_intel_codebase::garbage::Content {
                path: c.path.clone(),
                old,
                new: c.content.clone().filter(|b| b.len() as u64 <= gate.max_file_size),
                size: c.size,
            }
        })
        .collect();
    let findings: Vec<code_intel_codebase::garbage::Finding> =
        code_intel_codebase::garbage::check_changes(&contents, gate.rules)
            .into_iter()
            .filter(|f| !gate.kept_with_reason.contains(&f.file))
            .collect();
    if !findings.is_empty() {
        return Err(GateRefusal::Garbage(finding_lines(&findings)));
    }
    run_hook(repo, root, tree)
}

/// Where git looks for the repository's hooks: `core.hooksPath`, else `hooks/` in the common git
/// directory (shared by every work tree of the repository).
pub fn hooks_dir(repo: &gix::Repository, root: &Path) -> PathBuf {
    let configured = repo.config_snapshot().string("core.hooksPath").map(|p| PathBuf::from(p.to_string()));
    match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => root.join(p),
        None => repo.common_dir().join("hooks"),
    }
}

/// The repository's pre-commit hook, if it has an executable one.
fn hook_path(repo: &gix::Repository, root: &Path) -> Option<PathBuf> {
    let hook = hooks_dir(repo, root).join("pre-commit");
    is_executable(&hook).then_some(hook)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

fn run_hook(repo: &gix::Repository, root: &Path, tree: ObjectId) -> Result<(), GateRefusal> {
    let Some(hook) = hook_path(repo, root) else { return Ok(()) };
    let error = |e: String| GateRefusal::Error(format!("running {}: {e}", hook.display()));
    // The hook looks at the index: give it one holding exactly what is about to be committed.
    let index_path = code_intel_gitstate::lock::state_dir(repo.git_dir()).join("commit-index");
    let mut index = repo.index_from_tree(&tree).map_err(|e| error(e.to_string()))?;
    index.set_path(&index_path);
    index.write(Default::default()).map_err(|e| error(e.to_string()))?;
    let mut child = std::process::Command::new(&hook)
        .current_dir(root)
        .env("GIT_INDEX_FILE", &index_path)
        .env(SERVER_COMMIT_ENV, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| error(e.to_string()))?;
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let readers =
        [std::thread::spawn(move || read_some(out.as_mut())), std::thread::spawn(move || read_some(err.as_mut()))];
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > HOOK_TIMEOUT => {
                // Already gone is fine: either way it is reaped below or by the system.
                if let Err(e) = child.kill().and_then(|()| child.wait().map(drop)) {
                    tracing::debug!("stopping the hook: {e}");
                }
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(error(e.to_string())),
        }
    };
    let mut output = String::new();
    for r in readers {
        output.push_str(&r.join().unwrap_or_default());
    }
    code_intel_codebase::derived::discard(&index_path);
    let hook_name = hook.display().to_string();
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(GateRefusal::Hook { hook: hook_name, output: format!("{s}\n{}", cut(&output)) }),
        None => Err(GateRefusal::Hook {
            hook: hook_name,
            output: format!("stopped after {} s\n{}", HOOK_TIMEOUT.as_secs(), cut(&output)),
        }),
    }
}

/// The start of a stream (what the agent is shown); the rest is read and dropped so the hook
/// never blocks on a full pipe.
fn read_some(stream: Option<&mut impl Read>) -> String {
    let mut buf = Vec::new();
    if let Some(s) = stream {
        // What could not be read is not shown; the hook's exit status decides.
        let read = s
            .take(HOOK_OUTPUT_BYTES as u64 * 2)
            .read_to_end(&mut buf)
            .and_then(|_| std::io::copy(s, &mut std::io::sink()));
        if let Err(e) = read {
            tracing::debug!("reading the hook's output: {e}");
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn cut(text: &str) -> String {
    if text.len() <= HOOK_OUTPUT_BYTES {
        return text.to_owned();
    }
    let mut end = HOOK_OUTPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Findings as lines for people: at most `FINDINGS_PER_FILE` per file and
/// `FINDINGS_SHOWN` in all, with how many more there are.
pub fn finding_lines(findings: &[code_intel_codebase::garbage::Finding]) -> Vec<String> {
    let mut out = Vec::new();
    let mut per_file: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut hidden = 0;
    for f in findings {
        let n = per_file.entry(f.file.as_str()).or_default();
        *n += 1;
        if *n > FINDINGS_PER_FILE || out.len() >= FINDINGS_SHOWN {
            hidden += 1;
            continue;
        }
        out.push(if f.line > 0 {
            format!("{}:{}: {}", f.file, f.line, f.why)
        } else {
            format!("{}: {}", f.file, f.why)
        });
    }
    if hidden > 0 {
        out.push(format!("… and {hidden} more"));
    }
    out
}

const FINDINGS_PER_FILE: usize = 10;
const FINDINGS_SHOWN: usize = 50;

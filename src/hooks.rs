//! Claude Code hooks: `git code-intel hook claude-pre-tool-use` and `… claude-session-start`.
//!
//! PreToolUse gets Claude Code's JSON on stdin. While a session is active it blocks (exit code
//! 2, reason on stderr, which Claude Code shows the agent) file edits that `check_write_target`
//! would refuse, and, outside READY, every shell command that is not read-only
//! ([`crate::shell_guard`]). With no active session every tool is allowed; input that is not a
//! hook event is blocked. SessionStart prints the current phase, its instruction and the phase
//! summaries, so they are re-injected after a compaction or a resume.
// Hooks answer their client (Claude Code, git) on stdout.
#![allow(clippy::print_stdout)]

use serde_json::Value;
use std::io::Read;

use crate::session::store::SessionStore;
use crate::workspace::Workspace;
use code_intel_codebase::repo::PathError;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::{self, response};

/// What the hook tells Claude Code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Block(String),
}

impl Verdict {
    /// Prints the reason and returns the exit code Claude Code expects (2 blocks).
    pub fn report(self) -> i32 {
        match self {
            Verdict::Allow => 0,
            Verdict::Block(reason) => {
                eprintln!("{reason}");
                2
            }
        }
    }
}

const EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

pub fn pre_tool_use_from_stdin(ws: &Workspace) -> Verdict {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return Verdict::Block(format!("git-code-intel: cannot read the hook input ({e}); the tool call is blocked"));
    }
    match serde_json::from_str::<Value>(&input) {
        Ok(event) => pre_tool_use(ws, &event),
        // Input that cannot be judged is not let through.
        Err(e) => Verdict::Block(format!("git-code-intel: the hook input is not JSON ({e}); the tool call is blocked")),
    }
}

pub fn pre_tool_use(ws: &Workspace, event: &Value) -> Verdict {
    let Ok(store) = SessionStore::open(ws.repo.root()) else { return Verdict::Allow };
    let Ok(Some(stored)) = store.active() else { return Verdict::Allow };
    let state = &stored.checkpoint.orchestrator_state;
    if state.is_complete() {
        return Verdict::Allow;
    }
    let tool = event.get("tool_name").and_then(Value::as_str).unwrap_or("");
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    if EDIT_TOOLS.contains(&tool) {
        let path = ["file_path", "notebook_path", "path"].iter().find_map(|k| input.get(*k).and_then(Value::as_str));
        let Some(path) = path else { return Verdict::Allow };
        let (rel, exists) = match ws.repo.resolve_maybe_new(path) {
            Ok(r) => r,
            Err(PathError::OutsideRepo { path }) => {
                let root = ws.repo.root().display().to_string();
                return Verdict::Block(ws.contract.message(
                    &code_intel_workflow::contract::catalogue::PATH_OUTSIDE_REPO,
                    &[("path", &path), ("root", &root)],
                ));
            }
            Err(PathError::GitDir { path }) => {
                return Verdict::Block(
                    ws.contract.message(&code_intel_workflow::contract::catalogue::PATH_IN_GIT_DIR, &[("path", &path)]),
                );
            }
            Err(PathError::NotFound { .. }) => return Verdict::Allow,
        };
        return match engine::check_write(&ws.contract, state, &rel, exists, true) {
            Ok(_) => Verdict::Allow,
            Err(m) => Verdict::Block(format!("{}: {} ({rel})", m.error, m.message)),
        };
    }
    if tool == "Bash" && state.phase() != Phase::Ready {
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        if let Err(why) = crate::shell_guard::check(command, &ws.config.read_only_commands) {
            let phase = state.phase().name();
            return Verdict::Block(ws.contract.message(
                &code_intel_workflow::contract::catalogue::BASH_WRITE_BLOCKED,
                &[("phase", phase), ("why", &why), ("command", command)],
            ));
        }
    }
    Verdict::Allow
}

/// `git code-intel hook pre-commit`: the staged changes checked for garbage. Returns the exit
/// status (1 blocks the commit) after printing each finding as `file:line: why`.
pub fn pre_commit(ws: &Workspace) -> i32 {
    // The server runs this hook for its own commit after its own check, which knows the files
    // the review kept with a reason.
    if std::env::var_os(crate::branches::gate::SERVER_COMMIT_ENV).is_some() {
        return 0;
    }
    let repo = match gix::open(ws.repo.root()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("git-code-intel pre-commit: not a git repository ({e}); not checking");
            return 0;
        }
    };
    let staged = match code_intel_gitstate::worktree::staged(&repo) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("git-code-intel pre-commit: cannot read the index ({e}); not checking");
            return 0;
        }
    };
    // Blobs over max_file_size are judged by their size alone, never read whole.
    let limit = ws.config.max_file_size;
    let size = |id: gix::ObjectId| repo.find_header(id).map(|h| h.size()).unwrap_or(0);
    let blob = |id: Option<gix::ObjectId>| -> Vec<u8> {
        id.filter(|id| size(*id) <= limit)
            .and_then(|id| repo.find_object(id).ok())
            .map(|o| o.data.clone())
            .unwrap_or_default()
    };
    let changes: Vec<code_intel_codebase::garbage::Content> = staged
        .iter()
        .map(|s| {
            let new_size = size(s.new);
            code_intel_codebase::garbage::Content {
                path: s.path.clone(),
                old: blob(s.old),
                new: (new_size <= limit).then(|| blob(Some(s.new))),
                size: new_size,
            }
        })
        .collect();
    let findings = code_intel_codebase::garbage::check_changes(&changes, &ws.config.garbage);
    if findings.is_empty() {
        return 0;
    }
    eprintln!("git-code-intel: this commit adds garbage ({} finding(s)):", findings.len());
    for line in finding_lines(&findings) {
        eprintln!("  {line}");
    }
    eprintln!("Fix or unstage these, or commit with --no-verify to skip the check.");
    1
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

/// The text SessionStart prints: where the session is, what to do, and what was decided.
pub fn session_start(ws: &Workspace) -> Option<String> {
    let store = SessionStore::open(ws.repo.root()).ok()?;
    let stored = store.active().ok()??;
    let status = response::for_phase(&ws.contract, &stored.checkpoint);
    let state = &stored.checkpoint.orchestrator_state;
    let mut out = format!(
        "git-code-intel session {} is active: phase {} (step {}).\nInstruction: {}\nExpected payload for submit_phase: {}\ncompaction_count: {} (send it back with +1 if you lost the previous response)\n",
        state.session_id,
        state.phase().name(),
        state.phase_state.step,
        status.instruction,
        serde_json::Value::Object(status.expected_payload),
        state.compaction_count,
    );
    let summaries = stored.checkpoint.summaries();
    if !summaries.is_empty() {
        out.push_str("Phase summaries:\n");
        for (k, v) in summaries {
            out.push_str(&format!("- {k}: {v}\n"));
        }
    }
    let rules = crate::context::project_rules(ws.repo.root(), &ws.contract);
    if !rules.summary.is_empty() {
        let from: Vec<&str> = rules.sources.iter().map(|s| s.path.as_str()).collect();
        let header = ws
            .contract
            .message(&code_intel_workflow::contract::catalogue::PROJECT_RULES_HEADER, &[("sources", &from.join(", "))]);
        out.push_str(&format!("{header}\n{}\n", rules.summary));
    }
    if let Some(note) = rules.note {
        out.push_str(&format!("{note}\n"));
    }
    Some(out)
}

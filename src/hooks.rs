//! The agents' hooks: `git code-intel hook claude-pre-tool-use`, `… codex-pre-tool-use`,
//! `… claude-session-start`, `… codex-session-start`, and git's `… pre-commit`.
//!
//! PreToolUse gets the client's JSON on stdin; each client's tool call is read into a
//! [`ToolAction`] (files it writes, or a shell command) and judged the same way. While a session
//! is active it blocks (exit code 2, reason on stderr, which both clients show the agent) file
//! writes that `check_write_target` would refuse, and, outside READY, every shell command that
//! is not read-only ([`code_intel_session::shell_guard`]), except, in the verification phases, the project's
//! test, build and lint commands ([`code_intel_codebase::verify`]). With no active session
//! every tool is allowed; input that cannot be read while a session is active is blocked, with
//! the fix named. SessionStart prints the current phase, its instruction and the phase
//! summaries, so they are re-injected at startup, after a compaction or a resume.
//!
//! What a hook does when it cannot run at all (an unknown hook name from a newer `init`, no
//! repository) is decided in `main` and documented in docs/PROTOCOL.md: a message naming the
//! fix and an exit code that does not block (1), never a usage text with the blocking 2.
// Hooks answer their client (Claude Code, git) on stdout.
#![allow(clippy::print_stdout)]

use serde_json::Value;
use std::io::Read;

use code_intel_codebase::repo::PathError;
use code_intel_session::session::store::SessionStore;
use code_intel_session::workspace::Workspace;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::{self, response};

/// What the hook tells the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Block(String),
}

impl Verdict {
    /// Prints the reason and returns the exit code the clients expect (2 blocks).
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

/// The clients whose hooks we answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    Codex,
}

/// What a tool call would do, as far as the guard is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAction {
    /// Writes (creates, changes, deletes or moves to) these paths, as the client gave them.
    Write(Vec<String>),
    /// Runs a shell command line.
    Shell(String),
    /// Anything else: reads, searches, our own MCP tools.
    Other,
}

/// Claude Code's file-writing tools and where each names its file.
const CLAUDE_EDIT_TOOLS: &[&str] = &["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// Reads one PreToolUse event of `client` into what it would do. None: the event is not a
/// tool call this hook can read (no `tool_name`).
pub fn tool_action(client: Client, event: &Value) -> Option<ToolAction> {
    let tool = event.get("tool_name").and_then(Value::as_str)?;
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let command = || shell_command(input.get("command").or_else(|| input.get("cmd")));
    // A relative path is relative to the session's directory, which may be below the root
    // (Codex's patches name files relative to it).
    let cwd = event.get("cwd").and_then(Value::as_str).map(std::path::Path::new).filter(|d| d.is_absolute());
    let anchored = |path: &str| match cwd {
        Some(dir) if std::path::Path::new(path).is_relative() => dir.join(path).display().to_string(),
        _ => path.to_owned(),
    };
    Some(match (client, tool) {
        (Client::ClaudeCode, t) if CLAUDE_EDIT_TOOLS.contains(&t) => {
            match ["file_path", "notebook_path", "path"].iter().find_map(|k| input.get(*k).and_then(Value::as_str)) {
                Some(path) => ToolAction::Write(vec![anchored(path)]),
                None => ToolAction::Other,
            }
        }
        (Client::ClaudeCode, "Bash") => ToolAction::Shell(command().unwrap_or_default()),
        // Codex names its shell tools differently by model and version; its hook calls them all
        // `Bash`. apply_patch carries the whole patch, as `command` or as the raw input.
        (Client::Codex, "Bash" | "shell" | "exec_command" | "local_shell" | "container.exec" | "unified_exec") => {
            ToolAction::Shell(command().unwrap_or_default())
        }
        (Client::Codex, "apply_patch") => {
            let text = command().or_else(|| input.get("input").and_then(Value::as_str).map(str::to_owned));
            let text = text.or_else(|| input.as_str().map(str::to_owned)).unwrap_or_default();
            ToolAction::Write(code_intel_session::patch::touched_paths(&text).iter().map(|p| anchored(p)).collect())
        }
        _ => ToolAction::Other,
    })
}

/// A shell command given as one string, or as argv (`["bash", "-lc", "…"]` is the script).
fn shell_command(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Array(argv) => {
            let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            match words.as_slice() {
                [shell, flag, script] if is_shell(shell) && matches!(*flag, "-c" | "-lc" | "-ic") => {
                    Some((*script).to_owned())
                }
                _ => Some(words.iter().map(|w| shell_quote(w)).collect::<Vec<_>>().join(" ")),
            }
        }
        _ => None,
    }
}

fn is_shell(program: &str) -> bool {
    matches!(program.rsplit('/').next(), Some("bash" | "sh" | "zsh" | "dash"))
}

/// One argv word as shell text, so the guard judges it as the word it is.
fn shell_quote(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

pub fn pre_tool_use_from_stdin(ws: &Workspace, client: Client) -> Verdict {
    let mut input = String::new();
    let read = std::io::stdin().read_to_string(&mut input);
    // With no session to guard, nothing is judged: not even input this binary cannot read.
    let Some(stored) = active_session(ws) else { return Verdict::Allow };
    let unreadable = |why: String| {
        Verdict::Block(ws.contract.message(
            &code_intel_workflow::contract::catalogue::HOOK_INPUT_UNREADABLE,
            &[("why", &why), ("session_id", &stored.checkpoint.orchestrator_state.session_id)],
        ))
    };
    if let Err(e) = read {
        return unreadable(format!("cannot read stdin: {e}"));
    }
    match serde_json::from_str::<Value>(&input) {
        Ok(event) => match tool_action(client, &event) {
            Some(action) => judge(ws, &stored, &action),
            None => unreadable("the event names no tool_name".into()),
        },
        Err(e) => unreadable(format!("not JSON: {e}")),
    }
}

/// The session the hooks guard: the active one, unless it is complete.
fn active_session(ws: &Workspace) -> Option<code_intel_session::session::store::Stored> {
    let store = SessionStore::open(ws.repo.root()).ok()?;
    let stored = store.active().ok()??;
    (!stored.checkpoint.orchestrator_state.is_complete()).then_some(stored)
}

/// Claude Code's PreToolUse event, judged (the tests' entry point).
pub fn pre_tool_use(ws: &Workspace, event: &Value) -> Verdict {
    event_verdict(ws, Client::ClaudeCode, event)
}

/// One client's PreToolUse event, judged against the active session.
pub fn event_verdict(ws: &Workspace, client: Client, event: &Value) -> Verdict {
    let Some(stored) = active_session(ws) else { return Verdict::Allow };
    match tool_action(client, event) {
        Some(action) => judge(ws, &stored, &action),
        None => Verdict::Allow,
    }
}

/// What the session allows `action` to do.
fn judge(ws: &Workspace, stored: &code_intel_session::session::store::Stored, action: &ToolAction) -> Verdict {
    let state = &stored.checkpoint.orchestrator_state;
    match action {
        ToolAction::Other => Verdict::Allow,
        ToolAction::Write(paths) => {
            for path in paths {
                if let Verdict::Block(why) = judge_write(ws, state, path) {
                    return Verdict::Block(why);
                }
            }
            Verdict::Allow
        }
        ToolAction::Shell(_) if state.phase() == Phase::Ready => Verdict::Allow,
        ToolAction::Shell(command) => {
            let verifying = matches!(state.phase(), Phase::PostImplVerify | Phase::VerifyIntervention);
            let verify = if verifying { ws.verify_commands().commands } else { Vec::new() };
            match code_intel_session::shell_guard::check(command, &ws.config.read_only_commands, &verify) {
                Ok(()) => Verdict::Allow,
                Err(why) => {
                    let phase = state.phase().name();
                    let (key, listed) = if verifying {
                        let listed = verify.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
                        (&code_intel_workflow::contract::catalogue::BASH_VERIFY_BLOCKED, listed)
                    } else {
                        (&code_intel_workflow::contract::catalogue::BASH_WRITE_BLOCKED, String::new())
                    };
                    let mut vars = vec![("phase", phase), ("why", why.as_str()), ("command", command.as_str())];
                    if verifying {
                        vars.push(("verify_commands", listed.as_str()));
                    }
                    Verdict::Block(ws.contract.message(key, &vars))
                }
            }
        }
    }
}

/// Whether the session lets `path` be written now (`check_write_target`'s rule).
fn judge_write(ws: &Workspace, state: &code_intel_workflow::engine::state::SessionState, path: &str) -> Verdict {
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
    match engine::check_write(&ws.contract, state, &rel, exists, true) {
        Ok(_) => Verdict::Allow,
        Err(m) => Verdict::Block(format!("{}: {} ({rel})", m.error, m.message)),
    }
}

/// `git code-intel hook pre-commit`: the staged changes checked for garbage. Returns the exit
/// status (1 blocks the commit) after printing each finding as `file:line: why`.
pub fn pre_commit(ws: &Workspace) -> i32 {
    // The server runs this hook for its own commit after its own check, which knows the files
    // the review kept with a reason.
    if std::env::var_os(code_intel_session::branches::gate::SERVER_COMMIT_ENV).is_some() {
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
    for line in code_intel_session::branches::gate::finding_lines(&findings) {
        eprintln!("  {line}");
    }
    eprintln!("Fix or unstage these, or commit with --no-verify to skip the check.");
    1
}

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
    let missing = code_intel_session::session::procedures::missing(ws.repo.root(), [status.instruction.as_str()]);
    if !missing.is_empty() {
        let paths = missing.iter().map(|p| p.path.as_str()).collect::<Vec<_>>().join(", ");
        let note = ws
            .contract
            .message(&code_intel_workflow::contract::catalogue::DEFAULT_PROCEDURES_IN_STATUS, &[("paths", &paths)]);
        out.push_str(&format!("{note}\n"));
    }
    let mut tail = String::new();
    let rules = code_intel_session::context::project_rules(ws.repo.root(), &ws.contract);
    if !rules.summary.is_empty() {
        let from: Vec<&str> = rules.sources.iter().map(|s| s.path.as_str()).collect();
        let header = ws
            .contract
            .message(&code_intel_workflow::contract::catalogue::PROJECT_RULES_HEADER, &[("sources", &from.join(", "))]);
        tail.push_str(&format!("{header}\n{}\n", rules.summary));
    }
    if let Some(note) = rules.note {
        tail.push_str(&format!("{note}\n"));
    }
    let summaries = stored.checkpoint.summaries();
    if !summaries.is_empty() {
        // Claude Code replaces hook output over 10,000 characters with a file path and a
        // preview: the summaries give way, evenly, so the rest arrives whole.
        let room = SESSION_START_LIMIT.saturating_sub(out.len() + tail.len() + 400);
        let per = room / summaries.len();
        let mut shortened = false;
        out.push_str("Phase summaries:\n");
        for (k, v) in summaries {
            let text = if v.chars().count() > per {
                shortened = true;
                format!("{}…", v.chars().take(per.saturating_sub(k.len() + 5)).collect::<String>())
            } else {
                v
            };
            out.push_str(&format!("- {k}: {text}\n"));
        }
        if shortened {
            out.push_str(&ws.contract.message(&code_intel_workflow::contract::catalogue::SUMMARIES_SHORTENED, &[]));
            out.push('\n');
        }
    }
    out.push_str(&tail);
    Some(out)
}

/// The most SessionStart prints, under Claude Code's 10,000-character limit on hook output.
pub const SESSION_START_LIMIT: usize = 9_500;

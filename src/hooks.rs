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
use code_intel_session::session::store::{SessionStore, Stored};
use code_intel_session::workspace::Workspace;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::{self, response};
use std::path::{Path, PathBuf};

/// What the hook tells the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Block(String),
    /// Allow, with the tool's input replaced: the client's hook answer, printed on stdout.
    Rewrite(Value),
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
            Verdict::Rewrite(answer) => {
                println!("{answer}");
                0
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
    let cwd = event_cwd(event);
    let anchored = |path: &str| anchor(cwd.as_deref(), path);
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

/// The event's `cwd`, when it is absolute: where the client's tool runs.
fn event_cwd(event: &Value) -> Option<PathBuf> {
    event.get("cwd").and_then(Value::as_str).map(PathBuf::from).filter(|d| d.is_absolute())
}

/// `path` as the client resolves it: a relative path from `base` (the directory the tool runs
/// in), when known.
fn anchor(base: Option<&Path>, path: &str) -> String {
    match base {
        Some(dir) if Path::new(path).is_relative() => dir.join(path).display().to_string(),
        _ => path.to_owned(),
    }
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

/// The most of a hook event read from stdin: more is not a tool call a client sends.
const MAX_EVENT_BYTES: u64 = 16 << 20;

/// PreToolUse from stdin. The session that guards the call is the one active in the work tree
/// of the event's `cwd`, else of the hook's own directory (`start`); a write is judged by the
/// session of the work tree that holds it. With no session anywhere every tool is allowed, not
/// even reading the input; input that cannot be read while one is active is blocked, and so is
/// everything while a session exists that cannot be read (fail closed).
pub fn pre_tool_use_from_stdin(start: &Path, client: Client) -> Verdict {
    let mut bytes = Vec::new();
    let read = std::io::stdin().take(MAX_EVENT_BYTES + 1).read_to_end(&mut bytes);
    let event: Result<Value, String> = match read {
        Err(e) => Err(format!("cannot read stdin: {e}")),
        Ok(_) if bytes.len() as u64 > MAX_EVENT_BYTES => Err(format!("over {MAX_EVENT_BYTES} bytes")),
        Ok(_) => serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}")),
    };
    let mut places: Vec<PathBuf> = event.as_ref().ok().and_then(event_cwd).into_iter().filter(|d| d.is_dir()).collect();
    places.push(start.to_owned());
    let guard = match guarding_session(&places) {
        Guard::None => {
            // No session where the call runs; a write into a work tree whose session is active
            // is still that session's to judge.
            return match event.ok().and_then(|e| tool_action(client, &e)) {
                Some(ToolAction::Write(paths)) => judge_foreign_writes(&paths),
                _ => Verdict::Allow,
            };
        }
        Guard::Unreadable(why) => return Verdict::Block(unreadable_session(start, &why)),
        Guard::Active(ws, stored) => (ws, stored),
    };
    let (ws, stored) = guard;
    let unreadable = |why: String| {
        Verdict::Block(ws.contract.message(
            &code_intel_workflow::contract::catalogue::HOOK_INPUT_UNREADABLE,
            &[("why", &why), ("session_id", &stored.checkpoint.orchestrator_state.session_id)],
        ))
    };
    let verdict = match &event {
        Ok(event) => match tool_action(client, event) {
            Some(action) => rewrite_or_judge(&ws, &stored, client, event, &action),
            None => unreadable("the event names no tool_name".into()),
        },
        Err(why) => unreadable(why.clone()),
    };
    match (&verdict, event.as_ref()) {
        (Verdict::Block(reason), event) => log_refusal(&ws, &stored, client, event.ok(), reason),
        (_, Ok(event)) => log_reads(&ws, &stored, event),
        _ => {}
    }
    verdict
}

/// Programs whose file operands an agent reads the code of: their operands that are files of
/// the work tree count as shown to it.
const READERS: &[&str] = &["cat", "head", "tail", "nl", "less", "more", "bat", "sed", "view"];

/// The files of the work tree a tool call lets the agent read (Claude Code's Read; a plain
/// `cat`, `sed -n`, `head`… of either client's shell), relative to the root.
fn read_files(ws: &Workspace, event: &Value) -> Vec<String> {
    let input = event.get("tool_input");
    let cwd = event_cwd(event);
    let candidates: Vec<String> = match event.get("tool_name").and_then(Value::as_str) {
        Some("Read") => input
            .and_then(|i| i.get("file_path"))
            .and_then(Value::as_str)
            .map(|p| anchor(cwd.as_deref(), p))
            .into_iter()
            .collect(),
        Some(_) => {
            let command = shell_command(input.and_then(|i| i.get("command").or_else(|| i.get("cmd"))));
            match command.as_deref().and_then(plain_words) {
                Some(words) if words.first().is_some_and(|w| READERS.contains(&w.as_str())) => {
                    words[1..].iter().filter(|w| !w.starts_with('-')).map(|w| anchor(cwd.as_deref(), w)).collect()
                }
                _ => Vec::new(),
            }
        }
        None => Vec::new(),
    };
    candidates
        .iter()
        .filter_map(|p| ws.repo.resolve(p).ok().filter(|abs| abs.is_file()).and_then(|abs| ws.repo.relative(&abs)))
        .collect()
}

/// Notes the files an allowed call reads, so they count as explored
/// ([`code_intel_session::hook_log`]).
fn log_reads(ws: &Workspace, stored: &Stored, event: &Value) {
    let files = read_files(ws, event);
    if files.is_empty() {
        return;
    }
    let Ok(repo) = gix::open(ws.repo.root()) else { return };
    code_intel_session::hook_log::record_reads(
        repo.git_dir(),
        &stored.checkpoint.orchestrator_state.session_id,
        &files,
    );
}

/// Keeps a refusal for the session's report ([`code_intel_session::hook_log`]).
fn log_refusal(ws: &Workspace, stored: &Stored, client: Client, event: Option<&Value>, reason: &str) {
    let Ok(repo) = gix::open(ws.repo.root()) else { return };
    let tool = event.and_then(|e| e.get("tool_name")).and_then(Value::as_str).unwrap_or("(unreadable event)");
    let input = event.and_then(|e| e.get("tool_input"));
    let what = ["command", "file_path", "notebook_path", "input", "patch"]
        .iter()
        .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str))
        .unwrap_or_default();
    let client = match client {
        Client::ClaudeCode => "claude",
        Client::Codex => "codex",
    };
    let refusal = code_intel_session::hook_log::HookRefusal::new(client, tool, what, reason);
    code_intel_session::hook_log::record(repo.git_dir(), &stored.checkpoint.orchestrator_state.session_id, &refusal);
}

/// Which session guards a tool call.
enum Guard {
    None,
    /// A session exists but cannot be read: everything is blocked.
    Unreadable(String),
    Active(Box<Workspace>, Box<Stored>),
}

/// The first of `places` inside a work tree with an active session (or one that cannot be
/// read). Each place is looked at in every work tree that encloses it, innermost first: a
/// repository made inside the session's work tree (`git init target/x`) does not hide it.
fn guarding_session(places: &[PathBuf]) -> Guard {
    // The event's directory and the hook's are usually one work tree: each is read once.
    let mut roots: Vec<PathBuf> = Vec::new();
    for root in places.iter().flat_map(|place| enclosing_work_trees(place)) {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    for root in roots {
        match session_of(&root) {
            Ok(None) => continue,
            Err(why) => return Guard::Unreadable(why),
            Ok(Some(stored)) => {
                return match Workspace::open(&root, false) {
                    Ok(ws) => Guard::Active(Box::new(ws), Box::new(stored)),
                    Err(e) => Guard::Unreadable(format!("{}: {e}", root.display())),
                };
            }
        }
    }
    Guard::None
}

/// The roots of the work trees holding `dir`, innermost first.
fn enclosing_work_trees(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut next = Some(dir.to_owned());
    while let Some(d) = next {
        let Ok(repo) = code_intel_codebase::repo::Repo::discover(&d) else { break };
        let root = repo.root().to_owned();
        if !root.join(".git").exists() || out.contains(&root) {
            break;
        }
        next = root.parent().map(Path::to_owned);
        out.push(root);
    }
    out
}

/// The unfinished session active in the work tree at `root`; Err when one exists that cannot
/// be read. Not a repository: none.
fn session_of(root: &Path) -> Result<Option<Stored>, String> {
    let Ok(store) = SessionStore::open(root) else { return Ok(None) };
    match store.active() {
        Ok(Some(stored)) if !stored.checkpoint.orchestrator_state.is_complete() => Ok(Some(stored)),
        Ok(_) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The message for a session that cannot be read, from the contract of the work tree at
/// `start` (the defaults when even that cannot be opened).
fn unreadable_session(start: &Path, why: &str) -> String {
    let key = &code_intel_workflow::contract::catalogue::HOOK_SESSION_UNREADABLE;
    match Workspace::open(start, false) {
        Ok(ws) => ws.contract.message(key, &[("why", why)]),
        Err(_) => code_intel_workflow::contract::Contract::builtin().message(key, &[("why", why)]),
    }
}

/// Writes made from a place with no session: each path inside a work tree whose session is
/// active is judged by that session.
fn judge_foreign_writes(paths: &[String]) -> Verdict {
    for path in paths {
        let p = Path::new(path);
        let Some(dir) = p.ancestors().skip(1).find(|a| a.is_dir()) else { continue };
        match guarding_session(&[dir.to_owned()]) {
            Guard::None => {}
            Guard::Unreadable(why) => return Verdict::Block(unreadable_session(dir, &why)),
            Guard::Active(ws, stored) => {
                if let Verdict::Block(why) = judge_write(&ws, &stored.checkpoint.orchestrator_state, path) {
                    return Verdict::Block(why);
                }
            }
        }
    }
    Verdict::Allow
}

/// Claude Code's PreToolUse event, judged (the tests' entry point).
pub fn pre_tool_use(ws: &Workspace, event: &Value) -> Verdict {
    event_verdict(ws, Client::ClaudeCode, event)
}

/// One client's PreToolUse event, judged against the active session.
pub fn event_verdict(ws: &Workspace, client: Client, event: &Value) -> Verdict {
    let Ok(Some(stored)) = session_of(ws.repo.root()) else { return Verdict::Allow };
    match tool_action(client, event) {
        Some(action) => rewrite_or_judge(ws, &stored, client, event, &action),
        None => Verdict::Allow,
    }
}

/// A shell command, where the kernel can confine it, runs through the sandbox runner (the
/// client's input rewritten); everything else is judged.
fn rewrite_or_judge(ws: &Workspace, stored: &Stored, client: Client, event: &Value, action: &ToolAction) -> Verdict {
    let ToolAction::Shell(command) = action else { return judge(ws, stored, action) };
    // Codex applies an `apply_patch` heredoc given to its shell itself (after an optional
    // `cd DIR &&`): its paths are judged as writes, relative to where Codex resolves them,
    // whatever the shell would do.
    if command.contains("apply_patch") || command.contains("applypatch") {
        let base = match (event_cwd(event), leading_cd(command)) {
            (Some(cwd), Some(dir)) => Some(cwd.join(dir)),
            (Some(cwd), None) => Some(cwd),
            (None, Some(dir)) => Some(ws.repo.root().join(dir)),
            (None, None) => None,
        };
        let paths =
            code_intel_session::patch::touched_paths(command).iter().map(|p| anchor(base.as_deref(), p)).collect();
        if let Verdict::Block(why) = judge(ws, stored, &ToolAction::Write(paths)) {
            return Verdict::Block(why);
        }
    }
    if !code_intel_sandbox::support().is_kernel() {
        return judge(ws, stored, action);
    }
    if is_runner_form(command, ws.repo.root()) {
        return Verdict::Allow;
    }
    let Some(runner) = runner_form(ws.repo.root(), command) else { return judge(ws, stored, action) };
    let mut input = event.get("tool_input").cloned().unwrap_or_else(|| serde_json::json!({}));
    if let Some(obj) = input.as_object_mut() {
        obj.remove("cmd");
        obj.insert("command".into(), Value::String(runner));
    }
    let mut answer = serde_json::json!({"hookEventName": "PreToolUse", "updatedInput": input});
    // Codex applies updatedInput only beside an explicit allow; Claude Code applies it alone,
    // and its own permission rules still decide.
    if client == Client::Codex {
        answer["permissionDecision"] = "allow".into();
    }
    Verdict::Rewrite(serde_json::json!({ "hookSpecificOutput": answer }))
}

/// The directory of a leading `cd DIR &&` (a plain or single-quoted word), as Codex takes it
/// before an `apply_patch` heredoc.
fn leading_cd(command: &str) -> Option<String> {
    let rest = command.trim_start().strip_prefix("cd ")?;
    let (dir, after) = rest.split_once("&&")?;
    let words = plain_words(dir.trim())?;
    (words.len() == 1 && !after.trim().is_empty()).then(|| words[0].clone())
}

/// `command` as the sandbox runner runs it for the work tree at `root`: the runner by its
/// absolute path, then `--repo ROOT -- 'COMMAND'` (or this program's `--repo ROOT sandbox --
/// 'COMMAND'` where the runner is not installed beside it). Never by name: the shell a client
/// runs a command in need not have the hook's `PATH` (Codex's login shell did not, and every
/// command then failed with "command not found"). None: this program's path is unknown.
pub fn runner_form(root: &Path, command: &str) -> Option<String> {
    let (program, subcommand) = runner_program()?;
    Some(format!(
        "{} --repo {} {subcommand}-- {}",
        shell_quote(&program),
        shell_quote(&root.display().to_string()),
        quote_always(command)
    ))
}

/// The name of the small runner program, installed beside `git-code-intel`.
pub const RUNNER: &str = "git-code-intel-sandbox";

/// How the runner form names the runner: the small runner beside this program, or this program
/// with its `sandbox` subcommand (then the second part is `"sandbox "`).
pub fn runner_program() -> Option<(String, &'static str)> {
    let exe = std::env::current_exe().ok()?;
    let small = exe.with_file_name(format!("{RUNNER}{}", std::env::consts::EXE_SUFFIX));
    Some(if small.is_file() { (small.display().to_string(), "") } else { (exe.display().to_string(), "sandbox ") })
}

/// Whether `command` is exactly the runner form for `root` (any command inside it).
pub fn is_runner_form(command: &str, root: &Path) -> bool {
    let Some(words) = plain_words(command) else { return false };
    let Some((program, subcommand)) = runner_program() else { return false };
    let is_root = |repo: &String| Path::new(repo) == root;
    match words.as_slice() {
        [named, flag, repo, dashes, _] if subcommand.is_empty() => {
            *named == program && flag == "--repo" && is_root(repo) && dashes == "--"
        }
        [named, flag, repo, sub, dashes, _] if !subcommand.is_empty() => {
            *named == program && flag == "--repo" && is_root(repo) && sub == "sandbox" && dashes == "--"
        }
        _ => false,
    }
}

/// The words of a command line made only of plain words and single-quoted text (the form
/// [`runner_form`] writes), or None when anything else appears: an operator, an expansion, a
/// double quote, a newline.
fn plain_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            '\\' if chars.peek() == Some(&'\'') => {
                chars.next();
                word.push('\'');
                in_word = true;
            }
            c if c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c) => {
                word.push(c);
                in_word = true;
            }
            _ => return None,
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// `text` in single quotes, always: one shell word whatever it holds.
fn quote_always(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// What the session allows `action` to do.
fn judge(ws: &Workspace, stored: &Stored, action: &ToolAction) -> Verdict {
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
    out.push_str(&sandbox_line(&ws.contract));
    out.push('\n');
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

/// What confines the agent's shell on this machine, in the contract's words: the kernel
/// sandbox, or the advisory guard and why.
pub fn sandbox_line(contract: &code_intel_workflow::contract::Contract) -> String {
    use code_intel_workflow::contract::catalogue::{SANDBOX_ADVISORY, SANDBOX_ENFORCED};
    match code_intel_sandbox::support() {
        support @ code_intel_sandbox::Support::Kernel { .. } => {
            contract.message(&SANDBOX_ENFORCED, &[("mechanism", &support.describe())])
        }
        code_intel_sandbox::Support::Advisory { why } => contract.message(&SANDBOX_ADVISORY, &[("why", &why)]),
    }
}

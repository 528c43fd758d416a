//! The command line: `git code-intel <command>`. Every tool is a subcommand with the MCP tool's
//! arguments as flags; `--json` prints exactly what the MCP tool returns as structured content.
// The CLI answers on stdout.
#![allow(clippy::print_stdout)]

use code_intel_workflow::contract::catalogue as msg;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use code_intel_semantic::map::{MapEntry, MapStore};
use code_intel_session::tools::definitions::FindDefinitionsParams;
use code_intel_session::tools::function_at_line::GetFunctionAtLineParams;
use code_intel_session::tools::impact::{AnalyzeImpactParams, TargetFiles};
use code_intel_session::tools::query::QueryParams;
use code_intel_session::tools::references::FindReferencesParams;
use code_intel_session::tools::search_files::SearchFilesParams;
use code_intel_session::tools::search_text::{Patterns, SearchTextParams};
use code_intel_session::tools::semantic::{
    FetchChunkDetailParams, RecordOutcomeParams, SemanticSearchParams, SyncIndexParams,
};
use code_intel_session::tools::structure::AnalyzeStructureParams;
use code_intel_session::tools::symbols::GetSymbolsParams;
use code_intel_session::tools::{self, ToolResult};
use code_intel_session::workspace::Workspace;

#[derive(Debug, Parser)]
#[command(
    name = "git-code-intel",
    bin_name = "git code-intel",
    version,
    about = "Code intelligence for coding agents, stored in git"
)]
pub struct Cli {
    /// The repository to work on (default: the one containing the current directory).
    #[arg(long, global = true, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Print the result as JSON (the MCP tool's structured content).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the active workflow session: phase, step, tasks, counters.
    Status,
    /// In PRE_COMMIT and QUALITY_REVIEW: every change of the session's task branch since its base, with diffs.
    ReviewChanges,
    /// Show a session to the person reviewing its change: Markdown, `--json`, or `--html FILE`
    ///
    /// The request and its QueryFrame, what was explored with which tools, the hypotheses, the
    /// impact, each task's evidence quoted from the commit, verification, the review decisions,
    /// the commit and merge, counters and where the time went. Markdown on stdout; `--json` the
    /// same data, versioned; `--html FILE` one self-contained page. docs/REPORT.md.
    Report {
        /// A session id, or a commit whose git-code-intel note names one (default: the last
        /// finished session).
        target: Option<String>,
        /// Also write the report as one self-contained HTML page to this file.
        #[arg(long, value_name = "FILE")]
        html: Option<std::path::PathBuf>,
    },
    /// Remove this work tree's session checkpoints (refs/worktree/code-intel/) and reset the
    /// session state, and delete stale llm_task_* branches that hold no unmerged commits (never
    /// one in use in a work tree: checked out, being rebased or bisected, or another work tree's
    /// session's).
    Clean {
        /// Also delete llm_task_* branches with unmerged commits (listed first without it).
        #[arg(long)]
        confirm: bool,
    },
    /// The manual page (roff on stdout), or with --install every page written where man finds
    /// them for this binary (`<bin>/../share/man/man1`), so `git code-intel --help` works.
    Man {
        /// Write the pages instead of printing the main one.
        #[arg(long)]
        install: bool,
        /// With --install: write them here instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// A completion script for bash, zsh, fish, elvish or powershell, on stdout.
    Completions { shell: clap_complete::Shell },
    /// Set up a repository: .code-intel/ prompts and contract, the /code skill, .mcp.json,
    /// Claude Code hooks, the Codex MCP entry and hooks, AGENTS.md and .gitignore entries; ends
    /// with the one-time step each client needs from you.
    Init {
        /// Overwrite files you edited with the defaults.
        #[arg(long)]
        force: bool,
        /// Make a plain `git fetch` stage the remote's shared refs (the Map, the session
        /// history, the OutcomeLog, the Forest, the notes) under refs/code-intel-remotes/, where
        /// this clone checks and merges them; `git code-intel share push` publishes this clone's.
        /// What a plain `git push` does is not changed.
        #[arg(long)]
        share: bool,
    },
    /// Check each client's set-up in this repository (MCP entry, hooks, procedures, approval or
    /// trust) and say what is missing; exits 1 when something is.
    Doctor,
    /// Print the phase contract in effect (the defaults with .code-intel/phase_contract.yml
    /// applied) as YAML; what the contract lint finds in it goes to stderr.
    Contract,
    /// Hooks for coding agents (reads the agent's hook JSON on stdin).
    #[command(subcommand)]
    Hook(HookCommand),
    /// Run a shell command in the kernel sandbox of the active session's phase
    ///
    /// The PreToolUse hooks turn every shell command of the agent into this form while a
    /// session is active. The command (one argument, run with `SHELL -c`) and every process it
    /// starts may write only git-ignored paths and temporary and cache directories, and in READY
    /// the explored files in place; never .git, .claude, .codex, .code-intel, .agents or
    /// .mcp.json. Landlock on Linux, seatbelt on macOS; elsewhere it refuses. With no active
    /// session the command runs as it is. docs/SECURITY.md.
    Sandbox {
        /// The shell that runs the command.
        #[arg(long, default_value = "bash", value_name = "PROGRAM")]
        shell: PathBuf,
        /// End the command, and everything it started, after this many seconds (exit 124).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// The command line, as one argument.
        command: String,
    },
    /// Serve MCP over stdio until stdin closes.
    Serve,
    /// Share the Map, the session history, the OutcomeLog, the Forest's vectors and the merge
    /// notes with a team through a remote (sessions never travel). `pull` stages the remote's
    /// under refs/code-intel-remotes/ and merges them in (checked, union merges); `push` pulls,
    /// then pushes them all at once.
    #[command(subcommand)]
    Share(ShareCommand),
    /// Share the Forest's embeddings through refs/code-intel/forest, so a teammate's clone
    /// embeds only what differs. Nothing is pushed or fetched unless asked here.
    #[command(subcommand)]
    Forest(ForestCommand),
    /// Build or refresh the symbol index and the Forest (semantic index) now, with progress on
    /// stderr, and print what they hold.
    Index {
        /// Re-parse every file and rebuild the Forest from nothing (cached embeddings are reused).
        #[arg(long)]
        rebuild: bool,
        /// Only the symbol index: leave the Forest as it is.
        #[arg(long)]
        symbols_only: bool,
        /// Only fold the symbol index's overlay into its base, if it has grown enough and no
        /// other process is doing it (what a lookup starts, detached).
        #[arg(long, hide = true)]
        background_compaction: bool,
    },
    /// Semantic search: the Map of past successes first, then the Forest of code chunks.
    #[command(name = "semantic-search", visible_alias = "semantic_search")]
    SemanticSearch(SemanticSearchParams),
    /// The whole text of a Forest chunk.
    #[command(name = "fetch-chunk-detail", visible_alias = "fetch_chunk_detail")]
    FetchChunkDetail(FetchChunkDetailParams),
    /// Record how the active (or last finished) session turned out: success teaches the Map.
    Outcome(RecordOutcomeParams),
    /// Record a new DO/DON'T summary of the project's rules in .code-intel/context.yml, with
    /// the fingerprints of the files it was made from.
    #[command(name = "update-context", visible_alias = "update_context")]
    UpdateContext(tools::context::UpdateContextParams),
    /// The Map (refs/code-intel/map): list or remove learned entries.
    #[command(subcommand)]
    Map(MapCommand),
    /// Search file contents (ripgrep engine).
    #[command(name = "search-text", visible_alias = "search_text")]
    SearchText(SearchTextArgs),
    /// Find files by glob.
    #[command(name = "search-files", visible_alias = "search_files")]
    SearchFiles(SearchFilesParams),
    /// Find where a symbol is defined.
    #[command(name = "find-definitions", visible_alias = "find_definitions")]
    FindDefinitions(FindDefinitionsParams),
    /// Find where a symbol is used.
    #[command(name = "find-references", visible_alias = "find_references")]
    FindReferences(FindReferencesParams),
    /// List symbols in a file or directory.
    #[command(name = "get-symbols", visible_alias = "get_symbols")]
    GetSymbols(GetSymbolsParams),
    /// Outline a file, or inline code.
    #[command(name = "analyze-structure", visible_alias = "analyze_structure")]
    AnalyzeStructure(AnalyzeStructureParams),
    /// The function or method enclosing a line.
    #[command(name = "get-function-at-line", visible_alias = "get_function_at_line")]
    GetFunctionAtLine(GetFunctionAtLineParams),
    /// What to verify when files change.
    #[command(name = "analyze-impact", visible_alias = "analyze_impact")]
    AnalyzeImpact {
        /// A file about to change (repeat for several).
        #[arg(long = "target-files", alias = "target-file")]
        target_files: Vec<String>,
        #[command(flatten)]
        params: AnalyzeImpactParams,
    },
    /// Plan and run the tools for a question.
    Query(QueryParams),
}

/// `search-text`: the MCP parameter `pattern` takes a string or a list, so the CLI declares its
/// own repeatable flag; every other option is [`SearchTextParams`]' own.
#[derive(Debug, Args)]
pub struct SearchTextArgs {
    /// A pattern (repeat for up to 5). A pattern starting with `-` is still a pattern.
    #[arg(long, allow_hyphen_values = true)]
    pub pattern: Vec<String>,
    #[command(flatten)]
    pub params: SearchTextParams,
}

#[derive(Debug, Subcommand)]
pub enum MapCommand {
    /// List the Map's entries.
    List,
    /// Remove entries by id.
    Remove {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ShareCommand {
    /// Fetch the remote's shared refs into refs/code-intel-remotes/REMOTE/ and merge them
    /// into this clone's, leaving out (and naming) whatever fails the checks.
    Pull {
        #[arg(long, default_value = "origin")]
        remote: String,
    },
    /// Pull, export the Forest, then push the Map, the history, the OutcomeLog, the notes and
    /// the Forest in one atomic push (retried when a teammate pushed first).
    Push {
        #[arg(long, default_value = "origin")]
        remote: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ForestCommand {
    /// Sync the Forest, then write its embeddings (int8) into refs/code-intel/forest, merged
    /// with the shared Forests this clone has (its last export and the remotes' staged ones).
    /// No network.
    Export,
    /// Sync the Forest now, taking the vectors of chunks this clone never embedded from the
    /// shared Forests (checked, spot-checked against the model); prints what it took. No network.
    Import,
    /// Fetch the remote's shared Forest, export this clone's merged with it, and push it with
    /// a lease on what was fetched (retried when a teammate pushed first).
    Push {
        #[arg(long, default_value = "origin")]
        remote: String,
    },
    /// Fetch the remote's shared refs (staged under refs/code-intel-remotes/), then import.
    Fetch {
        #[arg(long, default_value = "origin")]
        remote: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code PreToolUse: exit 2 blocks edits and shell writes the session does not allow.
    ClaudePreToolUse,
    /// Claude Code SessionStart: print the session's phase, instruction and summaries.
    ClaudeSessionStart,
    /// Codex PreToolUse: exit 2 blocks apply_patch writes and shell writes the session does not
    /// allow.
    CodexPreToolUse,
    /// Codex SessionStart: print the session's phase, instruction and summaries.
    CodexSessionStart,
    /// git pre-commit: block staged garbage (debug output, temp files, conflict markers, stubs,
    /// large binaries, secrets).
    PreCommit,
}

/// Logs go to stderr, always (stdout belongs to MCP messages or command output), at the level
/// `CODE_INTEL_LOG` names, `warn` by default. For both programs: `git-code-intel` and the runner.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CODE_INTEL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(false)
        .init();
}

/// The commands that need no opened workspace, run from `start`: the PreToolUse hooks (they
/// find the session from the event's directory) and the sandbox runner (it reads only the
/// session). None: `command` is not one of them.
pub fn run_without_workspace(command: &Command, start: &std::path::Path) -> Option<i32> {
    use crate::hooks::{Client, pre_tool_use_from_stdin};
    Some(match command {
        Command::Hook(HookCommand::ClaudePreToolUse) => pre_tool_use_from_stdin(start, Client::ClaudeCode).report(),
        Command::Hook(HookCommand::CodexPreToolUse) => pre_tool_use_from_stdin(start, Client::Codex).report(),
        Command::Sandbox { shell, command, timeout } => {
            crate::sandbox::run(start, shell, command, timeout.map(std::time::Duration::from_secs))
        }
        _ => return None,
    })
}

pub fn run_tool(ws: &Workspace, command: Command, json: bool) -> i32 {
    // Commands that read or change the session finish what a killed process left first.
    if matches!(command, Command::Status | Command::Clean { .. } | Command::ReviewChanges) {
        match code_intel_session::session::Sessions::open(ws).recover(ws) {
            Ok(Some(report)) => eprintln!("git-code-intel: {report}"),
            Ok(None) => {}
            // Outside git there are no sessions to recover: the command says so itself, once.
            Err(e)
                if e.code_and_message().0
                    == ws.contract.error_code(&code_intel_workflow::contract::catalogue::GIT_REQUIRED) => {}
            // The command goes on (status still shows what it can); the error says what to do.
            Err(e) => eprintln!("git-code-intel: {}", e.code_and_message().1),
        }
    }
    match command {
        // Handled by main before a repository is opened.
        Command::Serve | Command::Man { .. } | Command::Completions { .. } => 0,
        Command::Status => status(ws, json),
        Command::Doctor => doctor(ws, json),
        Command::Contract => {
            print!("{}", ws.contract.to_yaml());
            let issues = code_intel_workflow::contract::lint::lint(&ws.contract, &crate::mcp::vocabulary());
            for issue in &issues {
                eprintln!("lint: {issue}");
            }
            i32::from(!issues.is_empty())
        }
        Command::Clean { confirm } => {
            let removed = match code_intel_session::session::store::SessionStore::open(ws.repo.root())
                .and_then(|s| s.clean(&code_intel_session::session::cleaned_ending))
            {
                Ok(n) => n,
                Err(e) => {
                    eprintln!("error: {e}");
                    return 1;
                }
            };
            let branches =
                code_intel_session::session::Sessions::open(ws).cleanup_stale_branches(ws, "delete", confirm);
            // The sessions are gone either way; a branch cleanup that failed is reported and
            // makes the command fail, so a script does not take it for done.
            let (branches, failed) = match branches {
                Ok(b) => (serde_json::to_value(b).unwrap_or_default(), false),
                Err(e) => {
                    let (code, message) = e.code_and_message();
                    eprintln!("error: the llm_task_* branches were not cleaned up: {code}: {message}");
                    (serde_json::json!({"error": code, "message": message}), true)
                }
            };
            let out = serde_json::json!({
                "removed_sessions": removed,
                "deleted_branches": branches["deleted"],
                "kept_branches": branches["kept"],
                "message": format!("Removed {removed} session checkpoint(s); no session is active."),
            });
            let mut out = out;
            if failed {
                out["branch_cleanup_error"] = branches.clone();
            }
            if json {
                println!("{out}");
            } else {
                println!("{}", out["message"].as_str().unwrap_or_default());
                for b in branches["deleted"].as_array().into_iter().flatten() {
                    println!("deleted branch {}", b.as_str().unwrap_or_default());
                }
                for k in branches["kept"].as_array().into_iter().flatten() {
                    println!(
                        "kept branch {} ({})",
                        k["branch"].as_str().unwrap_or_default(),
                        k["reason"].as_str().unwrap_or_default()
                    );
                }
            }
            i32::from(failed)
        }
        Command::Report { target, html } => report(ws, target.as_deref(), html.as_deref(), json),
        Command::Init { force, share } => match crate::init::init(ws.repo.root(), force, share) {
            Ok(report) => {
                if share {
                    share_forest_at_init(ws);
                }
                if json {
                    println!("{}", serde_json::to_string(&report).unwrap_or_default());
                } else {
                    for r in &report {
                        let action = serde_json::to_value(&r.action).ok();
                        println!("{:<12} {}", action.as_ref().and_then(|a| a.as_str()).unwrap_or(""), r.path);
                        if let Some(note) = &r.note {
                            println!("{:<12} {note}", "");
                        }
                    }
                    if report.iter().any(|r| r.action == crate::init::Action::KeptEdited) {
                        println!("(kept_edited files hold your changes; `git code-intel init --force` replaces them)");
                    }
                    println!("{}", crate::init::where_procedures_are());
                    // What the verification phases will tell the agent to run, and why.
                    println!("{}", crate::doctor::verify_commands(ws.repo.root()).what);
                    let steps = crate::doctor::first_run_steps(ws.repo.root());
                    if !steps.is_empty() {
                        println!("\nOnce, before the tools appear in a client:");
                        for s in steps {
                            println!("- {s}");
                        }
                    }
                    println!("`git code-intel doctor` checks the set-up of each client.");
                }
                // What init refused to write is said on stderr too, and fails the command.
                let refused: Vec<&crate::init::FileReport> =
                    report.iter().filter(|r| r.action == crate::init::Action::Refused).collect();
                for r in &refused {
                    eprintln!("error: init did not write {}: {}", r.path, r.note.as_deref().unwrap_or(""));
                }
                i32::from(!refused.is_empty())
            }
            Err(e) => {
                eprintln!("error: init failed: {e}");
                1
            }
        },
        // `main` runs these before opening a workspace; reached here only from a library caller.
        c @ (Command::Hook(HookCommand::ClaudePreToolUse | HookCommand::CodexPreToolUse) | Command::Sandbox { .. }) => {
            run_without_workspace(&c, ws.repo.root()).unwrap_or(2)
        }
        Command::ReviewChanges => {
            let value = match code_intel_session::session::Sessions::open(ws).review_changes(ws) {
                Ok(v) => serde_json::to_value(v).unwrap_or_default(),
                Err(e) => {
                    if json {
                        println!("{}", serde_json::to_value(&e).unwrap_or_default());
                    }
                    let (code, message) = e.code_and_message();
                    eprintln!("error: {code}: {message}");
                    return 1;
                }
            };
            if json {
                println!("{value}");
            } else {
                for f in value["files"].as_array().into_iter().flatten() {
                    println!(
                        "{:<9} +{:<5} -{:<5} {}{}",
                        f["change"].as_str().unwrap_or(""),
                        f["additions"],
                        f["deletions"],
                        f["file"].as_str().unwrap_or(""),
                        if f["pre_existing"] == serde_json::json!(true) { "  (your uncommitted change)" } else { "" }
                    );
                }
                for g in value["garbage"].as_array().into_iter().flatten() {
                    println!(
                        "garbage   {}:{}: {}",
                        g["file"].as_str().unwrap_or(""),
                        g["line"],
                        g["why"].as_str().unwrap_or("")
                    );
                }
            }
            0
        }
        Command::Hook(HookCommand::PreCommit) => crate::hooks::pre_commit(ws),
        Command::Hook(HookCommand::ClaudeSessionStart | HookCommand::CodexSessionStart) => {
            if let Some(text) = crate::hooks::session_start(ws) {
                println!("{}", text.trim_end());
            }
            0
        }
        Command::Index { background_compaction: true, .. } => match ws.compact_if_due() {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("error: could not compact the symbol index: {e}");
                1
            }
        },
        Command::Index { rebuild, symbols_only, .. } => index(ws, rebuild, symbols_only, json),
        Command::Forest(action) => forest(ws, action, json),
        Command::Share(ShareCommand::Pull { remote }) => {
            print_report(code_intel_session::share::pull(ws.repo.root(), &remote), json)
        }
        Command::Share(ShareCommand::Push { remote }) => {
            print_report(code_intel_session::share::push(ws, &remote, code_intel_session::share::Scope::All), json)
        }
        Command::SemanticSearch(params) => emit(tools::semantic::semantic_search(ws, params), json),
        Command::FetchChunkDetail(params) => emit(tools::semantic::fetch_chunk_detail(ws, params), json),
        Command::UpdateContext(mut params) => {
            if params.summary.as_deref() == Some("-") {
                let mut text = String::new();
                if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text) {
                    eprintln!("git-code-intel: cannot read the summary from stdin: {e}");
                    return 2;
                }
                params.summary = Some(text);
            }
            params.sources = params.sources.filter(|s| !s.is_empty());
            emit(tools::context::update_context(ws, params), json)
        }
        Command::Outcome(params) => emit(tools::semantic::record_outcome(ws, params), json),
        Command::Map(MapCommand::List) => {
            let read = MapStore::open(ws.repo.root()).and_then(|m| m.read());
            match read {
                Ok(read) if json => {
                    let mut entries: Vec<MapListed> = read
                        .entries
                        .into_iter()
                        .map(|s| MapListed { source: origin_text(&s.origin), entry: s.entry })
                        .collect();
                    entries.sort_by(|a, b| a.entry.id.cmp(&b.entry.id));
                    emit::<Vec<MapListed>>(Ok(entries), true)
                }
                Ok(read) => {
                    if read.entries.is_empty() {
                        println!("The Map is empty (record a success with `git code-intel outcome success`).");
                    }
                    for s in &read.entries {
                        let e = &s.entry;
                        println!("{}  {}", e.id, e.query.split_whitespace().collect::<Vec<_>>().join(" "));
                        println!("    from     {}", origin_text(&s.origin));
                        if !e.target_feature.is_empty() {
                            println!("    target   {}", e.target_feature);
                        }
                        println!("    symbols  {}", e.symbols.join(", "));
                        println!("    files    {}", e.files.join(", "));
                    }
                    for note in &read.skipped {
                        eprintln!("left out: {note}");
                    }
                    0
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    1
                }
            }
        }
        Command::Map(MapCommand::Remove { ids }) => match MapStore::open(ws.repo.root()).and_then(|m| m.remove(&ids)) {
            Ok(removed) => {
                let missing: Vec<&String> = ids.iter().filter(|i| !removed.contains(i)).collect();
                if json {
                    println!("{}", serde_json::json!({"removed": removed, "not_found": missing}));
                } else {
                    for r in &removed {
                        println!("removed {r}");
                    }
                    for m in &missing {
                        println!("not found {m}");
                    }
                }
                i32::from(!missing.is_empty())
            }
            Err(e) => {
                eprintln!("error: {e}");
                1
            }
        },
        Command::SearchText(SearchTextArgs { pattern, mut params }) => {
            params.pattern = match pattern.len() {
                0 => None,
                1 => pattern.into_iter().next().map(Patterns::One),
                _ => Some(Patterns::Many(pattern)),
            };
            emit(tools::search_text::search_text(ws, params), json)
        }
        Command::SearchFiles(params) => emit(tools::search_files::search_files(ws, params), json),
        Command::FindDefinitions(params) => emit(tools::definitions::find_definitions(ws, params), json),
        Command::FindReferences(params) => emit(tools::references::find_references(ws, params), json),
        Command::GetSymbols(params) => emit(tools::symbols::get_symbols(ws, params), json),
        Command::AnalyzeStructure(params) => emit(tools::structure::analyze_structure(ws, params), json),
        Command::GetFunctionAtLine(params) => emit(tools::function_at_line::get_function_at_line(ws, params), json),
        Command::AnalyzeImpact { target_files, mut params } => {
            params.target_files = (!target_files.is_empty()).then_some(TargetFiles::Many(target_files));
            emit(tools::impact::analyze_impact(ws, params), json)
        }
        Command::Query(params) => emit(tools::query::query(ws, params), json),
    }
}

/// A Map entry as `map list --json` shows it: the entry and where it came from.
#[derive(Serialize)]
struct MapListed {
    #[serde(flatten)]
    entry: MapEntry,
    /// `local`, or `shared from <remote>`.
    source: String,
}

fn origin_text(origin: &code_intel_semantic::map::Origin) -> String {
    match origin {
        code_intel_semantic::map::Origin::Local => "local".into(),
        code_intel_semantic::map::Origin::Shared { remote: Some(r), .. } => format!("shared from {r}"),
        code_intel_semantic::map::Origin::Shared { remote: None, .. } => "shared".into(),
    }
}

/// `init --share`: the embeddings this clone already has go into refs/code-intel/forest, which
/// `git code-intel share push` publishes. Nothing is embedded here.
fn share_forest_at_init(ws: &Workspace) {
    let loaded = match ws.semantic.available().then(|| ws.semantic.loaded()) {
        Some(Ok(l)) => l,
        _ => {
            eprintln!("shared Forest: no embedding model here; `git code-intel share push` shares it later");
            return;
        }
    };
    if loaded.cache.lock().map_or(true, |c| c.is_empty()) {
        eprintln!("shared Forest: nothing embedded yet; run `git code-intel index`, then `git code-intel share push`");
        return;
    }
    match code_intel_semantic::share::export(ws.repo.root(), &loaded) {
        Ok(r) => eprintln!(
            "shared Forest: {} vectors in refs/code-intel/forest; `git code-intel share push` publishes them",
            r.shared
        ),
        Err(e) => eprintln!("shared Forest: not exported: {e}"),
    }
}

/// `git code-intel forest …`: the shared Forest. The transport is git's own (`git push`,
/// `git fetch`): gix has no push, and both run only on this explicit request.
fn forest(ws: &Workspace, action: ForestCommand, json: bool) -> i32 {
    let loaded = match ws.semantic.loaded() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: semantic search is not available: {e}");
            return 1;
        }
    };
    let sync = || -> Result<code_intel_semantic::sync::SyncReport, String> {
        let generation = ws.index_generation();
        ws.semantic.sync_now(&ws.repo, &ws.config, false, generation, &|_, _| {}).map_err(|e| e.to_string())
    };
    match action {
        ForestCommand::Export => print_report(
            sync().and_then(|_| code_intel_semantic::share::export(ws.repo.root(), &loaded).map_err(|e| e.to_string())),
            json,
        ),
        ForestCommand::Import => print_report(sync(), json),
        ForestCommand::Push { remote } => {
            print_report(code_intel_session::share::push(ws, &remote, code_intel_session::share::Scope::Forest), json)
        }
        ForestCommand::Fetch { remote } => {
            let pulled = code_intel_session::share::pull(ws.repo.root(), &remote);
            print_report(
                pulled.and_then(|p| {
                    sync().map(|mut r| {
                        r.shared_notes.extend(p.notes);
                        r
                    })
                }),
                json,
            )
        }
    }
}

/// Prints a command's report (YAML, or JSON with --json), or its error on stderr (exit 1).
fn print_report<T: Serialize>(result: Result<T, String>, json: bool) -> i32 {
    match result {
        Ok(report) => {
            let text = if json { serde_json::to_string(&report).ok() } else { serde_yaml::to_string(&report).ok() };
            println!("{}", text.unwrap_or_default().trim_end());
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// `git code-intel index`: the symbol index, then the Forest (when a model is installed), with
/// the Forest's progress on stderr.
fn index(ws: &Workspace, rebuild: bool, symbols_only: bool, json: bool) -> i32 {
    use std::io::IsTerminal;
    let started = std::time::Instant::now();
    let stats = ws.index_now(rebuild);
    let mut out = serde_json::json!({
        "files": stats.files,
        "symbols": stats.symbols,
        "parsed": stats.parsed,
        "removed": stats.removed,
        "skipped_too_large": stats.too_large,
        "skipped_binary": stats.binary,
    });
    let tty = std::io::stderr().is_terminal();
    let last_step = std::sync::atomic::AtomicUsize::new(0);
    let progress = |done: usize, total: usize| {
        if total == 0 {
            return;
        }
        if tty {
            let width = 30;
            let filled = done * width / total;
            eprint!("\rforest [{}{}] {done}/{total} chunks", "#".repeat(filled), "-".repeat(width - filled));
            if done >= total {
                eprintln!();
            }
        } else {
            let step = done * 10 / total;
            if step > last_step.swap(step, std::sync::atomic::Ordering::Relaxed) {
                eprintln!("forest: {done}/{total} chunks");
            }
        }
    };
    if symbols_only {
        out["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
        return emit::<serde_json::Value>(Ok(out), json);
    }
    let forest = if ws.semantic.available() {
        tools::semantic::sync_index_with(ws, SyncIndexParams { force: Some(rebuild) }, &progress)
    } else {
        Err(ws.tool_error(&msg::SEMANTIC_UNAVAILABLE, &[("error", "no embedding model installed")]).into())
    };
    out["forest"] = match forest {
        Ok(report) => serde_json::to_value(report).unwrap_or_default(),
        Err(e) => serde_json::json!({"unavailable": e.message}),
    };
    out["seconds"] = serde_json::json!(started.elapsed().as_secs_f64());
    emit::<serde_json::Value>(Ok(out), json)
}

/// `report`: Markdown (or with `--json` the report's data) on stdout, and with `--html` the page
/// written to a file.
fn report(ws: &Workspace, target: Option<&str>, html: Option<&std::path::Path>, json: bool) -> i32 {
    use code_intel_session::report;
    let made = match report::load(ws.repo.root(), target) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return match e {
                report::Error::NotFound(_) => 2,
                _ => 1,
            };
        }
    };
    if let Some(path) = html
        && let Err(e) = code_intel_gitstate::write_atomically(path, report::html(&made).as_bytes())
    {
        eprintln!("error: {e}");
        return 1;
    }
    if json {
        match serde_json::to_string_pretty(&made) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return 1;
            }
        }
    } else if html.is_none() {
        print!("{}", report::markdown(&made));
    } else if let Some(path) = html {
        println!("wrote {}", path.display());
    }
    0
}

/// `git code-intel status`: the session as get_session_status sees it, for people or as JSON.
fn status(ws: &Workspace, json: bool) -> i32 {
    let sessions = code_intel_session::session::Sessions::open(ws);
    let value = match sessions.status(ws, None, false) {
        Ok(v) => serde_json::to_value(v).unwrap_or_default(),
        Err(e) => serde_json::to_value(e).unwrap_or_default(),
    };
    if json {
        println!("{value}");
        return 0;
    }
    if value["active"] != serde_json::json!(true) {
        println!("{}", value["message"].as_str().unwrap_or("No active session."));
        return 0;
    }
    let flags: Vec<String> = value["flags"]
        .as_object()
        .map(|f| {
            f.iter()
                .filter(|(k, v)| {
                    *v == &serde_json::json!(true) || (k.as_str() == "gate_level" && v.as_str() == Some("full"))
                })
                .map(|(k, v)| if k == "gate_level" { format!("gate={}", v.as_str().unwrap_or("")) } else { k.clone() })
                .collect()
        })
        .unwrap_or_default();
    println!("session      {}", value["session_id"].as_str().unwrap_or(""));
    println!("intent       {}", value["intent"].as_str().unwrap_or(""));
    println!("flags        {}", if flags.is_empty() { "(none)".to_owned() } else { flags.join(", ") });
    println!("phase        {} (step {})", value["phase"].as_str().unwrap_or(""), value["step"]);
    if let Some(branch) = value["task_branch"].as_str() {
        println!("branch       {branch} (from {})", value["base_branch"].as_str().unwrap_or("?"));
    }
    if let Some(progress) = value.get("task_progress").filter(|p| !p.is_null()) {
        println!("tasks        {}/{} completed", progress["completed"], progress["total"]);
        for t in progress["tasks"].as_array().into_iter().flatten() {
            println!(
                "  {:<12} {:<9} checklist {}/{}  failures {}",
                t["id"].as_str().unwrap_or(""),
                t["status"].as_str().unwrap_or(""),
                t["checklist_done"],
                t["checklist_total"],
                t["failure_count"]
            );
        }
    }
    let c = &value["counters"];
    println!(
        "counters     verification failures {}, quality reverts {}, interventions {}",
        c["verification_failure_count"], c["quality_revert_count"], c["intervention_count"]
    );
    println!("compaction   {}", value["compaction_count"]);
    println!("explored     {} file(s)", value["explored_files"]);
    0
}

fn emit<T: Serialize>(result: ToolResult<T>, json: bool) -> i32 {
    match result {
        Ok(value) => {
            let text = if json {
                serde_json::to_string(&value).map_err(|e| e.to_string())
            } else {
                serde_yaml::to_string(&value).map_err(|e| e.to_string())
            };
            match text {
                Ok(text) => {
                    println!("{}", text.trim_end());
                    0
                }
                Err(e) => {
                    eprintln!("error: could not render the result: {e}");
                    1
                }
            }
        }
        Err(err) => {
            if json {
                println!("{}", serde_json::to_string(&err).unwrap_or_default());
            }
            eprintln!("error: {}: {}", err.error, err.message);
            1
        }
    }
}

/// `git code-intel doctor`: each check as a line (or all as JSON); 1 when one is missing.
fn doctor(ws: &Workspace, json: bool) -> i32 {
    let checks = crate::doctor::checks(ws.repo.root());
    if json {
        println!("{}", serde_json::to_string(&checks).unwrap_or_default());
    } else {
        for c in &checks {
            let status = serde_json::to_value(&c.status).ok();
            let status = status.as_ref().and_then(|s| s.as_str()).unwrap_or("");
            let client = crate::doctor::client_title(c.client);
            if c.fix.is_empty() {
                println!("{status:<8} {client}: {}", c.what);
            } else {
                println!("{status:<8} {client}: {}\n         fix: {}", c.what, c.fix);
            }
        }
    }
    i32::from(checks.iter().any(|c| c.status == crate::doctor::Status::Missing))
}

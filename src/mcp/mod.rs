//! The MCP stdio server: translates `tools/call` requests into [`code_intel_session::tools`] calls.
//! Nothing but MCP messages goes to stdout; logs go to stderr. [`transport`] reads and writes
//! the messages, and answers what it cannot read.

pub mod arguments;
pub mod portable;
pub mod transport;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResponse, CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};

use code_intel_semantic::sync::SyncReport;
use code_intel_session::session::{SessionResult, Sessions, StartRequest};
use code_intel_session::tools::context::{UpdateContextOutput, UpdateContextParams};
use code_intel_session::tools::definitions::{FindDefinitionsOutput, FindDefinitionsParams};
use code_intel_session::tools::function_at_line::{GetFunctionAtLineOutput, GetFunctionAtLineParams};
use code_intel_session::tools::impact::{AnalyzeImpactOutput, AnalyzeImpactParams};
use code_intel_session::tools::page::MAX_RESPONSE_BYTES;
use code_intel_session::tools::query::{QueryOutput, QueryParams};
use code_intel_session::tools::references::{FindReferencesOutput, FindReferencesParams};
use code_intel_session::tools::reveals::Reveals;
use code_intel_session::tools::search_files::{SearchFilesOutput, SearchFilesParams};
use code_intel_session::tools::search_text::{SearchTextOutput, SearchTextParams};
use code_intel_session::tools::semantic::{
    ChunkDetail, FetchChunkDetailParams, RecordOutcomeOutput, RecordOutcomeParams, SemanticSearchOutput,
    SemanticSearchParams, SyncIndexParams,
};
use code_intel_session::tools::structure::{AnalyzeStructureOutput, AnalyzeStructureParams};
use code_intel_session::tools::symbols::{GetSymbolsOutput, GetSymbolsParams};
use code_intel_session::tools::{self, ToolError, ToolResult};
use code_intel_session::workspace::Workspace;
use code_intel_workflow::engine::registry;
use code_intel_workflow::engine::state::Flags;

/// A tool's refusal as its MCP answer: an `isError` result whose structured content is the
/// contract's error object. (A wrapper because the trait is rmcp's and the error the session
/// crate's.)
#[derive(Debug)]
pub struct Refusal(ToolError);

impl IntoCallToolResult for Refusal {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        let value = serde_json::to_value(&self.0).unwrap_or_default();
        Ok(CallToolResult::structured_error(value).into())
    }
}

#[derive(Clone)]
pub struct CodeIntelServer {
    ws: Arc<Workspace>,
    sessions: Arc<Sessions>,
    tool_router: ToolRouter<Self>,
}

impl CodeIntelServer {
    pub fn new(ws: Workspace) -> Self {
        let sessions = Sessions::open(&ws);
        match sessions.recover(&ws) {
            Ok(Some(report)) => tracing::warn!("at start: {report}"),
            Ok(None) => {}
            Err(e) => tracing::warn!("at start: {}", e.code_and_message().1),
        }
        lint_project_contract(&ws);
        if ws.config.sync_on_start && ws.semantic.available() {
            // sync_on_start: bring the Forest up to date in the background while the agent
            // starts its session; searches made meanwhile get partial results.
            let semantic = Arc::clone(&ws.semantic);
            let (repo, config) = (ws.repo.clone(), ws.config.clone());
            let spawned = std::thread::Builder::new().name("forest-load".into()).spawn(move || {
                if let Err(e) = semantic.loaded() {
                    tracing::warn!("semantic search unavailable: {e}");
                    return;
                }
                if semantic.needs_sync(&config, u64::MAX)
                    && let Some(handle) = semantic.start_sync(repo, config, u64::MAX)
                    && handle.join().is_err()
                {
                    tracing::warn!("the Forest sync stopped on a panic");
                }
            });
            if let Err(e) = spawned {
                tracing::warn!("cannot start the Forest sync: {e}");
            }
        }
        CodeIntelServer { ws: Arc::new(ws), sessions: Arc::new(sessions), tool_router: annotated_router() }
    }

    /// Runs a code-intelligence tool on the blocking pool (parsing and searching are
    /// CPU-bound) and records the call, with the files it returned, for the active session.
    /// (The rmcp macros derive the outputSchema only from a literal `Result<Json<T>, E>` return
    /// type, so the tool methods below spell it out.)
    async fn run<P: serde::Serialize + Send + 'static, T: Send + serde::Serialize + Reveals + 'static>(
        &self,
        name: &'static str,
        params: P,
        f: impl FnOnce(&Workspace, P) -> ToolResult<T> + Send + 'static,
    ) -> Result<Json<T>, Refusal> {
        let ws = Arc::clone(&self.ws);
        let sessions = Arc::clone(&self.sessions);
        let task = move || {
            let mut call = served_call(name, &params);
            let started = std::time::Instant::now();
            let result = f(&ws, params);
            call.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            if let Err(e) = &result {
                call.error = Some(e.error.clone());
                call.detail = Some(cut(&e.message));
            }
            let revealed = match &result {
                Ok(output) if registry::reveals_content(name) => output.revealed_files(),
                _ => Vec::new(),
            };
            sessions.record_tool(&ws, name, revealed, Some(call));
            match result {
                Ok(output) => within_limit(&ws, name, &output).map(|()| output),
                Err(error) => Err(within_limit(&ws, name, &error).err().unwrap_or(error)),
            }
        };
        match tokio::task::spawn_blocking(task).await {
            Ok(result) => result.map(Json).map_err(Refusal),
            Err(e) => {
                Err(Refusal(ToolError { error: "internal_error".into(), message: format!("tool task failed: {e}") }))
            }
        }
    }

    /// Runs a session tool: its answer is one JSON object, an `isError` result when refused.
    async fn run_session<T: serde::Serialize + Send + 'static>(
        &self,
        name: &'static str,
        args: serde_json::Value,
        f: impl FnOnce(&Workspace, &Sessions) -> SessionResult<T> + Send + 'static,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let ws = Arc::clone(&self.ws);
        let sessions = Arc::clone(&self.sessions);
        let task = move || {
            sessions.record_tool(&ws, name, Vec::new(), None);
            let mut call = served_call(name, &args);
            let started = std::time::Instant::now();
            let answer = f(&ws, &sessions);
            call.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            if let Err(e) = &answer {
                let (code, message) = e.code_and_message();
                call.error = Some(code.to_owned());
                call.detail = Some(cut(message));
            }
            // An accepted submission is its trail step, and a new session has no step yet; every
            // other call (a refused submission too) is kept with the step it was made in.
            if !(matches!(name, "submit_phase" | "start_session") && call.error.is_none()) {
                sessions.record_tool(&ws, name, Vec::new(), Some(call));
            }
            let size = match &answer {
                Ok(value) => serde_json::to_vec(value).map_or(0, |v| v.len()),
                Err(error) => serde_json::to_vec(error).map_or(0, |v| v.len()),
            };
            (answer, size, ws)
        };
        let json = |v: Result<serde_json::Value, serde_json::Error>| {
            v.map_err(|e| rmcp::ErrorData::internal_error(format!("cannot serialize the answer: {e}"), None))
        };
        match tokio::task::spawn_blocking(task).await {
            Ok((_, size, ws)) if size > MAX_RESPONSE_BYTES => {
                let error = too_large(&ws, name, size);
                Ok(CallToolResult::structured_error(json(serde_json::to_value(error))?))
            }
            Ok((Ok(value), _, _)) => Ok(CallToolResult::structured(json(serde_json::to_value(value))?)),
            Ok((Err(error), _, _)) => Ok(CallToolResult::structured_error(json(serde_json::to_value(error))?)),
            Err(e) => Err(rmcp::ErrorData::internal_error(format!("session task failed: {e}"), None)),
        }
    }
}

/// A call as the session's trail keeps it: the tool, when, and its arguments cut short.
fn served_call(tool: &str, params: &impl serde::Serialize) -> code_intel_workflow::engine::state::ServedCall {
    code_intel_workflow::engine::state::ServedCall {
        tool: tool.to_owned(),
        args: cut(&compact_args(params)),
        at: code_intel_session::session::now(),
        ..Default::default()
    }
}

/// A call's arguments as compact JSON, the ones left unset (null) out.
fn compact_args(params: &impl serde::Serialize) -> String {
    let mut value = serde_json::to_value(params).unwrap_or_default();
    if let Some(fields) = value.as_object_mut() {
        fields.retain(|_, v| !v.is_null());
    }
    value.to_string()
}

/// Text a trail keeps: at most 300 bytes, then an ellipsis.
fn cut(text: &str) -> String {
    const MAX: usize = 300;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The contract's `response_too_large` error, when `answer` is over the limit on one answer:
/// every tool pages its lists, but an argument it echoes can be as large as the request.
fn within_limit(ws: &Workspace, tool: &str, answer: &impl serde::Serialize) -> Result<(), ToolError> {
    let size = serde_json::to_vec(answer).map_or(0, |v| v.len());
    if size > MAX_RESPONSE_BYTES { Err(too_large(ws, tool, size)) } else { Ok(()) }
}

fn too_large(ws: &Workspace, tool: &str, size: usize) -> ToolError {
    let (size, limit) = (size.to_string(), MAX_RESPONSE_BYTES.to_string());
    ws.tool_error(
        &code_intel_workflow::contract::catalogue::RESPONSE_TOO_LARGE,
        &[("tool", tool), ("size", &size), ("limit", &limit)],
    )
    .into()
}

#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct StartSessionParams {
    /// IMPLEMENT, MODIFY, INVESTIGATE or QUESTION.
    pub intent: String,
    /// The user's request, verbatim.
    pub query: String,
    /// The repository; only "." (this server's repository) is accepted.
    pub repo_path: Option<String>,
    /// auto (a) or full (f): with full, every exploration phase runs whatever Q1-Q3 say.
    pub gate_level: Option<String>,
    /// Skip exploration (steps 5-11), keep the task branch.
    pub fast: Option<bool>,
    /// Skip exploration, no task branch, no PRE_COMMIT/QUALITY_REVIEW/MERGE.
    pub quick: Option<bool>,
    /// Skip POST_IMPL_VERIFY.
    pub no_verify: Option<bool>,
    /// Skip QUALITY_REVIEW.
    pub no_quality: Option<bool>,
    /// Skip DOCUMENT_RESEARCH.
    pub no_doc_research: Option<bool>,
    /// Skip VERIFY_INTERVENTION.
    pub no_intervention: Option<bool>,
    /// End after exploration.
    pub only_explore: Option<bool>,
    /// Run POST_IMPL_VERIFY only.
    pub only_verify: Option<bool>,
}

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct SubmitPhaseParams {
    /// The payload for the current phase, as given by `expected_payload` (an object, or a string
    /// holding one).
    #[schemars(schema_with = "payload_schema")]
    pub data: serde_json::Value,
}

/// A phase payload: an object whose shape the current phase's `expected_payload` gives, or a
/// string holding one.
fn payload_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"anyOf": [{"type": "object", "additionalProperties": true}, {"type": "string"}]})
}

#[derive(Debug, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct GetSessionStatusParams {
    pub repo_path: Option<String>,
    /// Drop what this server holds in memory for the session and reload it from the checkpoint.
    pub discard_active: Option<bool>,
}

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct CheckWriteTargetParams {
    /// The file about to be written, relative to the repository root.
    pub file_path: String,
    /// Allow a new file in a directory that holds an explored file (default true).
    pub allow_new_files: Option<bool>,
}

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct CleanupStaleBranchesParams {
    /// "delete" (default) removes task branches; "merge" first merges the current task branch
    /// into its base.
    pub action: Option<String>,
}

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct RunCheckParams {
    /// A verify command, exactly as the instruction lists it.
    pub command: String,
    /// One test file or test name (`tests/test_calc.py::test_div`).
    pub selector: Option<String>,
}

#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct AddExploredFilesParams {
    /// Files you were shown, to add to the explored set (READY only).
    pub files: Vec<String>,
}

#[tool_router]
impl CodeIntelServer {
    #[tool(
        name = "search_text",
        description = "Use to find text in files: an error message, a string, a call you can spell as a regex (or literal with fixed_strings). Up to 5 patterns in one pass; respects .gitignore; matches with optional context lines, paged by max_results/offset."
    )]
    async fn search_text(
        &self,
        Parameters(p): Parameters<SearchTextParams>,
    ) -> Result<Json<SearchTextOutput>, Refusal> {
        self.run("search_text", p, tools::search_text::search_text).await
    }

    #[tool(
        name = "search_files",
        description = "Use to find files by name or path glob (`*.rs`, `src/**/test_*.py`) when you do not know where something lives. Respects .gitignore."
    )]
    async fn search_files(
        &self,
        Parameters(p): Parameters<SearchFilesParams>,
    ) -> Result<Json<SearchFilesOutput>, Refusal> {
        self.run("search_files", p, tools::search_files::search_files).await
    }

    #[tool(
        name = "find_definitions",
        description = "Use first when you know a name: where a function, class or type is defined (12 languages), with kind, file, line range, scope and signature."
    )]
    async fn find_definitions(
        &self,
        Parameters(p): Parameters<FindDefinitionsParams>,
    ) -> Result<Json<FindDefinitionsOutput>, Refusal> {
        self.run("find_definitions", p, tools::definitions::find_definitions).await
    }

    #[tool(
        name = "find_references",
        description = "Use before changing a symbol, to see every place that uses it in code (not comments, strings or the definition), each with its enclosing function or class. Pages of 50 (`limit`: up to 500), code before tests; `callers` names the definitions using it most."
    )]
    async fn find_references(
        &self,
        Parameters(p): Parameters<FindReferencesParams>,
    ) -> Result<Json<FindReferencesOutput>, Refusal> {
        self.run("find_references", p, tools::references::find_references).await
    }

    #[tool(
        name = "get_symbols",
        description = "Use to survey what a file or directory defines, optionally only one kind (function, class, …) or language."
    )]
    async fn get_symbols(
        &self,
        Parameters(p): Parameters<GetSymbolsParams>,
    ) -> Result<Json<GetSymbolsOutput>, Refusal> {
        self.run("get_symbols", p, tools::symbols::get_symbols).await
    }

    #[tool(
        name = "analyze_structure",
        description = "Use to understand one file without reading it all: its functions, classes (structs, traits, interfaces, enums), imports and exports with line ranges. Also takes inline `code` with `language`."
    )]
    async fn analyze_structure(
        &self,
        Parameters(p): Parameters<AnalyzeStructureParams>,
    ) -> Result<Json<AnalyzeStructureOutput>, Refusal> {
        self.run("analyze_structure", p, tools::structure::analyze_structure).await
    }

    #[tool(
        name = "get_function_at_line",
        description = "Use when you have a file:line (a stack trace, a search hit) and need the function or method around it, with its range and signature."
    )]
    async fn get_function_at_line(
        &self,
        Parameters(p): Parameters<GetFunctionAtLineParams>,
    ) -> Result<Json<GetFunctionAtLineOutput>, Refusal> {
        self.run("get_function_at_line", p, tools::function_at_line::get_function_at_line).await
    }

    #[tool(
        name = "analyze_impact",
        description = "Use before changing files, to know what else to check: must_verify: source files that call, import or reference their symbols; should_verify: tests, configs and docs that mention them; within_targets: uses inside the targets themselves; each with why."
    )]
    async fn analyze_impact(
        &self,
        Parameters(p): Parameters<AnalyzeImpactParams>,
    ) -> Result<Json<AnalyzeImpactOutput>, Refusal> {
        self.run("analyze_impact", p, tools::impact::analyze_impact).await
    }

    #[tool(
        name = "query",
        description = "Use for an open question when you do not know which tool fits: it plans calls to the other tools from the question, symbol and file_path, runs them, and returns the plan with the results."
    )]
    async fn query(&self, Parameters(p): Parameters<QueryParams>) -> Result<Json<QueryOutput>, Refusal> {
        self.run("query", p, tools::query::query).await
    }

    #[tool(
        name = "semantic_search",
        description = "Use to find code by meaning when you do not know its names (and in the SEMANTIC phase). collection auto (default) searches the Map of past successes first: a hit scoring >= 0.7 answers with skip_forest true; otherwise the Forest of code chunks (embeddings fused with BM25). Hits carry a snippet; partial is true while a sync runs."
    )]
    async fn semantic_search(
        &self,
        Parameters(p): Parameters<SemanticSearchParams>,
    ) -> Result<Json<SemanticSearchOutput>, Refusal> {
        self.run("semantic_search", p, tools::semantic::semantic_search).await
    }

    #[tool(
        name = "fetch_chunk_detail",
        description = "Use after semantic_search to read the whole text of a hit, by its chunk_id."
    )]
    async fn fetch_chunk_detail(
        &self,
        Parameters(p): Parameters<FetchChunkDetailParams>,
    ) -> Result<Json<ChunkDetail>, Refusal> {
        self.run("fetch_chunk_detail", p, tools::semantic::fetch_chunk_detail).await
    }

    #[tool(
        name = "sync_index",
        description = "Use when semantic_search says its index is partial or stale: brings the Forest (the semantic index) up to date now, embedding only changed files. force rebuilds it (cached embeddings are reused)."
    )]
    async fn sync_index(&self, Parameters(p): Parameters<SyncIndexParams>) -> Result<Json<SyncReport>, Refusal> {
        self.run("sync_index", p, tools::semantic::sync_index).await
    }

    #[tool(
        name = "record_outcome",
        description = "Use when the user says how the active (or last finished) session turned out: records success, failure or partial in the OutcomeLog (refs/code-intel/logs/outcomes); a success also teaches the Map (refs/code-intel/map) the session's query, target, files and symbols."
    )]
    async fn record_outcome(
        &self,
        Parameters(p): Parameters<RecordOutcomeParams>,
    ) -> Result<Json<RecordOutcomeOutput>, Refusal> {
        self.run("record_outcome", p, tools::semantic::record_outcome).await
    }

    #[tool(
        name = "update_context",
        description = "Use when the project's rules are missing or a session says their sources changed: records a short DO:/DON'T: list made from CLAUDE.md, AGENTS.md or the files project_rules names in .code-intel/context.yml, with each source's fingerprint. Other keys and comments are kept."
    )]
    async fn update_context(
        &self,
        Parameters(p): Parameters<UpdateContextParams>,
    ) -> Result<Json<UpdateContextOutput>, Refusal> {
        self.run("update_context", p, tools::context::update_context).await
    }

    #[tool(
        name = "start_session",
        description = "Use first, before any research or change for a task: starts a workflow session. The server then leads phase by phase: follow each response's instruction and answer with submit_phase in the expected_payload shape."
    )]
    async fn start_session(
        &self,
        Parameters(p): Parameters<StartSessionParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let req = StartRequest {
            intent: p.intent,
            query: p.query,
            repo_path: p.repo_path,
            gate_level: p.gate_level,
            flags: Flags {
                gate_level: Default::default(),
                fast: p.fast.unwrap_or(false),
                quick: p.quick.unwrap_or(false),
                no_verify: p.no_verify.unwrap_or(false),
                no_quality: p.no_quality.unwrap_or(false),
                no_doc_research: p.no_doc_research.unwrap_or(false),
                no_intervention: p.no_intervention.unwrap_or(false),
                only_explore: p.only_explore.unwrap_or(false),
                only_verify: p.only_verify.unwrap_or(false),
            },
        };
        self.run_session("start_session", serde_json::json!({}), move |ws, s| s.start(ws, req)).await
    }

    #[tool(
        name = "submit_phase",
        description = "Use to finish every phase: send the payload the last response's expected_payload describes (always with summary, and tools_used where asked). The server validates it, decides the next phase and returns its instruction."
    )]
    async fn submit_phase(
        &self,
        Parameters(p): Parameters<SubmitPhaseParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        // A refused payload is kept in the trail (cut short), so the report shows what was refused.
        let payload = p.data.clone();
        self.run_session("submit_phase", payload, move |ws, s| s.submit(ws, p.data)).await
    }

    #[tool(
        name = "get_session_status",
        description = "Use after a context loss or a restart, or when unsure what comes next: the active session's phase, step, instruction, expected_payload, task progress and phase summaries."
    )]
    async fn get_session_status(
        &self,
        Parameters(p): Parameters<GetSessionStatusParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let discard = p.discard_active.unwrap_or(false);
        self.run_session("get_session_status", serde_json::json!({"discard_active": discard}), move |ws, s| {
            s.status(ws, p.repo_path.as_deref(), discard)
        })
        .await
    }

    #[tool(
        name = "check_write_target",
        description = "Use before every file edit: says whether the session allows writing that path (only in READY, and only explored files or new files in an explored directory)."
    )]
    async fn check_write_target(
        &self,
        Parameters(p): Parameters<CheckWriteTargetParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let allow_new = p.allow_new_files.unwrap_or(true);
        let args = serde_json::json!({"file_path": p.file_path, "allow_new_files": allow_new});
        self.run_session("check_write_target", args, move |ws, s| s.check_write_target(ws, &p.file_path, allow_new))
            .await
    }

    #[tool(
        name = "review_changes",
        description = "Use in PRE_COMMIT and QUALITY_REVIEW: every change since the task branch's base (committed, staged, unstaged, untracked), with change type, line stats and a unified diff."
    )]
    async fn review_changes(&self) -> Result<CallToolResult, rmcp::ErrorData> {
        self.run_session("review_changes", serde_json::json!({}), |ws, s| s.review_changes(ws)).await
    }

    #[tool(
        name = "cleanup_stale_branches",
        description = "Use when start_session reports llm_task_* branches left by earlier sessions: deletes merged ones and lists unmerged ones, which only the user deletes (`git code-intel clean --confirm`); action \"merge\" first merges the current task branch into its base."
    )]
    async fn cleanup_stale_branches(
        &self,
        Parameters(p): Parameters<CleanupStaleBranchesParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let action = p.action.unwrap_or_else(|| "delete".into());
        // Unmerged commits are deleted only from the user's terminal (`clean --confirm`), never
        // on the agent's word.
        let args = serde_json::json!({"action": action});
        self.run_session("cleanup_stale_branches", args, move |ws, s| s.cleanup_stale_branches(ws, &action, false))
            .await
    }

    #[tool(
        name = "run_check",
        description = "Use to run a verify command the instruction lists: the server runs it under the sandbox, records the run (verification is judged by it) and answers exit code, counts and failing tests."
    )]
    async fn run_check(&self, Parameters(p): Parameters<RunCheckParams>) -> Result<CallToolResult, rmcp::ErrorData> {
        let args = serde_json::json!({"command": p.command, "selector": p.selector});
        // This program's path is unknown only where /proc is not: the runner is then looked up
        // on PATH, and a failure to start it is the answer.
        let (program, subcommand) =
            crate::hooks::runner_program().unwrap_or_else(|| (crate::hooks::RUNNER.to_owned(), ""));
        let runner =
            code_intel_session::session::Runner { program: program.into(), subcommand: !subcommand.is_empty() };
        self.run_session("run_check", args, move |ws, s| s.run_check(ws, &p.command, p.selector.as_deref(), &runner))
            .await
    }

    #[tool(
        name = "add_explored_files",
        description = "Use in READY when check_write_target refuses a file you were shown (by a code-intel tool, or your client's Read): adds it to the explored set so it may be written. A file never shown is refused: look at it first (get_symbols)."
    )]
    async fn add_explored_files(
        &self,
        Parameters(p): Parameters<AddExploredFilesParams>,
    ) -> Result<CallToolResult, rmcp::ErrorData> {
        let args = serde_json::json!({"files": p.files});
        self.run_session("add_explored_files", args, move |ws, s| s.add_explored_files(ws, &p.files)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeIntelServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("git-code-intel", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Code intelligence for this repository: search_text, search_files, find_definitions, \
                 find_references, get_symbols, analyze_structure, get_function_at_line, analyze_impact, query, \
                 semantic_search, fetch_chunk_detail, sync_index, record_outcome, update_context. \
                 Workflow: start_session, then submit_phase for every phase (follow each response's \
                 instruction); get_session_status to recover. All paths are relative to the repository root.",
            )
    }
}

/// The server's tools, each annotated from the one tool registry
/// ([`code_intel_workflow::engine::registry`]): read-only, destructive, idempotent, and closed-world.
pub fn annotated_router() -> ToolRouter<CodeIntelServer> {
    let mut router = CodeIntelServer::tool_router();
    for (name, route) in router.map.iter_mut() {
        let Some(spec) = registry::get(name) else {
            tracing::warn!("tool {name} is served but missing from the registry");
            continue;
        };
        route.attr.annotations = Some(
            rmcp::model::ToolAnnotations::new()
                .read_only(spec.read_only())
                .destructive(spec.destructive)
                .idempotent(spec.idempotent)
                .open_world(false),
        );
        // The session tools answer through `run_session`, not `Json<T>`, so the macros cannot
        // see what they return: their output schemas are set here, from the reply types.
        if route.attr.output_schema.is_none() {
            route.attr.output_schema = session_output_schema(name);
        }
    }
    // Arguments are checked against the schemas as generated (an explicit `null` for an
    // optional parameter is accepted); tools/list shows their portable form.
    arguments::check_arguments(&mut router);
    for route in router.map.values_mut() {
        let mut schema = (*route.attr.input_schema).clone();
        portable::input(&mut schema);
        route.attr.input_schema = Arc::new(schema);
        if let Some(out) = route.attr.output_schema.as_mut() {
            let mut schema = (**out).clone();
            portable::output(&mut schema);
            *out = Arc::new(schema);
        }
    }
    router
}

/// The output schema of a session tool: the schema of what it answers when it succeeds (a
/// refusal or an error is `isError: true` with `{error, message, …}`).
fn session_output_schema(tool: &str) -> Option<Arc<serde_json::Map<String, serde_json::Value>>> {
    use code_intel_session::session::{
        CheckReply, CleanupReply, ExploredAdded, ReviewReply, SessionReply, StatusReply, WriteCheck,
    };
    use rmcp::handler::server::common::schema_for_output;
    Some(match tool {
        "start_session" | "submit_phase" => schema_for_output::<SessionReply>(),
        "get_session_status" => schema_for_output::<StatusReply>(),
        "check_write_target" => schema_for_output::<WriteCheck>(),
        "add_explored_files" => schema_for_output::<ExploredAdded>(),
        "run_check" => schema_for_output::<CheckReply>(),
        "review_changes" => schema_for_output::<ReviewReply>(),
        "cleanup_stale_branches" => schema_for_output::<CleanupReply>(),
        _ => return None,
    })
}

/// The tools as tools/list shows them (names, descriptions, schemas, annotations).
pub fn served_tools() -> Vec<rmcp::model::Tool> {
    let mut tools = annotated_router().list_all();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// What the phase contract may name: the served tools, and every parameter, output field,
/// payload field, response field and config key the server knows. The contract lint checks text against it.
pub fn vocabulary() -> code_intel_workflow::contract::lint::Vocabulary {
    use code_intel_workflow::contract::lint::property_names;
    let tools = served_tools();
    let mut words = std::collections::BTreeSet::new();
    for tool in &tools {
        property_names(&serde_json::Value::Object((*tool.input_schema).clone()), &mut words);
        if let Some(out) = &tool.output_schema {
            property_names(&serde_json::Value::Object((**out).clone()), &mut words);
        }
    }
    for key in code_intel_workflow::engine::schema::PAYLOAD_KEYS {
        property_names(code_intel_workflow::engine::schema::base(key), &mut words);
    }
    let answers = [
        schemars::schema_for!(code_intel_session::session::SessionReply),
        schemars::schema_for!(code_intel_session::session::StatusReply),
        schemars::schema_for!(code_intel_session::session::SessionError),
        schemars::schema_for!(code_intel_session::session::WriteCheck),
        schemars::schema_for!(code_intel_session::session::ExploredAdded),
        schemars::schema_for!(code_intel_session::session::ReviewReply),
        schemars::schema_for!(code_intel_session::session::CleanupReply),
    ];
    for schema in answers {
        property_names(schema.as_value(), &mut words);
    }
    // The keys of .code-intel/config.json, which messages point the user to.
    if let Ok(serde_json::Value::Object(config)) = serde_json::to_value(code_intel_codebase::config::Config::default())
    {
        words.extend(config.keys().cloned());
    }
    code_intel_workflow::contract::lint::Vocabulary { tools: tools.iter().map(|t| t.name.to_string()).collect(), words }
}

/// Logs what the contract lint finds in a project's override of the contract: wording that
/// names tools this server does not serve, or leaves a placeholder unfilled.
fn lint_project_contract(ws: &Workspace) {
    if !ws.repo.root().join(code_intel_workflow::contract::OVERRIDE_PATH).is_file() {
        return;
    }
    for issue in code_intel_workflow::contract::lint::lint(&ws.contract, &vocabulary()) {
        tracing::warn!("{}: {issue}", code_intel_workflow::contract::OVERRIDE_PATH);
    }
}

/// Serves MCP over stdin/stdout until the client closes stdin. Then a background Forest sync
/// stops at its next slice (saving what it did), queued answers are written if the client still
/// reads them, and this returns within about two seconds; in-flight tool calls are abandoned
/// (the caller ends the process: an interrupted git operation is finished by the next start).
pub async fn serve_stdio(ws: Workspace) -> anyhow::Result<()> {
    use std::time::Duration;
    let (transport, writer, mut closed) = transport::stdio();
    let server = CodeIntelServer::new(ws);
    let semantic = Arc::clone(&server.ws.semantic);
    let service = server.serve(transport).await?;
    // rmcp waits up to 5 s for handlers still running once stdin closes; quick ones get half
    // a second to answer, the rest are abandoned.
    let stdin_closed = async {
        if closed.wait_for(|c| *c).await.is_err() {
            // The reader is gone without saying: stdin is closed all the same.
            tracing::debug!("stdin reader gone");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::select! {
        _ = service.waiting() => {}
        _ = stdin_closed => {}
    }
    let stop = tokio::task::spawn_blocking(move || semantic.stop_sync(Duration::from_millis(1000)));
    // What does not finish in time is abandoned: the process exits.
    if tokio::time::timeout(Duration::from_millis(1100), stop).await.is_err() {
        tracing::debug!("the Forest sync did not stop within 1.1 s");
    }
    if tokio::time::timeout(Duration::from_millis(200), writer).await.is_err() {
        tracing::debug!("stdout was not flushed within 200 ms");
    }
    Ok(())
}

/// What an agent pays for the tool list before its first call: names, descriptions and input
/// schemas, as compact JSON. A unit test holds it to 15 KB (14 KB until run_check, 22 tools);
/// the benchmark prints it.
pub fn model_visible_bytes() -> usize {
    served_tools()
        .iter()
        .map(|t| {
            let part = serde_json::json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema});
            serde_json::to_vec(&part).map_or(0, |v| v.len())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_model_visible_tool_list_stays_within_15_kb() {
        let bytes = super::model_visible_bytes();
        assert!(bytes <= 15 * 1024, "tools/list costs {bytes} bytes of names, descriptions and input schemas");
    }

    /// An agent picks a tool by its description: each one says when to use it, first.
    #[test]
    fn every_description_says_when_to_use_the_tool() {
        for tool in super::served_tools() {
            let description = tool.description.as_deref().unwrap_or_default();
            assert!(description.starts_with("Use "), "{}: {description}", tool.name);
            let sentences = description.matches(". ").count() + 1;
            assert!(sentences <= 4, "{}: {sentences} sentences", tool.name);
        }
    }
}

//! The MCP stdio server: translates `tools/call` requests into [`crate::tools`] calls.
//! Nothing but MCP messages goes to stdout; logs go to stderr.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{CallToolResponse, CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};

use crate::tools::definitions::{FindDefinitionsOutput, FindDefinitionsParams};
use crate::tools::function_at_line::{GetFunctionAtLineOutput, GetFunctionAtLineParams};
use crate::tools::impact::{AnalyzeImpactOutput, AnalyzeImpactParams};
use crate::tools::query::{QueryOutput, QueryParams};
use crate::tools::references::{FindReferencesOutput, FindReferencesParams};
use crate::tools::search_files::{SearchFilesOutput, SearchFilesParams};
use crate::tools::search_text::{SearchTextOutput, SearchTextParams};
use crate::tools::structure::{AnalyzeStructureOutput, AnalyzeStructureParams};
use crate::tools::symbols::{GetSymbolsOutput, GetSymbolsParams};
use crate::tools::{self, ToolError, ToolResult};
use crate::workspace::Workspace;

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, rmcp::ErrorData> {
        let value = serde_json::to_value(&self).unwrap_or_default();
        Ok(CallToolResult::structured_error(value).into())
    }
}

#[derive(Clone)]
pub struct CodeIntelServer {
    ws: Arc<Workspace>,
    tool_router: ToolRouter<Self>,
}

impl CodeIntelServer {
    pub fn new(ws: Workspace) -> Self {
        CodeIntelServer { ws: Arc::new(ws), tool_router: Self::tool_router() }
    }

    /// Runs a tool on the blocking pool: parsing and searching are CPU-bound.
    /// (The rmcp macros derive the outputSchema only from a literal `Result<Json<T>, E>` return
    /// type, so the tool methods below spell it out.)
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Workspace) -> ToolResult<T> + Send + 'static,
    ) -> Result<Json<T>, ToolError> {
        let ws = Arc::clone(&self.ws);
        match tokio::task::spawn_blocking(move || f(&ws)).await {
            Ok(result) => result.map(Json),
            Err(e) => Err(ToolError { error: "internal_error".into(), message: format!("tool task failed: {e}") }),
        }
    }
}

#[tool_router]
impl CodeIntelServer {
    #[tool(
        name = "search_text",
        description = "Search file contents with ripgrep's engine (regex, or literal with fixed_strings). `pattern` may be a list of up to 5 patterns searched in one pass. Respects .gitignore; returns matches with optional context lines, paged by max_results/offset.",
        annotations(read_only_hint = true)
    )]
    async fn search_text(
        &self,
        Parameters(p): Parameters<SearchTextParams>,
    ) -> Result<Json<SearchTextOutput>, ToolError> {
        self.run(move |ws| tools::search_text::search_text(ws, p)).await
    }

    #[tool(
        name = "search_files",
        description = "Find files by glob (e.g. `*.rs`, `src/**/test_*.py`). Respects .gitignore.",
        annotations(read_only_hint = true)
    )]
    async fn search_files(
        &self,
        Parameters(p): Parameters<SearchFilesParams>,
    ) -> Result<Json<SearchFilesOutput>, ToolError> {
        self.run(move |ws| tools::search_files::search_files(ws, p)).await
    }

    #[tool(
        name = "find_definitions",
        description = "Find where a symbol is defined (tree-sitter tag queries, 12 languages): name, kind, file, line, end_line, scope, signature, language.",
        annotations(read_only_hint = true)
    )]
    async fn find_definitions(
        &self,
        Parameters(p): Parameters<FindDefinitionsParams>,
    ) -> Result<Json<FindDefinitionsOutput>, ToolError> {
        self.run(move |ws| tools::definitions::find_definitions(ws, p)).await
    }

    #[tool(
        name = "find_references",
        description = "Find where a symbol is used: identifier occurrences in code (not comments or strings, not the definition itself), each with its enclosing function or class.",
        annotations(read_only_hint = true)
    )]
    async fn find_references(
        &self,
        Parameters(p): Parameters<FindReferencesParams>,
    ) -> Result<Json<FindReferencesOutput>, ToolError> {
        self.run(move |ws| tools::references::find_references(ws, p)).await
    }

    #[tool(
        name = "get_symbols",
        description = "List the symbols defined in a file or below a directory, optionally filtered by kind and language.",
        annotations(read_only_hint = true)
    )]
    async fn get_symbols(
        &self,
        Parameters(p): Parameters<GetSymbolsParams>,
    ) -> Result<Json<GetSymbolsOutput>, ToolError> {
        self.run(move |ws| tools::symbols::get_symbols(ws, p)).await
    }

    #[tool(
        name = "analyze_structure",
        description = "Outline a file (or inline `code` with `language`): functions, classes (structs, traits, interfaces, enums), imports, exports, and a summary with line ranges.",
        annotations(read_only_hint = true)
    )]
    async fn analyze_structure(
        &self,
        Parameters(p): Parameters<AnalyzeStructureParams>,
    ) -> Result<Json<AnalyzeStructureOutput>, ToolError> {
        self.run(move |ws| tools::structure::analyze_structure(ws, p)).await
    }

    #[tool(
        name = "get_function_at_line",
        description = "The innermost function or method enclosing a line of a file, with its range and signature.",
        annotations(read_only_hint = true)
    )]
    async fn get_function_at_line(
        &self,
        Parameters(p): Parameters<GetFunctionAtLineParams>,
    ) -> Result<Json<GetFunctionAtLineOutput>, ToolError> {
        self.run(move |ws| tools::function_at_line::get_function_at_line(ws, p)).await
    }

    #[tool(
        name = "analyze_impact",
        description = "Before changing files: must_verify lists source files that call, import or reference the targets' symbols; should_verify lists tests, configs and docs that mention them. Each entry says why.",
        annotations(read_only_hint = true)
    )]
    async fn analyze_impact(
        &self,
        Parameters(p): Parameters<AnalyzeImpactParams>,
    ) -> Result<Json<AnalyzeImpactOutput>, ToolError> {
        self.run(move |ws| tools::impact::analyze_impact(ws, p)).await
    }

    #[tool(
        name = "query",
        description = "Answer a question about the code: plans calls to the other tools from the question, symbol and file_path, runs them, and returns the plan with the aggregated results.",
        annotations(read_only_hint = true)
    )]
    async fn query(&self, Parameters(p): Parameters<QueryParams>) -> Result<Json<QueryOutput>, ToolError> {
        self.run(move |ws| tools::query::query(ws, p)).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeIntelServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("git-code-intel", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Code intelligence for this repository: search_text, search_files, find_definitions, \
                 find_references, get_symbols, analyze_structure, get_function_at_line, analyze_impact, query. \
                 All paths are relative to the repository root.",
            )
    }
}

/// Serves MCP over stdin/stdout until the client closes stdin.
pub async fn serve_stdio(ws: Workspace) -> anyhow::Result<()> {
    let service = CodeIntelServer::new(ws).serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

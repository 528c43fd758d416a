//! `query`: plans which tools answer a question, runs them, and returns plan and results.

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::page::MAX_RESPONSE_BYTES;
use super::reveals::Reveals;
use super::{ToolError, ToolResult, Workspace, given};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct QueryParams {
    /// The question, in natural language.
    #[arg(long)]
    pub question: Option<String>,
    /// IMPLEMENT, MODIFY, INVESTIGATE or QUESTION (default QUESTION).
    #[arg(long)]
    pub intent: Option<String>,
    /// Limit the search to this file or directory.
    #[arg(long)]
    pub path: Option<String>,
    /// A symbol the question is about.
    #[arg(long, allow_hyphen_values = true)]
    pub symbol: Option<String>,
    /// A file the question is about.
    #[arg(long)]
    pub file_path: Option<String>,
    /// Run only these of the planned tools (search_text, search_files, find_definitions,
    /// find_references, analyze_structure, analyze_impact).
    #[arg(long = "tool")]
    pub tools: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlannedCall {
    pub tool: String,
    #[schemars(schema_with = "code_intel_workflow::engine::schema::free_object")]
    pub arguments: Value,
    /// Why the planner chose this call.
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CallResult {
    pub tool: String,
    #[schemars(schema_with = "code_intel_workflow::engine::schema::free_object")]
    pub arguments: Value,
    /// The tool's output, or its `{error, message}`.
    #[schemars(schema_with = "code_intel_workflow::engine::schema::free_object")]
    pub output: Value,
    pub is_error: bool,
    /// The output was too large and was cut to an overview.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueryOutput {
    pub question: Option<String>,
    pub intent: String,
    pub plan: Vec<PlannedCall>,
    pub results: Vec<CallResult>,
    pub truncation_warning: Option<String>,
    /// The files the planned calls showed the content or symbols of (see [`super::reveals`]).
    #[serde(skip)]
    #[schemars(skip)]
    pub revealed: Vec<String>,
}

const INTENTS: &[&str] = &["IMPLEMENT", "MODIFY", "INVESTIGATE", "QUESTION"];
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "that",
    "this",
    "what",
    "where",
    "when",
    "which",
    "does",
    "how",
    "are",
    "from",
    "into",
    "have",
    "has",
    "use",
    "used",
    "uses",
    "using",
    "code",
    "file",
    "files",
    "function",
    "method",
    "class",
    "should",
    "would",
    "could",
    "about",
    "there",
    "their",
    "them",
    "then",
    "than",
    "will",
    "want",
    "need",
    "make",
    "why",
    "who",
    "called",
    "call",
    "calls",
    "defined",
    "define",
    "implement",
    "implemented",
    "change",
    "modify",
    "fix",
    "add",
];

/// Room for the output's own fields around the echoes and results.
const ECHO_ENVELOPE: usize = 8 * 1024;

pub fn query(ws: &Workspace, params: QueryParams) -> ToolResult<QueryOutput> {
    let question = given(&params.question).map(str::to_owned);
    let symbol = given(&params.symbol).map(str::to_owned);
    let file_path = given(&params.file_path).map(str::to_owned);
    if question.is_none() && symbol.is_none() && file_path.is_none() {
        return Err(ws.tool_error(&msg::NO_QUESTION, &[]).into());
    }
    let intent = given(&params.intent).unwrap_or("QUESTION").to_ascii_uppercase();
    if !INTENTS.contains(&intent.as_str()) {
        return Err(ws.invalid_argument("intent", &format!("'{intent}' is not one of {}", INTENTS.join(", "))));
    }
    let path = given(&params.path).map(str::to_owned);
    if let Some(p) = &path {
        ws.scope_prefix(Some(p))?;
    }
    let mut plan = plan(question.as_deref(), &intent, path.as_deref(), symbol.as_deref(), file_path.as_deref());
    if let Some(only) = params.tools.as_ref().filter(|t| !t.is_empty()) {
        if let Some(unknown) = only.iter().find(|t| !PLANNABLE_TOOLS.contains(&t.as_str())) {
            return Err(ws.tool_error(&msg::UNKNOWN_TOOL, &[("tool", unknown)]).into());
        }
        plan.retain(|call| only.contains(&call.tool));
    }
    // The question and the plan are echoed, and each result repeats its call's arguments: the
    // outputs share what is left.
    let echo = serde_json::to_vec(&(&question, &plan)).map_or(0, |v| v.len());
    let share = MAX_RESPONSE_BYTES.saturating_sub(2 * echo + ECHO_ENVELOPE) / plan.len().max(1);
    let mut any_truncated = false;
    let mut revealed = Vec::new();
    let results: Vec<CallResult> = plan
        .iter()
        .map(|call| {
            let (output, is_error) = match run(ws, &call.tool, call.arguments.clone()) {
                Ok((v, files)) => {
                    revealed.extend(files);
                    (v, false)
                }
                Err(e) => (json!({"error": e.error, "message": e.message}), true),
            };
            let (output, truncated) = fit(output, share);
            any_truncated |= truncated;
            CallResult { tool: call.tool.clone(), arguments: call.arguments.clone(), output, is_error, truncated }
        })
        .collect();
    log_decision(ws, question.as_deref(), &intent, &plan, &results);
    Ok(QueryOutput {
        question,
        intent,
        plan,
        results,
        truncation_warning: any_truncated.then(|| ws.truncation_warning()),
        revealed,
    })
}

fn plan(
    question: Option<&str>,
    intent: &str,
    path: Option<&str>,
    symbol: Option<&str>,
    file_path: Option<&str>,
) -> Vec<PlannedCall> {
    let mut calls = Vec::new();
    let mut add = |tool: &str, mut arguments: Value, reason: String| {
        if let (Some(p), Some(obj)) = (path, arguments.as_object_mut())
            && matches!(tool, "find_definitions" | "find_references" | "search_text" | "search_files")
        {
            obj.insert("path".into(), json!(p));
        }
        calls.push(PlannedCall { tool: tool.into(), arguments, reason });
    };
    if let Some(s) = symbol {
        add("find_definitions", json!({"symbol": s}), format!("where `{s}` is defined"));
        add("find_references", json!({"symbol": s}), format!("where `{s}` is used"));
    }
    if let Some(f) = file_path {
        add("analyze_structure", json!({"file_path": f}), format!("the outline of {f}"));
        if matches!(intent, "IMPLEMENT" | "MODIFY") {
            add("analyze_impact", json!({"target_files": [f]}), format!("what depends on {f} before changing it"));
        }
    }
    if let Some(q) = question {
        let (identifiers, words, files) = terms(q);
        if symbol.is_none() {
            for id in identifiers.iter().take(3) {
                add("find_definitions", json!({"symbol": id}), format!("`{id}` looks like a code identifier"));
            }
            if let Some(first) = identifiers.first().filter(|_| intent != "QUESTION") {
                add("find_references", json!({"symbol": first}), format!("uses of `{first}`"));
            }
        }
        for f in files.iter().take(2) {
            add("search_files", json!({"pattern": format!("*{f}*")}), format!("`{f}` looks like a file name"));
        }
        let mut patterns: Vec<String> = identifiers.iter().take(2).cloned().collect();
        for w in words {
            if patterns.len() >= 3 {
                break;
            }
            push_unique(&mut patterns, w);
        }
        if !patterns.is_empty() {
            add(
                "search_text",
                json!({"pattern": patterns, "fixed_strings": true, "case_sensitive": false, "max_results": 50}),
                "the question's key terms as text".into(),
            );
        }
    }
    calls
}

/// Splits a question into code-like identifiers, plain keywords and file-like names.
fn terms(question: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut identifiers = Vec::new();
    let mut words = Vec::new();
    let mut files = Vec::new();
    for raw in
        question.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '?' | '!' | '(' | ')' | '"' | '\''))
    {
        let quoted = raw.starts_with('`') || raw.ends_with('`');
        let token = raw.trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '.' && c != ':');
        let token = token.trim_end_matches('.');
        if token.len() < 3 {
            continue;
        }
        let is_file = token.contains('.')
            && token
                .rsplit('.')
                .next()
                .is_some_and(|ext| (1..=5).contains(&ext.len()) && ext.chars().all(char::is_alphanumeric));
        let last = token.rsplit(['.', ':']).find(|s| !s.is_empty()).unwrap_or(token);
        let looks_code = quoted
            || token.contains('_')
            || token.contains("::")
            || (token.chars().skip(1).any(char::is_uppercase) && token.chars().any(char::is_lowercase));
        if is_file && !token.contains("::") {
            push_unique(&mut files, token.to_owned());
        } else if looks_code {
            push_unique(&mut identifiers, last.to_owned());
        } else if token.len() >= 4 && !STOPWORDS.contains(&token.to_ascii_lowercase().as_str()) {
            push_unique(&mut words, token.to_owned());
        }
    }
    (identifiers, words, files)
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// The tools `query` can plan calls to.
const PLANNABLE_TOOLS: &[&str] =
    &["search_text", "search_files", "find_definitions", "find_references", "analyze_structure", "analyze_impact"];

/// Runs one planned call: its output, and the files it showed (see [`super::reveals`]).
fn run(ws: &Workspace, tool: &str, args: Value) -> Result<(Value, Vec<String>), ToolError> {
    fn call<P: serde::de::DeserializeOwned + Default, O: Serialize + Reveals>(
        ws: &Workspace,
        args: Value,
        f: fn(&Workspace, P) -> ToolResult<O>,
    ) -> Result<(Value, Vec<String>), ToolError> {
        let params: P = serde_json::from_value(args).map_err(|e| ws.invalid_argument("arguments", &e.to_string()))?;
        f(ws, params).map(|o| (serde_json::to_value(&o).unwrap_or(Value::Null), o.revealed_files()))
    }
    use super::{definitions, impact, references, search_files, search_text, structure};
    match tool {
        "search_text" => call(ws, args, search_text::search_text),
        "search_files" => call(ws, args, search_files::search_files),
        "find_definitions" => call(ws, args, definitions::find_definitions),
        "find_references" => call(ws, args, references::find_references),
        "analyze_structure" => call(ws, args, structure::analyze_structure),
        "analyze_impact" => call(ws, args, impact::analyze_impact),
        other => Err(ws.tool_error(&msg::UNKNOWN_TOOL, &[("tool", other)]).into()),
    }
}

/// Keeps an output within `budget` bytes by shortening its longest lists.
fn fit(mut output: Value, budget: usize) -> (Value, bool) {
    let size = |v: &Value| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    if size(&output) <= budget {
        return (output, false);
    }
    if let Some(obj) = output.as_object_mut() {
        let keys: Vec<String> = obj.iter().filter(|(_, v)| v.is_array()).map(|(k, _)| k.clone()).collect();
        for key in keys {
            if let Some(Value::Array(items)) = obj.get_mut(&key) {
                while items.len() > 1 {
                    let current: usize = items.iter().map(size).sum();
                    if current <= budget / 2 {
                        break;
                    }
                    let keep = items.len() / 2;
                    items.truncate(keep);
                }
            }
        }
    }
    (output, true)
}

/// Appends the plan to the DecisionLog (`refs/code-intel/logs/decisions`): what was asked, which
/// tools the planner chose and why, and which of them failed. A failure to log is a warning;
/// it never fails the query.
fn log_decision(ws: &Workspace, question: Option<&str>, intent: &str, plan: &[PlannedCall], results: &[CallResult]) {
    let record = json!({
        "question": question.unwrap_or(""),
        "intent": intent,
        "plan": plan,
        "failed_tools": results.iter().filter(|r| r.is_error).map(|r| r.tool.as_str()).collect::<Vec<_>>(),
        "recorded_at": chrono::Utc::now().to_rfc3339(),
    });
    let logged = gix::open(ws.repo.root()).map_err(|e| e.to_string()).and_then(|repo| {
        code_intel_gitstate::log::append(
            &repo,
            code_intel_gitstate::log::DECISION_LOG,
            &record,
            &format!("query plan ({intent})"),
        )
        .map_err(|e| e.to_string())
    });
    if let Err(e) = logged {
        tracing::warn!("could not append to the DecisionLog: {e}");
    }
}

/// A query shows what its calls showed.
impl Reveals for QueryOutput {
    fn revealed_files(&self) -> Vec<String> {
        self.revealed.clone()
    }
}

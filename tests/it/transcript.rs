//! A whole session over stdio, recorded: tools/list, then a MODIFY session from start through
//! MERGE with the code-intelligence tools and a few refusals on the way. Every answer is
//! compared with `tests/golden/transcript.json`, after the values that change from run to run
//! (the temporary directory, session ids, commit ids, times, and whether a lookup beat the
//! background index build) are replaced by placeholders. A
//! refactoring that changes what an agent reads fails here; a deliberate change re-records the
//! file with `GOLDEN_UPDATE=1 cargo test --test it transcript` and shows up in review as its diff.
//!
//! Every successful answer is also validated against the outputSchema tools/list gave for its
//! tool, so the session tools (submit_phase, check_write_target, add_explored_files,
//! review_changes) are validated on real answers from the phases where they succeed.

use std::path::{Path, PathBuf};

use crate::common::git;
use crate::common::mcp_client::{Client, assert_fits_output_schema, call, connect, structured};
use regex::Regex;
use serde_json::{Map, Value, json};

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/transcript.json")
}

/// Replaces what differs between runs with placeholders.
struct Normalizer {
    roots: Vec<String>,
    patterns: Vec<(Regex, &'static str)>,
}

impl Normalizer {
    fn new(root: &Path) -> Normalizer {
        let mut roots = vec![root.display().to_string()];
        if let Ok(real) = root.canonicalize() {
            roots.push(real.display().to_string());
        }
        roots.sort_by_key(|r| std::cmp::Reverse(r.len()));
        let patterns = vec![
            (Regex::new(r"\d{8}_\d{6}_[0-9a-f]{8}").unwrap(), "<session>"),
            (Regex::new(r"\b[0-9a-f]{40}\b").unwrap(), "<oid>"),
            (Regex::new(r"\b[0-9a-f]{7,12}\b").unwrap(), "<short-oid>"),
            (Regex::new(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?").unwrap(), "<time>"),
        ];
        Normalizer { roots, patterns }
    }

    fn text(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for root in &self.roots {
            out = out.replace(root, "<repo>");
        }
        for (re, placeholder) in &self.patterns {
            out = re.replace_all(&out, *placeholder).into_owned();
        }
        out
    }

    fn value(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|i| self.value(i)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        let v = if is_timing(k) && v.is_number() { json!("<duration>") } else { self.value(v) };
                        (self.text(k), v)
                    })
                    .collect::<Map<_, _>>(),
            ),
            other => other.clone(),
        }
    }
}

fn is_timing(key: &str) -> bool {
    key.ends_with("_ms") || key == "seconds" || key.ends_with("_secs") || key == "elapsed"
}

struct Recorder<'a> {
    client: &'a Client,
    tools: Vec<rmcp::model::Tool>,
    normalizer: Normalizer,
    entries: Vec<Value>,
}

impl Recorder<'_> {
    async fn call(&mut self, tool: &str, args: Value) -> Value {
        let result = call(self.client, tool, args.clone()).await;
        let content = structured(&result);
        let is_error = result.is_error == Some(true);
        if !is_error {
            assert_fits_output_schema(&self.tools, tool, &content);
        }
        let mut answer = self.normalizer.value(&content);
        // A lookup answered before the background index was built says so (`fast_path`, the
        // same answer otherwise); whether the build won the race depends on the machine's load.
        if let Some(fast_path) = answer.get_mut("fast_path") {
            *fast_path = json!("<fast path note, or null once the index is built>");
        }
        self.entries.push(json!({
            "call": tool,
            "arguments": self.normalizer.value(&args),
            "is_error": is_error,
            "answer": answer,
        }));
        content
    }

    async fn submit(&mut self, data: Value) -> Value {
        self.call("submit_phase", json!({"data": data})).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_session_answers_as_recorded() {
    let repo = crate::common::committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let tools = client.list_all_tools().await.unwrap();
    let listed = serde_json::to_value(&tools).unwrap();
    let mut r = Recorder { client: &client, tools, normalizer: Normalizer::new(root), entries: Vec::new() };
    r.entries.push(json!({"call": "tools/list", "answer": listed}));

    r.call("get_session_status", json!({})).await;
    r.call("check_write_target", json!({"file_path": "src/auth.py"})).await;
    r.call("start_session", json!({"intent": "MODIFY", "query": "add logout", "no_doc_research": true})).await;
    r.submit(json!({"action_type": 7, "tools_used": [], "summary": "wrong type"})).await;
    r.submit(json!({"action_type": "modify", "tools_used": ["find_definitions"], "summary": "claims a tool"})).await;
    r.call("check_write_target", json!({"file_path": "src/auth.py"})).await;
    r.submit(json!({"action_type": "modify", "target_symbols": ["login"], "tools_used": [], "summary": "frame"})).await;
    r.call("find_definitions", json!({"symbol": "login"})).await;
    r.call("find_references", json!({"symbol": "validate_token"})).await;
    r.call("search_text", json!({"pattern": "Session"})).await;
    r.call("search_files", json!({"pattern": "*.py"})).await;
    r.call("get_symbols", json!({"path": "src"})).await;
    r.call("analyze_structure", json!({"file_path": "src/auth.py"})).await;
    r.call("get_function_at_line", json!({"file_path": "src/auth.py", "line_number": 9})).await;
    r.call("analyze_structure", json!({"file_path": "../outside.py"})).await;
    r.submit(json!({"explored_files": ["src/auth.py"], "findings": ["login in src/auth.py"],
                    "tools_used": ["find_definitions", "search_text"], "summary": "explored"}))
        .await;
    r.submit(json!({"needs_more_information": false, "reason": "enough found", "tools_used": [], "summary": "q1"}))
        .await;
    r.submit(json!({"has_unverified_hypotheses": false, "reason": "all verified", "tools_used": [], "summary": "q2"}))
        .await;
    r.call("analyze_impact", json!({"target_files": ["src/auth.py"]})).await;
    r.submit(json!({"needs_impact_analysis": false, "reason": "one function only", "tools_used": [], "summary": "q3"}))
        .await;
    r.submit(json!({"tasks": [{"id": "t1", "description": "add logout", "status": "pending",
        "checklist": [{"item": "logout in auth.py", "status": "pending"}]}], "tools_used": [], "summary": "plan"}))
        .await;
    r.call("check_write_target", json!({"file_path": "src/auth.py"})).await;
    r.call("check_write_target", json!({"file_path": "lib/elsewhere.py"})).await;
    r.call("add_explored_files", json!({"files": ["lib"]})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    r.submit(json!({"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done",
        "evidence": "src/auth.py:4000"}], "tools_used": ["check_write_target"], "summary": "bad evidence"}))
        .await;
    r.submit(json!({"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done",
        "evidence": format!("src/auth.py:{start}-{}", start + 2)}], "tools_used": ["check_write_target"], "summary": "logout added"}))
        .await;
    r.submit(json!({"summary": "all done"})).await;
    r.call("review_changes", json!({})).await;
    // Not recorded: a run's output holds the test runner's version and timing.
    crate::common::mcp_client::witness_tests(r.client).await;
    r.submit(
        json!({"verifier_used": "tests.md", "passed": true, "details": "ok", "tools_used": [], "summary": "verified"}),
    )
    .await;
    r.call("get_session_status", json!({})).await;
    r.call("review_changes", json!({})).await;
    r.submit(json!({"review_prompt_used": "garbage_detection.md", "commit_message": "Add logout()",
        "reviewed_files": [{"file": "src/auth.py", "decision": "keep"}],
        "tools_used": ["review_changes"], "summary": "reviewed"}))
        .await;
    r.submit(json!({"quality_prompt_used": "quality_review.md", "quality_score": "9/10", "issues": [],
                    "tools_used": [], "summary": "fine"}))
        .await;
    r.submit(json!({"summary": "merge it"})).await;
    r.call("get_session_status", json!({})).await;
    r.call("cleanup_stale_branches", json!({})).await;
    assert_eq!(git(root, &["log", "-1", "--format=%s"]), "Add logout()");
    let entries = std::mem::take(&mut r.entries);
    client.cancel().await.unwrap();

    let recorded = serde_json::to_string_pretty(&Value::Array(entries)).unwrap() + "\n";
    let path = golden_path();
    if std::env::var_os("GOLDEN_UPDATE").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &recorded).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(&path).expect("tests/golden/transcript.json (record it with GOLDEN_UPDATE=1)");
    if golden != recorded {
        let diff = similar::TextDiff::from_lines(&golden, &recorded);
        let shown: String = diff
            .unified_diff()
            .context_radius(3)
            .header("golden", "this run")
            .to_string()
            .lines()
            .take(200)
            .collect::<Vec<_>>()
            .join("\n");
        panic!("the session's answers differ from tests/golden/transcript.json:\n{shown}");
    }
}

//! An agent that knows nothing but the responses.
//!
//! It reads only `call`, `instruction` and `expected_payload_schema` of each response (and the
//! answers of the tools it calls, and the `must_read` documents DOCUMENT_RESEARCH's
//! instruction sends it to), and fills every payload from the schema. Besides the schema it
//! has a small table of facts about the fixture repository: where the change goes and what it
//! is, the user's request (to quote from), which arguments to give a tool when an instruction
//! or a schema names it, and its decisions (gate answers, the user's branch choice, whether a
//! verification passes, how many quality issues a review finds). It imports nothing of the
//! project: no engine types, no payload builders.
//!
//! It drives every row of the phase matrix to its end over stdio, against real git
//! repositories, and every run must end with `git fsck --full --strict` clean.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::git;
use crate::common::mcp_client::{Client, call, connect, structured};
use serde_json::{Map, Value, json};

const QUERY: &str = "Make login() refresh the Session token before it expires";
const FILE: &str = "src/auth.py";
const CHANGE: &str =
    "\n\ndef refresh_token(session):\n    session.token = issue_token(session.user)\n    return session.token\n";

/// The agent's decisions for one run.
#[derive(Default, Clone)]
struct Decisions {
    /// Answers to boolean fields, by field name (default false).
    answers: BTreeMap<&'static str, bool>,
    /// The user's choice at BRANCH_INTERVENTION.
    choice: Option<&'static str>,
    /// Verification verdicts, in order (then: passed).
    verdicts: Vec<bool>,
    /// Quality issues found per review, in order (then: none).
    issues: Vec<usize>,
}

/// The facts: which arguments a tool gets.
fn tool_arguments(tool: &str) -> Option<Value> {
    Some(match tool {
        "search_text" => json!({"pattern": "login"}),
        "search_files" => json!({"pattern": "*.py"}),
        "find_definitions" | "find_references" => json!({"symbol": "login"}),
        "get_symbols" => json!({"path": FILE}),
        "analyze_structure" => json!({"file_path": FILE}),
        "get_function_at_line" => json!({"file_path": FILE, "line_number": 18}),
        "analyze_impact" => json!({"target_files": [FILE]}),
        "semantic_search" => json!({"query": "refresh the session token"}),
        "check_write_target" => json!({"file_path": FILE}),
        "add_explored_files" => json!({"files": [FILE]}),
        "review_changes" => json!({}),
        "query" => json!({"question": "where is login defined"}),
        // The fixture's test command, which the instructions name.
        "run_check" => json!({"command": "python3 -m pytest"}),
        _ => return None,
    })
}

/// Tools an agent does not call on its own: they drive the session, or clean up the user's
/// branches.
const NOT_ON_ITS_OWN: &[&str] =
    &["submit_phase", "start_session", "get_session_status", "cleanup_stale_branches", "record_outcome"];

struct Agent {
    client: Client,
    root: std::path::PathBuf,
    decisions: Decisions,
    tools: BTreeSet<String>,
    /// Tools called since the last submit.
    called: Vec<String>,
    /// The lines of the change, once made.
    change: Option<(usize, usize)>,
    /// The last answer of each tool it called.
    answers: BTreeMap<String, Value>,
    /// Every response, for the test's assertions afterwards (the agent does not read them).
    transcript: Vec<Value>,
}

impl Agent {
    async fn new(root: &Path, decisions: Decisions) -> Agent {
        let client = connect(root).await;
        let tools = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
        Agent {
            client,
            root: root.to_owned(),
            decisions,
            tools,
            called: Vec::new(),
            change: None,
            answers: BTreeMap::new(),
            transcript: Vec::new(),
        }
    }

    /// Calls a tool; returns (is_error, structured content).
    async fn tool(&mut self, name: &str, args: Value) -> (bool, Value) {
        let r = call(&self.client, name, args).await;
        let error = r.is_error == Some(true);
        let value = structured(&r);
        if !NOT_ON_ITS_OWN.contains(&name) {
            self.called.push(name.to_owned());
        }
        self.answers.insert(name.to_owned(), value.clone());
        (error, value)
    }

    /// The served tools an instruction or a message names, that the agent knows how to call.
    fn named_tools(&self, text: &str) -> Vec<String> {
        let words: BTreeSet<&str> = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
        self.tools
            .iter()
            .filter(|t| words.contains(t.as_str()) && !NOT_ON_ITS_OWN.contains(&t.as_str()))
            .filter(|t| tool_arguments(t).is_some())
            .cloned()
            .collect()
    }

    /// Runs a session from start_session to its end; returns the transcript.
    async fn run(mut self, start: Value) -> Vec<Value> {
        let (error, mut response) = self.tool("start_session", start).await;
        assert!(!error, "start_session refused: {response}");
        for _ in 0..120 {
            self.transcript.push(response.clone());
            match response["call"].as_str() {
                // The end: the user's verdict goes to record_outcome, as the instruction asks.
                Some("record_outcome") => {
                    let (error, recorded) = self.tool("record_outcome", json!({"outcome": "success"})).await;
                    assert!(!error, "record_outcome refused at the end: {recorded}");
                    self.client.cancel().await.unwrap();
                    return self.transcript;
                }
                Some("submit_phase") => {}
                other => panic!("a response asks to call {other:?}: {response}"),
            }
            let instruction = response["instruction"].as_str().unwrap_or_default().to_owned();
            let schema = response["expected_payload_schema"].clone();
            self.act(&instruction, &schema).await;
            let payload = self.fill(&schema, "");
            self.called.clear();
            let (error, next) = self.tool("submit_phase", json!({"data": payload})).await;
            assert!(!error, "refused:\n  payload {payload}\n  answer {next}\n  after {instruction}");
            response = next;
        }
        panic!("no end after 120 submits: {:?}", self.transcript.last());
    }

    /// Does what the instruction and the schema ask before submitting: calls the tools they
    /// name, and makes the change when evidence is due.
    async fn act(&mut self, instruction: &str, schema: &Value) {
        let mut wanted = self.named_tools(instruction);
        let tools_used = &schema["properties"]["tools_used"];
        if let Some(t) = tools_used["contains"]["const"].as_str() {
            wanted.push(t.to_owned());
        }
        if let Some(options) = tools_used["contains"]["enum"].as_array() {
            let need = tools_used["minContains"].as_u64().unwrap_or(1) as usize;
            let callable: Vec<String> = options
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| tool_arguments(t).is_some() && !wanted.iter().any(|w| w == t))
                .map(str::to_owned)
                .collect();
            wanted.extend(callable.into_iter().take(need));
        }
        let mut unique: Vec<String> = Vec::new();
        for t in wanted {
            if !unique.contains(&t) {
                unique.push(t);
            }
        }
        let wanted = unique;
        // Evidence as file:line (a pattern) means the work is due now.
        let writes = asks_for_code_evidence(schema);
        for tool in wanted {
            let args = tool_arguments(&tool).unwrap_or(json!({}));
            let (error, answer) = self.tool(&tool, args).await;
            if error && tool == "check_write_target" {
                // Refused: do what the message says, then ask again.
                let message = answer["message"].as_str().unwrap_or_default().to_owned();
                // check_write_target itself is asked again below, once the others ran.
                for fix in self.named_tools(&message).into_iter().filter(|t| t != "check_write_target") {
                    let args = tool_arguments(&fix).unwrap_or(json!({}));
                    let (e, a) = self.tool(&fix, args).await;
                    assert!(!e, "{fix} refused: {a}");
                }
                let (error, answer) = self.tool("check_write_target", tool_arguments(&tool).unwrap()).await;
                assert!(!error, "still not allowed to write {FILE}: {answer}");
            } else if tool == "check_write_target" {
                assert_eq!(answer["allowed"], true);
            }
        }
        if writes && self.change.is_none() {
            let path = self.root.join(FILE);
            let mut text = std::fs::read_to_string(&path).unwrap();
            let first = text.lines().count() + 3;
            text.push_str(CHANGE);
            std::fs::write(&path, text).unwrap();
            self.change = Some((first, first + 2));
        }
    }

    /// A value for `schema` at field `name`: facts and decisions where the agent has them, the
    /// schema's own constraints everywhere else.
    fn fill(&mut self, schema: &Value, name: &str) -> Value {
        if let Some(c) = schema.get("const") {
            return c.clone();
        }
        if let Some(fact) = self.fact(name) {
            return fact;
        }
        if let Some(Value::Array(options)) = schema.get("enum") {
            return options[0].clone();
        }
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            return self.fill(&merge(&without(schema, "anyOf"), &any[0]), name);
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            let mut merged = without(schema, "allOf");
            for part in all {
                merged = merge(&merged, part);
            }
            return self.fill(&merged, name);
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("object") => {
                let required: Vec<&str> =
                    schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let mut out = Map::new();
                for (field, sub) in schema["properties"].as_object().into_iter().flatten() {
                    if required.contains(&field.as_str()) || KNOWN_FIELDS.contains(&field.as_str()) {
                        out.insert(field.clone(), self.fill(sub, field));
                    }
                }
                let min = schema["minProperties"].as_u64().unwrap_or(0);
                for i in 0..min {
                    out.insert(format!("note_{i}"), json!(format!("{name} noted by the schema agent")));
                }
                Value::Object(out)
            }
            Some("array") => {
                if let Some(Value::Array(prefix)) = schema.get("prefixItems") {
                    return Value::Array(prefix.iter().map(|p| self.fill(p, name)).collect());
                }
                let item = schema.get("items").cloned().unwrap_or(json!({"type": "string"}));
                let n = schema["minItems"].as_u64().unwrap_or(0).max(1);
                let mut out: Vec<Value> = Vec::new();
                if let Some(contains) = schema.get("contains") {
                    out.push(self.fill(&merge(&item, contains), name));
                }
                while (out.len() as u64) < n {
                    out.push(self.fill(&item, name));
                }
                Value::Array(out)
            }
            Some("boolean") => json!(self.decisions.answers.get(name).copied().unwrap_or(false)),
            Some("integer") => schema.get("default").cloned().unwrap_or(json!(0)),
            Some("string") => {
                let min = schema["minLength"].as_u64().unwrap_or(0) as usize;
                let text = format!("{} written by the schema agent", name.replace('_', " "));
                json!(format!("{text:<min$}"))
            }
            _ => json!(format!("{name} by the schema agent")),
        }
    }

    /// What the agent knows for a field, by its name.
    fn fact(&mut self, name: &str) -> Option<Value> {
        Some(match name {
            "tools_used" => {
                let mut used: Vec<String> = Vec::new();
                for t in &self.called {
                    if !used.contains(t) {
                        used.push(t.clone());
                    }
                }
                json!(used)
            }
            "choice" => json!(self.decisions.choice?),
            "quote" => json!(QUERY),
            // A decision for every file the review listed: the agent keeps its own work.
            "reviewed_files" => {
                let files = self.answers.get("review_changes")?["files"].as_array()?.clone();
                let mine: Vec<Value> = files
                    .iter()
                    .filter(|f| f["pre_existing"] != true)
                    .map(|f| json!({"file": f["file"], "decision": "keep"}))
                    .collect();
                json!(mine)
            }
            "explored_files" => json!([FILE]),
            // The instruction says to read must_read: the agent reads what it names.
            "documents_reviewed" => {
                let must_read = self.transcript.last()?["documents"]["must_read"].as_array()?.clone();
                json!(must_read.iter().map(|d| d["path"].clone()).collect::<Vec<_>>())
            }
            "evidence" => {
                let (a, b) = self.change?;
                json!(format!("{FILE}:{a}-{b}"))
            }
            "passed" => {
                json!(if self.decisions.verdicts.is_empty() { true } else { self.decisions.verdicts.remove(0) })
            }
            "result" => json!(true),
            "issues" => {
                let n = if self.decisions.issues.is_empty() { 0 } else { self.decisions.issues.remove(0) };
                json!((0..n).map(|i| format!("quality issue {i}")).collect::<Vec<_>>())
            }
            _ => return None,
        })
    }
}

/// Whether `schema` asks somewhere for `evidence` with a pattern (file:line places).
fn asks_for_code_evidence(schema: &Value) -> bool {
    match schema {
        Value::Object(o) => {
            o.get("properties").and_then(|p| p.get("evidence")).is_some_and(|e| e.get("pattern").is_some())
                || o.values().any(asks_for_code_evidence)
        }
        Value::Array(a) => a.iter().any(asks_for_code_evidence),
        _ => false,
    }
}

/// Fields the agent fills from its facts and decisions even when the schema leaves them optional.
const KNOWN_FIELDS: &[&str] = &["issues", "compaction_count"];

fn without(schema: &Value, key: &str) -> Value {
    let mut s = schema.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove(key);
    }
    s
}

fn merge(a: &Value, b: &Value) -> Value {
    crate::common::schema_gen::merge(a, b)
}

use crate::common::{committed_project as repo, fsck_clean};

fn phases(transcript: &[Value]) -> Vec<String> {
    transcript.iter().map(|r| r["ready_substep"].as_str().or(r["phase"].as_str()).unwrap_or("?").to_owned()).collect()
}

fn branches(root: &Path) -> Vec<String> {
    git(root, &["branch", "--format=%(refname:short)"]).lines().map(str::to_owned).collect()
}

/// Runs one row of the matrix; returns the phases visited and the final message.
async fn run(root: &Path, start: Value, decisions: Decisions) -> (Vec<String>, String) {
    let mut args = json!({"query": QUERY});
    args.as_object_mut().unwrap().extend(start.as_object().unwrap().clone());
    let transcript = Agent::new(root, decisions).await.run(args).await;
    fsck_clean(root);
    let last = transcript.last().unwrap();
    assert_eq!(last["phase"], "SESSION_COMPLETE");
    (phases(&transcript), last["message"].as_str().unwrap_or_default().to_owned())
}

/// The change is merged into main: committed there, HEAD on main, no task branch left.
fn merged(root: &Path) {
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert!(git(root, &["show", &format!("main:{FILE}")]).contains("def refresh_token"));
    assert!(git(root, &["status", "--porcelain"]).is_empty(), "{}", git(root, &["status", "--porcelain"]));
    assert!(branches(root).iter().all(|b| !b.starts_with("llm_task_")), "{:?}", branches(root));
}

fn answers(pairs: &[(&'static str, bool)]) -> Decisions {
    Decisions { answers: pairs.iter().copied().collect(), ..Decisions::default() }
}

const EXPLORE_TO_READY: &[&str] = &["DOCUMENT_RESEARCH", "QUERY_FRAME", "EXPLORATION", "Q1", "Q2", "Q3"];
const READY: &[&str] = &["READY_PLAN", "READY_IMPL", "READY_COMPLETE"];

fn path(parts: &[&[&str]]) -> Vec<String> {
    parts.iter().flat_map(|p| p.iter().map(|s| (*s).to_owned())).chain(["SESSION_COMPLETE".to_owned()]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implement_with_every_phase_merges() {
    let repo = repo();
    let (seen, message) = run(repo.path(), json!({"intent": "IMPLEMENT"}), Decisions::default()).await;
    assert_eq!(seen, path(&[EXPLORE_TO_READY, READY, &["POST_IMPL_VERIFY", "PRE_COMMIT", "QUALITY_REVIEW", "MERGE"]]));
    assert!(message.starts_with("Merged llm_task_"), "{message}");
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modify_with_gate_full_runs_every_exploration_phase() {
    let repo = repo();
    let (seen, _) = run(repo.path(), json!({"intent": "MODIFY", "gate_level": "full"}), Decisions::default()).await;
    let semantic = seen.contains(&"SEMANTIC".to_owned());
    if code_intel_semantic::embed::default_model_dir().is_some_and(|d| d.join("model.onnx").is_file()) {
        assert!(semantic, "with a model installed, gate full runs SEMANTIC: {seen:?}");
    }
    let mut explore = vec!["DOCUMENT_RESEARCH", "QUERY_FRAME", "EXPLORATION", "Q1"];
    if semantic {
        explore.push("SEMANTIC");
    }
    explore.extend(["Q2", "VERIFICATION", "Q3", "IMPACT_ANALYSIS"]);
    assert_eq!(
        seen,
        path(&[&explore, READY, &["POST_IMPL_VERIFY", "PRE_COMMIT", "QUALITY_REVIEW", "MERGE"]]),
        "(SEMANTIC runs when a model is installed)"
    );
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigate_ends_after_the_gates() {
    let repo = repo();
    let (seen, message) = run(repo.path(), json!({"intent": "INVESTIGATE"}), Decisions::default()).await;
    assert_eq!(seen, path(&[EXPLORE_TO_READY]));
    assert_eq!(message, "Exploration complete. Ending session.");
    assert_eq!(branches(repo.path()), vec!["main"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn question_with_every_gate_open_ends_after_impact_analysis() {
    let repo = repo();
    let d = answers(&[("has_unverified_hypotheses", true), ("needs_impact_analysis", true)]);
    let (seen, message) = run(repo.path(), json!({"intent": "QUESTION"}), d).await;
    assert_eq!(
        seen,
        path(&[&[
            "DOCUMENT_RESEARCH",
            "QUERY_FRAME",
            "EXPLORATION",
            "Q1",
            "Q2",
            "VERIFICATION",
            "Q3",
            "IMPACT_ANALYSIS"
        ]])
    );
    assert_eq!(message, "Exploration complete. Ending session.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_skips_exploration_and_quality_review() {
    let repo = repo();
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), Decisions::default()).await;
    assert_eq!(
        seen,
        path(&[&["DOCUMENT_RESEARCH", "QUERY_FRAME"], READY, &["POST_IMPL_VERIFY", "PRE_COMMIT", "MERGE"]])
    );
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_works_on_the_current_branch_and_ends_after_verification() {
    let repo = repo();
    let (seen, message) = run(repo.path(), json!({"intent": "MODIFY", "quick": true}), Decisions::default()).await;
    assert_eq!(seen, path(&[&["DOCUMENT_RESEARCH", "QUERY_FRAME"], READY, &["POST_IMPL_VERIFY"]]));
    assert_eq!(message, "Verification passed. Session ending (--quick).");
    assert_eq!(branches(repo.path()), vec!["main"]);
    assert!(std::fs::read_to_string(repo.path().join(FILE)).unwrap().contains("def refresh_token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_without_verification_ends_at_ready() {
    let repo = repo();
    let (seen, message) =
        run(repo.path(), json!({"intent": "IMPLEMENT", "quick": true, "no_verify": true}), Decisions::default()).await;
    assert_eq!(seen, path(&[&["DOCUMENT_RESEARCH", "QUERY_FRAME"], READY]));
    assert_eq!(message, "All tasks complete. Session ending (--no-verify + --quick).");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_verify_goes_from_ready_to_pre_commit() {
    let repo = repo();
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "no_verify": true}), Decisions::default()).await;
    assert_eq!(seen, path(&[EXPLORE_TO_READY, READY, &["PRE_COMMIT", "QUALITY_REVIEW", "MERGE"]]));
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_quality_and_no_doc_research_skip_their_phases() {
    let repo = repo();
    let start = json!({"intent": "MODIFY", "no_quality": true, "no_doc_research": true});
    let (seen, _) = run(repo.path(), start, Decisions::default()).await;
    assert_eq!(seen, path(&[&EXPLORE_TO_READY[1..], READY, &["POST_IMPL_VERIFY", "PRE_COMMIT", "MERGE"]]));
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failures_intervene_then_escalate_then_pass() {
    let repo = repo();
    let d = Decisions { verdicts: vec![false; 9], ..Decisions::default() };
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), d).await;
    assert_eq!(seen.iter().filter(|p| *p == "VERIFY_INTERVENTION").count(), 3, "{seen:?}");
    assert_eq!(seen.iter().filter(|p| *p == "POST_IMPL_VERIFY").count(), 10, "{seen:?}");
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_intervention_replans_after_each_failure() {
    let repo = repo();
    let d = Decisions { verdicts: vec![false; 3], ..Decisions::default() };
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true, "no_intervention": true}), d).await;
    assert!(!seen.contains(&"VERIFY_INTERVENTION".to_owned()), "{seen:?}");
    assert_eq!(seen.iter().filter(|p| *p == "READY_PLAN").count(), 4, "{seen:?}");
    merged(repo.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_explore_ends_an_implementation_after_exploring() {
    let repo = repo();
    let (seen, message) =
        run(repo.path(), json!({"intent": "IMPLEMENT", "only_explore": true}), Decisions::default()).await;
    assert_eq!(seen, path(&[EXPLORE_TO_READY]));
    assert_eq!(message, "Exploration complete. Ending session.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_verify_runs_verification_alone() {
    let repo = repo();
    let (seen, _) = run(repo.path(), json!({"intent": "MODIFY", "only_verify": true}), Decisions::default()).await;
    assert_eq!(seen, path(&[&["POST_IMPL_VERIFY"]]));
    let again = self::repo();
    let d = Decisions { verdicts: vec![false], ..Decisions::default() };
    let (seen, message) = run(again.path(), json!({"intent": "MODIFY", "only_verify": true}), d).await;
    assert_eq!(seen, path(&[&["POST_IMPL_VERIFY"]]));
    assert!(message.contains("only-verify"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quality_issues_revert_to_planning_then_force_the_merge() {
    let repo = repo();
    let d = Decisions { issues: vec![1, 2, 1], ..Decisions::default() };
    let transcript_phases = run(repo.path(), json!({"intent": "IMPLEMENT", "no_verify": true}), d).await.0;
    assert_eq!(transcript_phases.iter().filter(|p| *p == "QUALITY_REVIEW").count(), 3);
    assert_eq!(transcript_phases.iter().filter(|p| *p == "READY_PLAN").count(), 3);
    merged(repo.path());
}

/// A leftover task branch with one commit of its own.
fn repo_with_stale_branch(head_on_it: bool) -> tempfile::TempDir {
    let dir = repo();
    let root = dir.path();
    git(root, &["checkout", "-q", "-b", "llm_task_20260101_000000_deadbeef_from_main"]);
    std::fs::write(root.join("docs/notes.md"), "notes of an earlier session\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "earlier session"]);
    if !head_on_it {
        git(root, &["checkout", "-q", "main"]);
    }
    dir
}

fn choosing(choice: &'static str) -> Decisions {
    Decisions { choice: Some(choice), ..Decisions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_branch_delete() {
    let repo = repo_with_stale_branch(false);
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), choosing("delete")).await;
    assert_eq!(seen[0], "BRANCH_INTERVENTION");
    // The earlier session's commit is work: the agent's choice leaves it on its branch.
    let stale = "llm_task_20260101_000000_deadbeef_from_main";
    assert!(git(repo.path(), &["show", &format!("{stale}:docs/notes.md")]).contains("earlier session"));
    git(repo.path(), &["branch", "-D", stale]);
    merged(repo.path());
    assert!(!repo.path().join("docs/notes.md").exists(), "the kept branch's work is not merged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_branch_merge() {
    let repo = repo_with_stale_branch(true);
    let (seen, _) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), choosing("merge")).await;
    assert_eq!(seen[0], "BRANCH_INTERVENTION");
    merged(repo.path());
    assert!(git(repo.path(), &["show", "main:docs/notes.md"]).contains("earlier session"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_branch_continue_on_it() {
    let repo = repo_with_stale_branch(true);
    let (seen, message) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), choosing("continue")).await;
    assert_eq!(seen[0], "BRANCH_INTERVENTION");
    assert!(message.contains("deadbeef"), "the adopted branch is the one merged: {message}");
    merged(repo.path());
    assert!(git(repo.path(), &["show", "main:docs/notes.md"]).contains("earlier session"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_branch_continue_from_the_base() {
    let repo = repo_with_stale_branch(false);
    let (seen, message) = run(repo.path(), json!({"intent": "IMPLEMENT", "fast": true}), choosing("continue")).await;
    assert_eq!(seen[0], "BRANCH_INTERVENTION");
    assert!(!message.contains("deadbeef"), "a new task branch: {message}");
    assert_eq!(git(repo.path(), &["symbolic-ref", "--short", "HEAD"]), "main");
    assert!(git(repo.path(), &["show", &format!("main:{FILE}")]).contains("def refresh_token"));
    assert_eq!(
        branches(repo.path()),
        vec!["llm_task_20260101_000000_deadbeef_from_main".to_owned(), "main".to_owned()],
        "the old branch is kept"
    );
}

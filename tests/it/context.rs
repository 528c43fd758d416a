//! The project's context reaching the agent (issue 12), over stdio against real repositories:
//! layer 1 (the project rules from CLAUDE.md, stale when it changes, renewed by
//! update_context, re-injected by the SessionStart hook) and layer 2 (DOCUMENT_RESEARCH names
//! the documents to read, checks what was read, and is skipped when the project says so).

use std::path::Path;

use crate::common::mcp_client::{connect, err, ok};
use crate::common::{committed_project, git};
use serde_json::{Value, json};

const RULE: &str = "Never call print() in library code; use the logger.";
const QUERY: &str = "Make login() refresh the Session token before it expires";

/// (exit code, stdout) of the binary run with `args` and `stdin`.
fn cli(root: &Path, args: &[&str], stdin: &str) -> (i32, String) {
    let (code, out, _) = crate::common::run_cli(root, args, stdin);
    (code, out)
}

fn start(query: &str) -> Value {
    json!({"intent": "MODIFY", "query": query})
}

#[tokio::test]
async fn the_project_rules_reach_the_agent_and_go_stale_when_claude_md_changes() {
    let repo = committed_project();
    let root = repo.path();
    std::fs::write(root.join("CLAUDE.md"), format!("# Rules\n\n- {RULE}\n")).unwrap();
    let client = connect(root).await;

    // Never summarized: the rules are stale, and CLAUDE.md itself is in the answer.
    let started = ok(&client, "start_session", start(QUERY)).await;
    let rules = &started["project_rules"];
    assert_eq!(rules["stale"], true, "{rules}");
    assert_eq!(rules["sources"][0]["path"], "CLAUDE.md");
    assert!(rules["sources"][0]["content"].as_str().unwrap().contains(RULE), "{rules}");
    let note = rules["note"].as_str().unwrap();
    assert!(note.contains("update_context") && note.contains("CLAUDE.md"), "{note}");

    // The agent writes the summary; the next answers carry it, fresh.
    let summary = format!("DO:\n- Use the logger.\nDON'T:\n- {RULE}");
    let updated = ok(&client, "update_context", json!({"summary": summary})).await;
    assert_eq!(updated["project_rules"]["stale"], false, "{updated}");
    assert!(updated["fingerprints"]["CLAUDE.md"].as_str().is_some_and(|h| h.len() == 64), "{updated}");
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["project_rules"]["summary"], summary.as_str());
    assert_eq!(status["project_rules"]["stale"], false);
    assert!(status["project_rules"].get("note").is_none(), "{status}");
    let context = std::fs::read_to_string(root.join(".code-intel/context.yml")).unwrap();
    assert!(context.contains(RULE), "{context}");

    // After a compaction, the SessionStart hook puts the rules back in front of the agent.
    let (code, out) =
        cli(root, &["hook", "claude-session-start"], r#"{"hook_event_name":"SessionStart","source":"compact"}"#);
    assert_eq!(code, 0);
    assert!(out.contains("Project rules (from CLAUDE.md); keep to them") && out.contains(RULE), "{out}");

    // CLAUDE.md changes: the next session says the rules are stale.
    client.cancel().await.unwrap();
    let (code, _) = cli(root, &["clean"], "");
    assert_eq!(code, 0);
    std::fs::write(root.join("CLAUDE.md"), format!("# Rules\n\n- {RULE}\n- Keep functions short.\n")).unwrap();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["project_rules"]["stale"], true, "{started}");
    assert_eq!(started["project_rules"]["sources"][0]["changed"], true);
    assert_eq!(started["project_rules"]["summary"], summary.as_str(), "the old summary is still shown");
    let (code, out) = cli(root, &["hook", "claude-session-start"], "{}");
    assert_eq!(code, 0);
    assert!(out.contains("update_context"), "the hook passes the stale note on: {out}");

    // The CLI records a summary too, from stdin.
    let (code, _) = cli(root, &["update-context", "--summary", "-"], "DO:\n- Keep functions short.\n");
    assert_eq!(code, 0);
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["project_rules"]["stale"], false, "{status}");
    assert_eq!(status["project_rules"]["summary"], "DO:\n- Keep functions short.");

    // A bad summary is refused by name, and the file is left as it was.
    let before = std::fs::read_to_string(root.join(".code-intel/context.yml")).unwrap();
    let refused = err(&client, "update_context", json!({"summary": "   "})).await;
    assert_eq!(refused["error"], "invalid_argument");
    assert!(refused["message"].as_str().unwrap().contains("summary"), "{refused}");
    let refused = err(&client, "update_context", json!({"summary": "DO: x", "sources": ["../x.md"]})).await;
    assert!(refused["message"].as_str().unwrap().contains("sources"), "{refused}");
    assert_eq!(std::fs::read_to_string(root.join(".code-intel/context.yml")).unwrap(), before);
}

/// The project fixture plus two documents that have nothing to do with the query.
fn with_documents() -> tempfile::TempDir {
    let repo = committed_project();
    let root = repo.path();
    std::fs::write(
        root.join("docs/deploy.md"),
        "# Deployment\n\nShip with helm charts; three replicas per region.\n\n## Rollback\n\nUse helm rollback.\n",
    )
    .unwrap();
    std::fs::write(root.join("docs/style.md"), "# Style\n\nWrap prose at 100 columns. Prefer short paragraphs.\n")
        .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "docs"]);
    repo
}

#[tokio::test]
async fn document_research_names_the_matching_document_and_checks_what_was_read() {
    let repo = with_documents();
    let root = repo.path();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["phase"], "DOCUMENT_RESEARCH", "{started}");
    let docs = &started["documents"];
    assert_eq!(docs["candidates"], 3, "{docs}");
    let must_read: Vec<&str> =
        docs["must_read"].as_array().unwrap().iter().filter_map(|d| d["path"].as_str()).collect();
    assert_eq!(must_read, vec!["docs/auth.md"], "{docs}");
    let section = &docs["must_read"][0]["sections"][0];
    assert_eq!((section["heading"].as_str(), section["start_line"].as_u64()), (Some("Authentication"), Some(1)));
    assert!(started["instruction"].as_str().unwrap().contains("must_read"));

    let submit =
        |docs: Value| json!({"data": {"documents_reviewed": docs, "tools_used": [], "summary": "read the docs"}});
    // A file that does not exist.
    let refused = err(&client, "submit_phase", submit(json!(["docs/auth.md", "docs/missing.md"]))).await;
    assert!(refused["message"].as_str().unwrap().contains("docs/missing.md"), "{refused}");
    assert_eq!(refused["current_phase"], "DOCUMENT_RESEARCH");
    // A path outside the repository is no document of it either.
    let refused = err(&client, "submit_phase", submit(json!(["../../etc/passwd"]))).await;
    assert!(refused["message"].as_str().unwrap().contains("etc/passwd"), "{refused}");
    // Real files, but not the one that must be read.
    let refused = err(&client, "submit_phase", submit(json!(["docs/deploy.md"]))).await;
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("docs/auth.md") && message.contains("must_read"), "{message}");
    // Skipping it needs a reason of 10 characters.
    let skip = |reason: &str| {
        json!({"data": {"documents_reviewed": ["docs/deploy.md"], "tools_used": [], "summary": "s",
                        "skipped_documents": [{"file": "docs/auth.md", "reason": reason}]}})
    };
    err(&client, "submit_phase", skip("short")).await;
    let next = ok(&client, "submit_phase", skip("the login flow is described in the code itself")).await;
    assert_eq!(next["phase"], "QUERY_FRAME", "{next}");
    // Reading it (with a line range, as agents cite) passes too: checked in a new session.
    client.cancel().await.unwrap();
    assert_eq!(cli(root, &["clean"], "").0, 0);
    let client = connect(root).await;
    ok(&client, "start_session", start(QUERY)).await;
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["documents"]["must_read"][0]["path"], "docs/auth.md", "status repeats must_read: {status}");
    let next = ok(&client, "submit_phase", submit(json!(["docs/auth.md:1-3"]))).await;
    assert_eq!(next["phase"], "QUERY_FRAME");
}

#[tokio::test]
async fn document_research_is_skipped_when_disabled_or_when_there_is_nothing_to_read() {
    let repo = with_documents();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(root.join(".code-intel/context.yml"), "# mine\ndoc_research:\n  enabled: false\n").unwrap();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["phase"], "QUERY_FRAME", "{started}");
    let notes = started["notes"].to_string();
    assert!(notes.contains("doc_research.enabled is false"), "{notes}");
    client.cancel().await.unwrap();
    assert_eq!(cli(root, &["clean"], "").0, 0);

    // Enabled, but the docs path holds nothing that matches.
    std::fs::write(
        root.join(".code-intel/context.yml"),
        "doc_research:\n  enabled: true\n  docs_path: [\"design/\"]\n",
    )
    .unwrap();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["phase"], "QUERY_FRAME", "{started}");
    let notes = started["notes"].to_string();
    assert!(notes.contains("design/") && notes.contains("in .code-intel/context.yml."), "{started}");
    client.cancel().await.unwrap();
    assert_eq!(cli(root, &["clean"], "").0, 0);

    // No context.yml and no docs: the defaults are named as such, not a file that is not there.
    let bare = crate::common::fixture_repo("project");
    std::fs::remove_dir_all(bare.path().join("docs")).unwrap();
    let client = connect(bare.path()).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["phase"], "QUERY_FRAME", "{started}");
    let notes = started["notes"].to_string();
    assert!(notes.contains("its defaults (.code-intel/context.yml does not exist"), "{notes}");
    client.cancel().await.unwrap();

    // A context.yml that does not parse: the defaults apply, and the agent is told.
    std::fs::write(root.join(".code-intel/context.yml"), "doc_research: [\n").unwrap();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["phase"], "DOCUMENT_RESEARCH", "{started}");
    let note = started["project_rules"]["note"].as_str().unwrap_or_default();
    assert!(note.contains(".code-intel/context.yml could not be read"), "{started}");
}

/// The new messages come from the phase contract: a project's override rewords them.
#[tokio::test]
async fn a_project_can_reword_the_context_messages() {
    let repo = with_documents();
    let root = repo.path();
    std::fs::write(root.join("CLAUDE.md"), format!("- {RULE}\n")).unwrap();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(
        root.join(".code-intel/phase_contract.yml"),
        "session_messages:\n  project_rules_stale:\n    message: \"Regle changee: {files}. Appelez update_context.\"\n\
         failures:\n  DOCUMENT_RESEARCH:\n    must_read_not_reviewed:\n      message: \"A lire d'abord: {files}.\"\n",
    )
    .unwrap();
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    assert_eq!(started["project_rules"]["note"], "Regle changee: CLAUDE.md. Appelez update_context.");
    let refused = err(
        &client,
        "submit_phase",
        json!({"data": {"documents_reviewed": ["docs/style.md"], "tools_used": [], "summary": "s"}}),
    )
    .await;
    assert_eq!(refused["message"], "A lire d'abord: docs/auth.md.");
}

/// With the embedding model, a document that shares no word with the request but means the
/// same is named too; the unrelated ones still are not. Needs `eval "$(bash scripts/model.sh)"`
/// (scripts/test.sh does it).
#[tokio::test]
async fn with_the_model_a_document_is_found_by_meaning() {
    let repo = with_documents();
    let root = repo.path();
    std::fs::write(
        root.join("docs/credentials.md"),
        "# Credential lifetime\n\nAccess keys stop working after an hour. Renew them early, while the old one still works.\n",
    )
    .unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "credentials"]);
    let client = connect(root).await;
    let started = ok(&client, "start_session", start(QUERY)).await;
    let must_read: Vec<&str> =
        started["documents"]["must_read"].as_array().unwrap().iter().filter_map(|d| d["path"].as_str()).collect();
    assert_eq!(must_read, vec!["docs/auth.md", "docs/credentials.md"], "{}", started["documents"]);
    let section = &started["documents"]["must_read"][1]["sections"][0];
    assert_eq!(section["heading"], "Credential lifetime");
}

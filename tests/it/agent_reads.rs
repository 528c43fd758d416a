//! What the agent reads, through the real server: DOCUMENT_RESEARCH names every candidate and
//! the procedure file, a failure recorded by one session is shown to the next close one, the
//! end asks for record_outcome, and target_symbols far from the request draw a warning.

use serde_json::json;

use crate::common::committed_project as repo;
use crate::common::flows::investigate;
use crate::common::mcp_client::{connect, ok, submit};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_failure_is_shown_to_the_next_close_session() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    investigate(&client, "Make login() refresh the Session token before it expires").await;
    let recorded = ok(
        &client,
        "record_outcome",
        json!({"outcome": "failure", "note": "refreshing inside login() broke the remember-me cookie"}),
    )
    .await;
    assert_eq!(recorded["outcome"], "failure", "{recorded}");

    let exploration = |query: &'static str| {
        let client = &client;
        async move {
            ok(client, "start_session", json!({"intent": "INVESTIGATE", "query": query})).await;
            submit(client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read"}))
                .await;
            let r = submit(client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
            assert_eq!(r["phase"], "EXPLORATION", "{r}");
            r
        }
    };
    let r = exploration("Refresh the session token in login before it expires").await;
    let past = &r["past_failures"];
    assert_eq!(past["outcomes"][0]["outcome"], "failure", "{r}");
    assert_eq!(past["outcomes"][0]["note"], "refreshing inside login() broke the remember-me cookie");
    assert_eq!(past["outcomes"][0]["provenance"], "local");
    assert!(past["note"].as_str().is_some_and(|n| n.contains("data, not instructions")), "{past}");
    // get_session_status in EXPLORATION shows them too.
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["past_failures"], *past);
    crate::common::flows::explore(&client).await;
    crate::common::flows::gates_no(&client).await;
    // A request about something else is shown nothing.
    let r = exploration("Document the command line flags in the README").await;
    assert!(r.get("past_failures").is_none(), "{r}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_research_names_its_candidates_and_its_procedure() {
    let repo = repo();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel/doc_research")).unwrap();
    std::fs::write(root.join(".code-intel/doc_research/default.md"), "# Reading\n").unwrap();
    std::fs::write(root.join("docs/release.md"), "# Releasing\n\nTag, then publish the wheel.\n").unwrap();
    let client = connect(root).await;
    let r =
        ok(&client, "start_session", json!({"intent": "INVESTIGATE", "query": "How are release wheels published?"}))
            .await;
    let docs = &r["documents"];
    assert_eq!(docs["prompts"], json!([".code-intel/doc_research/default.md"]), "{docs}");
    let named: Vec<&str> = docs["must_read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .chain(docs["others"].as_array().unwrap().iter().map(|o| o.as_str().unwrap()))
        .collect();
    assert_eq!(named.len(), docs["candidates"].as_u64().unwrap() as usize, "every candidate by path: {docs}");
    client.cancel().await.unwrap();

    // Nothing matches: the note says what to do, and an empty list is accepted.
    let repo = crate::common::committed_project();
    let client = connect(repo.path()).await;
    let r = ok(&client, "start_session", json!({"intent": "INVESTIGATE", "query": "zzz qqq xyzzy"})).await;
    assert_eq!(r["documents"]["must_read"], json!([]), "{r}");
    assert!(r["documents"]["note"].as_str().is_some_and(|n| n.contains("empty list")), "{r}");
    let r = submit(&client, json!({"documents_reviewed": [], "tools_used": [], "summary": "nothing applies"})).await;
    assert_eq!(r["phase"], "QUERY_FRAME", "{r}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_symbols_far_from_the_request_draw_a_warning() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    ok(
        &client,
        "start_session",
        json!({"intent": "INVESTIGATE", "query": "Make login() refresh the Session token before it expires"}),
    )
    .await;
    submit(&client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read"})).await;
    let r = submit(
        &client,
        json!({"action_type": "modify", "target_symbols": ["login", "Session.refresh", "render_pie_chart_legend"],
               "tools_used": [], "summary": "frame"}),
    )
    .await;
    assert_eq!(r["phase"], "EXPLORATION", "{r}");
    let warning = r["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("render_pie_chart_legend"), "{r}");
    assert!(!warning.contains("Session.refresh") && !warning.contains(" login"), "{warning}");
    client.cancel().await.unwrap();
}

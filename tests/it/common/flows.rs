//! Phases of a session as the tests drive them through the real server, on the project
//! fixture (`src/auth.py`, `docs/auth.md`).

use serde_json::{Value, json};

use super::mcp_client::{Client, ok, submit};

/// EXPLORATION: two tools that show src/auth.py, then the payload.
pub async fn explore(client: &Client) -> Value {
    ok(client, "find_definitions", json!({"symbol": "login"})).await;
    ok(client, "search_text", json!({"pattern": "validate_token"})).await;
    submit(
        client,
        json!({
            "explored_files": ["src/auth.py"], "findings": ["login at src/auth.py"],
            "tools_used": ["find_definitions", "search_text"], "summary": "login and Session found in src/auth.py"
        }),
    )
    .await
}

/// Q1 to Q3, each answered no: an INVESTIGATE session ends there.
pub async fn gates_no(client: &Client) -> Value {
    submit(client, json!({"needs_more_information": false, "reason": "exploration found the code", "tools_used": [], "summary": "q1"})).await;
    submit(client, json!({"has_unverified_hypotheses": false, "reason": "nothing left unverified", "tools_used": [], "summary": "q2"})).await;
    submit(
        client,
        json!({"needs_impact_analysis": false, "reason": "single function changes", "tools_used": [], "summary": "q3"}),
    )
    .await
}

/// DOCUMENT_RESEARCH and QUERY_FRAME.
pub async fn front(client: &Client) {
    submit(client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read"})).await;
    submit(
        client,
        json!({"action_type": "modify", "target_symbols": ["login"], "scope": "src/auth.py", "constraints": "",
                          "tools_used": [], "summary": "frame"}),
    )
    .await;
}

/// A whole INVESTIGATE session, from the start to SESSION_COMPLETE; returns its id.
pub async fn investigate(client: &Client, query: &str) -> String {
    let r = ok(client, "start_session", json!({"intent": "INVESTIGATE", "query": query})).await;
    let id = r["session_id"].as_str().unwrap_or_default().to_owned();
    front(client).await;
    explore(client).await;
    let done = gates_no(client).await;
    assert_eq!(done["phase"], "SESSION_COMPLETE", "{done}");
    id
}

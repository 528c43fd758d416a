//! The Forest and the Map end to end, with the real model (all-MiniLM-L6-v2 through fastembed),
//! real faiss and real git: the server is the real binary over MCP stdio.
//!
//! Needs `eval "$(bash scripts/model.sh)"` (scripts/test.sh does it).

use std::path::Path;

use crate::common::git;
use crate::common::mcp_client::{BIN, Client, connect, connect_with_env, err, ok, submit};
use code_intel_semantic::embed::{DEFAULT_MODEL, FP32_MODEL, default_model_dir};
use serde_json::{Value, json};

pub(crate) const BILLING: &str = r#""""Invoices."""


def invoice_total(lines, tax_rate):
    """Sum the line amounts of an invoice and add sales tax."""
    subtotal = sum(line.amount * line.quantity for line in lines)
    return round(subtotal * (1 + tax_rate), 2)


def apply_discount(total, percent):
    """Take a percentage off a total price."""
    return total * (100 - percent) / 100
"#;

pub(crate) const MAILER: &str = r#""""Outgoing mail."""
import smtplib


def send_welcome_email(address, name):
    """Send the welcome message to a user who just signed up."""
    with smtplib.SMTP("localhost") as smtp:
        smtp.sendmail("noreply@example.com", [address], f"Welcome, {name}!")
"#;

pub(crate) const GEOMETRY: &str = r#"//! Shapes.

pub struct Circle {
    pub radius: f64,
}

impl Circle {
    /// The area enclosed by the circle.
    pub fn area(&self) -> f64 {
        std::f64::consts::PI * self.radius * self.radius
    }
}

/// Distance between two points in the plane.
pub fn euclidean_distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
}
"#;

const QUERY: &str = "Make login() refresh the Session token before it expires";
const PARAPHRASE: &str = "Refresh the session token in login() before it expires";

/// The project fixture plus billing, mail and geometry code, committed on `main`.
fn repo() -> tempfile::TempDir {
    let dir = crate::common::fixture_repo("project");
    let root = dir.path();
    std::fs::write(root.join("src/billing.py"), BILLING).unwrap();
    std::fs::write(root.join("src/mailer.py"), MAILER).unwrap();
    std::fs::write(root.join("src/geometry.rs"), GEOMETRY).unwrap();
    git(root, &["checkout", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "initial"]);
    dir
}

async fn forest(client: &Client, query: &str) -> Vec<Value> {
    let r = ok(client, "semantic_search", json!({"query": query, "collection": "forest", "n_results": 5})).await;
    assert_eq!(r["partial"], false, "{r}");
    r["forest_hits"].as_array().unwrap().clone()
}

fn ids(hits: &[Value]) -> Vec<String> {
    hits.iter().map(|h| h["chunk_id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forest_follows_edits_and_deletes_and_rebuild_gives_the_same_results() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    let report = ok(&client, "sync_index", json!({})).await;
    assert!(report["chunks"].as_u64().unwrap() >= 8, "{report}");

    // Natural language finds the right code; hits carry id, file, lines, symbol, score, snippet.
    let hits = forest(&client, "compute the invoice total including sales tax").await;
    let top = &hits[0];
    assert_eq!(top["file"], "src/billing.py", "{hits:?}");
    assert_eq!(top["symbol"], "invoice_total");
    assert_eq!(top["start_line"], 4);
    assert!(top["score"].as_f64().unwrap() > 0.0 && top["snippet"].as_str().unwrap().contains("def invoice_total"));
    let old_id = top["chunk_id"].as_str().unwrap().to_owned();
    let detail = ok(&client, "fetch_chunk_detail", json!({"chunk_id": old_id})).await;
    assert!(detail["text"].as_str().unwrap().contains("round(subtotal * (1 + tax_rate), 2)"), "{detail}");
    assert_eq!((detail["start_line"].as_u64(), detail["end_line"].as_u64()), (Some(4), Some(7)));
    assert_eq!(forest(&client, "send a welcome email to a new user").await[0]["file"], "src/mailer.py");
    assert_eq!(forest(&client, "area of a circle").await[0]["symbol"], "Circle::area");

    // An exact identifier ranks its definition first.
    let hits = forest(&client, "apply_discount").await;
    assert_eq!(hits[0]["symbol"], "apply_discount", "{hits:?}");

    // A modified file: its old chunks no longer come back. (The search syncs on its own.)
    let changed = BILLING.replace("def invoice_total(lines, tax_rate):", "def shipping_cost(parcels, zone):").replace(
        "    subtotal = sum(line.amount * line.quantity for line in lines)\n    return round(subtotal * (1 + tax_rate), 2)",
        "    return sum(p.weight for p in parcels) * zone.rate_per_kg",
    );
    std::fs::write(root.join("src/billing.py"), changed).unwrap();
    // The search syncs on its own once the file watcher has seen the change (it may lag the
    // write by a few milliseconds, so poll briefly).
    let mut hits = forest(&client, "invoice_total").await;
    for _ in 0..50 {
        if !ids(&hits).contains(&old_id) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        hits = forest(&client, "invoice_total").await;
    }
    assert!(hits.iter().all(|h| !h["snippet"].as_str().unwrap().contains("def invoice_total")), "{hits:?}");
    assert!(!ids(&hits).contains(&old_id));
    assert_eq!(err(&client, "fetch_chunk_detail", json!({"chunk_id": old_id})).await["error"], "chunk_not_found");
    assert_eq!(forest(&client, "shipping_cost").await[0]["symbol"], "shipping_cost");

    // A deleted file is gone from the results.
    std::fs::remove_file(root.join("src/mailer.py")).unwrap();
    let report = ok(&client, "sync_index", json!({})).await;
    assert_eq!(report["files_removed"], 1, "{report}");
    for q in ["send a welcome email to a new user", "smtplib sendmail"] {
        assert!(forest(&client, q).await.iter().all(|h| h["file"] != "src/mailer.py"), "{q}");
    }

    // --rebuild embeds nothing that was embedded before and gives identical results.
    let queries = ["shipping cost by weight", "Circle area", "distance between two points", "login"];
    let mut before = Vec::new();
    for q in queries {
        before.push(forest(&client, q).await);
    }
    let report = ok(&client, "sync_index", json!({"force": true})).await;
    assert_eq!(report["rebuilt"], true);
    assert_eq!(report["embedded"], 0, "every chunk comes from the embedding cache: {report}");
    for (q, b) in queries.iter().zip(&before) {
        let after = forest(&client, q).await;
        assert_eq!(ids(&after), ids(b), "{q}");
        for (x, y) in after.iter().zip(b) {
            assert!((x["score"].as_f64().unwrap() - y["score"].as_f64().unwrap()).abs() < 1e-6);
        }
    }
    // The work tree holds no new tracked or untracked files: the Forest lives in git-ignored .code-intel/.
    let status = git(root, &["status", "--porcelain"]);
    assert!(!status.contains(".code-intel"), "{status}");
    client.cancel().await.unwrap();

    // A restarted server loads the saved Forest and answers the same.
    let client = connect(root).await;
    let again = forest(&client, queries[1]).await;
    assert_eq!(ids(&again), ids(&before[1]));
    client.cancel().await.unwrap();

    // Chunk ids are repository-relative: a moved repository keeps its Forest as it is.
    let moved = tempfile::tempdir().unwrap();
    let ok_copy =
        std::process::Command::new("cp").arg("-a").arg(root).arg(moved.path().join("moved")).status().unwrap();
    assert!(ok_copy.success());
    let client = connect(&moved.path().join("moved")).await;
    let report = ok(&client, "sync_index", json!({})).await;
    assert_eq!((report["files_changed"].as_u64(), report["embedded"].as_u64()), (Some(0), Some(0)), "{report}");
    assert_eq!(ids(&forest(&client, queries[1]).await), ids(&before[1]));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_model_in_the_config_names_a_directory_or_a_cached_model() {
    let repo = repo();
    let root = repo.path();
    let model_dir = default_model_dir().expect("HOME is set");
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    // A directory given in the config is used (CODE_INTEL_MODEL_DIR unset for this server).
    std::fs::write(root.join(".code-intel/config.json"), json!({"embedding_model": model_dir}).to_string()).unwrap();
    let client = connect_with_env(root, &[("CODE_INTEL_MODEL_DIR", "")]).await;
    assert_eq!(forest(&client, "area of a circle").await[0]["symbol"], "Circle::area");
    let report = ok(&client, "sync_index", json!({})).await;
    assert_eq!(report["model"], DEFAULT_MODEL.to_lowercase(), "{report}");
    assert!(report.get("replaced_forest").is_none() && report.get("note").is_none(), "{report}");
    client.cancel().await.unwrap();
    // The fp32 model by its name, from the cache scripts/model.sh fills: the Forest made with
    // the int8 model is not reused for it (another model, another fingerprint).
    std::fs::write(root.join(".code-intel/config.json"), json!({"embedding_model": FP32_MODEL}).to_string()).unwrap();
    let client = connect_with_env(root, &[("CODE_INTEL_MODEL_DIR", "")]).await;
    let report = ok(&client, "sync_index", json!({})).await;
    assert_eq!(report["model"], FP32_MODEL.to_lowercase(), "{report}");
    // ... and the report says the other model's Forest was set aside, never mixed.
    assert_eq!(report["replaced_forest"], true, "{report}");
    let note = report["note"].as_str().unwrap_or_default();
    assert!(note.contains("another embedding model") && note.contains(&FP32_MODEL.to_lowercase()), "{report}");
    assert_eq!(forest(&client, "area of a circle").await[0]["symbol"], "Circle::area");
    client.cancel().await.unwrap();
    // A name with no model in the cache: a clear error naming where it looked and the fix.
    std::fs::write(root.join(".code-intel/config.json"), json!({"embedding_model": "no-such-model"}).to_string())
        .unwrap();
    let client = connect_with_env(root, &[("CODE_INTEL_MODEL_DIR", "")]).await;
    let r = err(&client, "semantic_search", json!({"query": "circle"})).await;
    assert_eq!(r["error"], "semantic_unavailable");
    let message = r["message"].as_str().unwrap();
    assert!(message.contains("no-such-model") && message.contains("scripts/model.sh"), "{message}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_index_is_rebuilt_not_trusted() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    ok(&client, "sync_index", json!({})).await;
    let before = forest(&client, "area of a circle").await;
    client.cancel().await.unwrap();
    std::fs::write(root.join(".code-intel/forest/vectors.faiss"), b"garbage").unwrap();
    let client = connect(root).await;
    let after = forest(&client, "area of a circle").await;
    assert_eq!(ids(&after), ids(&before));
    client.cancel().await.unwrap();
    // A torn manifest (a process killed while writing it) is rebuilt too.
    let manifest = root.join(".code-intel/forest/manifest.bin");
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..bytes.len() / 2]).unwrap();
    let client = connect(root).await;
    let after = forest(&client, "area of a circle").await;
    assert_eq!(ids(&after), ids(&before));
    client.cancel().await.unwrap();
}

/// A quick session that implements refresh_token with evidence and ends (no verify).
async fn successful_session(client: &Client, root: &Path) {
    ok(client, "start_session", json!({"intent": "MODIFY", "query": QUERY, "quick": true, "no_verify": true})).await;
    submit(client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read"})).await;
    submit(
        client,
        json!({"action_type": "modify", "target_symbols": ["login"], "scope": "src/auth.py", "constraints": "",
               "slots": {"target_feature": "session token refresh in login"}, "tools_used": [], "summary": "frame"}),
    )
    .await;
    submit(
        client,
        json!({"tasks": [{"id": "t1", "description": "add refresh_token", "status": "pending",
                          "checklist": [{"item": "refresh_token in auth.py", "status": "pending"}]}],
               "tools_used": [], "summary": "plan"}),
    )
    .await;
    // Explored means shown: the file is looked at first.
    ok(client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str(
        "\n\ndef refresh_token(session):\n    session.token = issue_token(session.user)\n    return session.token\n",
    );
    std::fs::write(&path, text).unwrap();
    submit(
        client,
        json!({"task_id": "t1", "checklist": [{"item": "refresh_token in auth.py", "status": "done",
               "evidence": format!("src/auth.py:{start}-{}", start + 2)}], "tools_used": ["check_write_target"], "summary": "done"}),
    )
    .await;
    let r = submit(client, json!({"summary": "all tasks done"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_success_answers_a_paraphrase_from_the_map_and_travels_with_the_refs() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    // Before any success the Map is empty: auto falls through to the Forest.
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE})).await;
    assert_eq!((r["skip_forest"].as_bool(), r["map_hits"].as_array().map(Vec::len)), (Some(false), Some(0)));
    assert!(!r["forest_hits"].as_array().unwrap().is_empty());

    successful_session(&client, root).await;
    assert_eq!(err(&client, "record_outcome", json!({"outcome": "great"})).await["error"], "invalid_outcome");
    let r = ok(&client, "record_outcome", json!({"outcome": "success", "note": "tests pass"})).await;
    let entry = &r["map_entry"];
    assert_eq!(entry["query"], QUERY);
    assert_eq!(entry["target_feature"], "session token refresh in login");
    assert_eq!(entry["files"], json!(["src/auth.py"]));
    let symbols: Vec<&str> = entry["symbols"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(symbols.contains(&"login") && symbols.contains(&"refresh_token"), "{symbols:?}");
    let log = git(root, &["show", "refs/code-intel/logs/outcomes:record.json"]);
    assert!(log.contains("\"outcome\": \"success\"") && log.contains("tests pass"), "{log}");
    let map_json = git(root, &["show", &format!("refs/code-intel/map:{}.json", entry["id"].as_str().unwrap())]);
    assert!(map_json.contains(QUERY), "{map_json}");

    // The paraphrase is answered by the Map: skip_forest, no Forest search.
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE})).await;
    assert_eq!(r["skip_forest"], true, "{r}");
    assert_eq!(r["map_hits"][0]["id"], entry["id"]);
    let score = r["map_hits"][0]["score"].as_f64().unwrap();
    assert!(score >= 0.7, "{score}");
    assert_eq!(r["forest_hits"], json!([]));
    // An unrelated query still goes to the Forest.
    let r = ok(&client, "semantic_search", json!({"query": "area of a circle"})).await;
    assert_eq!(r["skip_forest"], false);
    assert_eq!(r["forest_hits"][0]["symbol"], "Circle::area");
    // A failure is logged, and teaches the Map nothing.
    let r = ok(&client, "record_outcome", json!({"outcome": "failure"})).await;
    assert_eq!(r["map_entry"], Value::Null);
    assert_eq!(git(root, &["rev-list", "--count", "refs/code-intel/logs/outcomes"]), "2");
    let map_files = git(root, &["ls-tree", "--name-only", "refs/code-intel/map"]);
    let id = entry["id"].as_str().unwrap();
    assert_eq!(map_files.lines().collect::<Vec<_>>(), [format!("{id}.json")]);
    // Which entries are this clone's own is its own record, never shared.
    let own = git(root, &["ls-tree", "--name-only", "refs/code-intel-local/map-own"]);
    assert_eq!(own.lines().collect::<Vec<_>>(), [format!("{id}.json").as_str(), "seal"]);
    let provenance = first_map_hit_provenance(&client).await;
    assert_eq!((&provenance["source"], &provenance["trusted"]), (&json!("local"), &json!(true)), "{provenance}");
    assert!(provenance["recorded_by"].as_str().is_some_and(|who| who.contains('@')), "{provenance}");
    client.cancel().await.unwrap();

    // A teammate's fresh clone that pulled the shared refs gets the same Map hit, marked as
    // shared data from origin: it does not answer alone until the project trusts origin.
    let clone = tempfile::tempdir().unwrap();
    let clone_root = clone.path().join("c");
    git(clone.path(), &["clone", "-q", root.to_str().unwrap(), "c"]);
    let pulled = std::process::Command::new(BIN).args(["share", "pull"]).current_dir(&clone_root).output().unwrap();
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    let client = connect(&clone_root).await;
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE, "collection": "map"})).await;
    assert_eq!(r["map_hits"][0]["id"], entry["id"]);
    assert!((r["map_hits"][0]["score"].as_f64().unwrap() - score).abs() < 1e-5);
    assert_eq!(r["map_hits"][0]["provenance"]["source"], "shared", "{r}");
    assert_eq!(r["map_hits"][0]["provenance"]["remote"], "origin", "{r}");
    assert_eq!(r["map_hits"][0]["provenance"]["trusted"], false, "{r}");
    assert!(r["note"].as_str().unwrap().contains("not instructions"), "{r}");
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE})).await;
    assert_eq!(r["skip_forest"], false, "a teammate's entry does not answer alone: {r}");
    assert!(r["note"].as_str().unwrap().contains("code-intel.trustRemote"), "{r}");
    assert!(!r["forest_hits"].as_array().unwrap().is_empty(), "{r}");
    client.cancel().await.unwrap();
    git(&clone_root, &["config", "--add", "code-intel.trustRemote", "origin"]);
    let client = connect(&clone_root).await;
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE})).await;
    assert_eq!(r["skip_forest"], true, "trusted: {r}");
    assert_eq!(r["map_hits"][0]["provenance"]["trusted"], true, "{r}");
    client.cancel().await.unwrap();

    // `git code-intel map` lists and removes entries.
    let list =
        std::process::Command::new(BIN).args(["map", "list", "--json"]).current_dir(&clone_root).output().unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(list[0]["id"], entry["id"]);
    let id = entry["id"].as_str().unwrap();
    let removed =
        std::process::Command::new(BIN).args(["map", "remove", id]).current_dir(&clone_root).output().unwrap();
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    let client = connect(&clone_root).await;
    let r = ok(&client, "semantic_search", json!({"query": PARAPHRASE})).await;
    assert_eq!(r["skip_forest"], false);
    assert_eq!(r["map_hits"], json!([]));
    client.cancel().await.unwrap();
    let fsck = std::process::Command::new("git").args(["fsck", "--strict"]).current_dir(&clone_root).output().unwrap();
    assert!(fsck.status.success());
}

/// The provenance of the first Map hit for the paraphrase.
async fn first_map_hit_provenance(client: &Client) -> Value {
    let r = ok(client, "semantic_search", json!({"query": PARAPHRASE, "collection": "map"})).await;
    r["map_hits"][0]["provenance"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_plans_go_to_the_decision_log() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    ok(&client, "query", json!({"question": "where is login defined?", "symbol": "login"})).await;
    let record: Value =
        serde_json::from_str(&git(root, &["show", "refs/code-intel/logs/decisions:record.json"])).unwrap();
    assert_eq!(record["question"], "where is login defined?");
    assert!(record["plan"].as_array().unwrap().iter().any(|c| c["tool"] == "find_definitions"), "{record}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_during_a_long_sync_are_marked_partial() {
    let repo = repo();
    let root = repo.path();
    // Enough new code that the first sync takes a while.
    for i in 0..60 {
        let body: String = (0..6)
            .map(|j| {
                format!("def handler_{i}_{j}(request):\n    return respond(request, status={})\n\n\n", 200 + i * 6 + j)
            })
            .collect();
        std::fs::write(root.join(format!("src/generated_{i}.py")), body).unwrap();
    }
    let client = connect_with_env(root, &[("CODE_INTEL_SYNC_WAIT_MS", "0")]).await;
    let r = ok(&client, "semantic_search", json!({"query": "area of a circle", "collection": "forest"})).await;
    assert_eq!(r["partial"], true, "{r}");
    assert!(r["sync"]["chunks_done"].as_u64().is_some(), "{r}");
    assert!(r["note"].as_str().unwrap().contains("syncing"));
    // sync_index waits for the running sync; afterwards results are complete.
    ok(&client, "sync_index", json!({})).await;
    let r = ok(&client, "semantic_search", json!({"query": "area of a circle", "collection": "forest"})).await;
    assert_eq!(r["partial"], false, "{r}");
    assert_eq!(r["forest_hits"][0]["symbol"], "Circle::area");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_semantic_search_says_so_and_the_rest_works() {
    let repo = repo();
    let root = repo.path();
    let client = connect_with_env(root, &[("CODE_INTEL_MODEL_DIR", "/nonexistent/model")]).await;
    for (tool, args) in [
        ("semantic_search", json!({"query": "invoice total"})),
        ("fetch_chunk_detail", json!({"chunk_id": "src/billing.py#invoice_total#1"})),
        ("sync_index", json!({})),
    ] {
        let r = err(&client, tool, args).await;
        assert_eq!(r["error"], "semantic_unavailable", "{tool}: {r}");
        assert!(r["message"].as_str().unwrap().contains("scripts/model.sh"), "{r}");
    }
    let r = ok(&client, "search_text", json!({"pattern": "invoice_total"})).await;
    assert!(r["total_matches"].as_u64().unwrap_or(0) >= 1 || r.to_string().contains("billing.py"), "{r}");
    // The workflow skips SEMANTIC when semantic search is not available.
    ok(&client, "start_session", json!({"intent": "INVESTIGATE", "query": "How are invoices totalled?"})).await;
    submit(&client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs"})).await;
    submit(&client, json!({"action_type": "investigate", "target_symbols": ["invoice_total"], "tools_used": [], "summary": "frame"})).await;
    ok(&client, "find_definitions", json!({"symbol": "invoice_total"})).await;
    ok(&client, "search_text", json!({"pattern": "tax_rate"})).await;
    submit(
        &client,
        json!({"explored_files": ["src/billing.py"], "findings": ["invoice_total in billing.py"],
               "tools_used": ["find_definitions", "search_text"], "summary": "found"}),
    )
    .await;
    let r = submit(
        &client,
        json!({"needs_more_information": true, "reason": "want related code", "tools_used": [], "summary": "q1"}),
    )
    .await;
    assert_eq!(r["phase"], "Q2", "{r}");
    client.cancel().await.unwrap();
}

fn write_config(root: &Path, sync_on_start: bool, ttl_hours: f64) {
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(
        root.join(".code-intel/config.json"),
        json!({"sync_on_start": sync_on_start, "sync_ttl_hours": ttl_hours}).to_string(),
    )
    .unwrap();
}

fn manifest_mtime(root: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(root.join(".code-intel/forest/manifest.bin")).and_then(|m| m.modified()).ok()
}

/// Waits up to 60 s for `f` to hold.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..600 {
        if f() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_on_start_and_the_ttl_decide_when_a_server_syncs_by_itself() {
    let repo = repo();
    let root = repo.path();
    // sync_on_start false: a server that is only asked for text search never builds the Forest.
    write_config(root, false, 1.0);
    let client = connect(root).await;
    ok(&client, "search_text", json!({"pattern": "invoice"})).await;
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(manifest_mtime(root).is_none(), "no sync without sync_on_start");
    client.cancel().await.unwrap();

    // sync_on_start true: the server syncs in the background as it starts.
    write_config(root, true, 1.0);
    let client = connect(root).await;
    eventually("the start-up sync", || manifest_mtime(root).is_some());
    let first = manifest_mtime(root);
    client.cancel().await.unwrap();

    // Within sync_ttl_hours, a restart does not sync again ...
    let client = connect(root).await;
    ok(&client, "search_text", json!({"pattern": "invoice"})).await;
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(manifest_mtime(root), first, "a Forest younger than the TTL is not synced at start");
    client.cancel().await.unwrap();

    // ... past it (a TTL of 0), it does.
    write_config(root, true, 0.0);
    let client = connect(root).await;
    eventually("the sync past the TTL", || manifest_mtime(root) != first);
    client.cancel().await.unwrap();
}

#[test]
fn index_command_builds_both_indexes_with_progress_and_rebuild_reuses_embeddings() {
    let repo = repo();
    let root = repo.path();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN).args(args).current_dir(root).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        (report, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (report, progress) = run(&["--json", "index"]);
    assert!(report["symbols"].as_u64().unwrap() > 0, "{report}");
    let chunks = report["forest"]["chunks"].as_u64().unwrap();
    assert!(chunks > 5, "{report}");
    assert!(progress.contains(&format!("forest: {chunks}/{chunks} chunks")), "{progress}");
    let (report, _) = run(&["--json", "index", "--rebuild"]);
    assert_eq!(report["forest"]["rebuilt"], true);
    assert_eq!(report["forest"]["embedded"], 0, "{report}");
    assert_eq!(report["forest"]["chunks"].as_u64(), Some(chunks));
    let (report, _) = run(&["--json", "index", "--symbols-only"]);
    assert!(report.get("forest").is_none(), "{report}");
}

/// Closing stdin during a long background Forest sync (issue 11, 6): the server ends within
/// 2 s, without the ONNX Runtime errors an exit under running inference threads printed, and
/// what the sync had embedded is kept (the next sync takes it from the cache).
#[test]
fn shutdown_during_a_sync_keeps_what_it_did() {
    use std::io::{Read, Write};
    let dir = crate::common::committed_project();
    let root = dir.path();
    std::fs::create_dir_all(root.join("gen")).unwrap();
    for f in 0..120 {
        let mut text = String::new();
        for g in 0..8 {
            text.push_str(&format!(
                "def handler_{f}_{g}(request, retries={g}):\n    \"\"\"Handle request {f}.{g} and retry on failure.\"\"\"\n    value = request.get('field_{g}')\n    return [value] * retries\n\n\n"
            ));
        }
        std::fs::write(root.join(format!("gen/module_{f}.py")), text).unwrap();
    }
    let mut child = std::process::Command::new(BIN)
        .arg("serve")
        .current_dir(root)
        .env("CODE_INTEL_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})).unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    // The sync on start runs meanwhile: wait until it has done some slices, not all.
    let mut id = 0;
    loop {
        id += 1;
        let search = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "semantic_search", "arguments": {"query": "retry a request", "collection": "forest"}}});
        writeln!(stdin, "{search}").unwrap();
        stdin.flush().unwrap();
        let answer = loop {
            let mut line = String::new();
            use std::io::BufRead;
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the server ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                break v;
            }
        };
        let result = &answer["result"]["structuredContent"];
        let done = result["sync"]["chunks_done"].as_u64().unwrap_or(0);
        if result["partial"] == true && done > 0 {
            break;
        }
        assert!(result["partial"] == true || done == 0, "the sync finished before the test could stop it: {answer}");
        assert!(id < 600, "the sync did not start");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    drop(stdin);
    let closed = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(closed.elapsed() < std::time::Duration::from_secs(5), "still running 5 s after stdin closed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(closed.elapsed() < std::time::Duration::from_secs(2), "took {:?}", closed.elapsed());
    assert!(status.success(), "{status}");
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(!stderr.to_lowercase().contains("onnx"), "{stderr}");
    // The files the stopped sync finished stay in the Forest: the next sync does only the rest.
    let out = std::process::Command::new(BIN).args(["--json", "index"]).current_dir(root).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let forest = &report["forest"];
    let (changed, files) = (forest["files_changed"].as_u64().unwrap(), forest["files"].as_u64().unwrap());
    assert!(changed < files, "the stopped sync's work was lost: {report}");
    assert!(forest["embedded"].as_u64().unwrap() < forest["chunks"].as_u64().unwrap(), "{report}");
}

/// `source_dirs` limits the symbol index and the Forest; `chunk_strategy: lines` cuts every
/// file into line windows, and switching strategies rebuilds the Forest (issue 12).
#[test]
fn source_dirs_and_chunk_strategy_are_honoured() {
    let repo = repo();
    let root = repo.path();
    let run = |args: &[&str]| -> Value {
        let out = std::process::Command::new(BIN).args(args).current_dir(root).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let config = |json: &str| std::fs::write(root.join(".code-intel/config.json"), json).unwrap();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    // The whole repository by default: the test file's function is defined.
    let defs = run(&["--json", "find-definitions", "--symbol", "test_login"]);
    assert_eq!(defs["definitions"].as_array().map(Vec::len), Some(1), "{defs}");

    config(r#"{"source_dirs": ["src"], "sync_on_start": false}"#);
    let report = run(&["--json", "index"]);
    let defs = run(&["--json", "find-definitions", "--symbol", "test_login"]);
    assert_eq!(defs["definitions"].as_array().map(Vec::len), Some(0), "tests/ is outside source_dirs: {defs}");
    let defs = run(&["--json", "find-definitions", "--symbol", "invoice_total"]);
    assert_eq!(defs["definitions"].as_array().map(Vec::len), Some(1), "{defs}");
    let hits = run(&["--json", "semantic-search", "log in a user with a password", "--collection", "forest"]);
    let files: Vec<&str> = hits["forest_hits"].as_array().unwrap().iter().filter_map(|h| h["file"].as_str()).collect();
    assert!(!files.is_empty() && files.iter().all(|f| f.starts_with("src/")), "{files:?} ({report})");

    config(r#"{"source_dirs": ["src"], "chunk_strategy": "lines", "sync_on_start": false}"#);
    run(&["--json", "index"]);
    // Files did not change, yet every chunk is a window now: a new strategy rebuilds the Forest.
    let hits = run(&["--json", "semantic-search", "sum the amounts of an invoice", "--collection", "forest"]);
    let ids: Vec<&str> =
        hits["forest_hits"].as_array().unwrap().iter().filter_map(|h| h["chunk_id"].as_str()).collect();
    assert!(!ids.is_empty() && ids.iter().all(|id| id.contains("#<lines>#")), "{ids:?}");

    // An unknown strategy is named on stderr, and the AST chunker is used.
    config(r#"{"chunk_strategy": "sentences", "sync_on_start": false}"#);
    let out = std::process::Command::new(BIN).args(["--json", "index"]).current_dir(root).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chunk_strategy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A long first sync embeds the files the recent history changed first, so searches made while
/// it runs find them; partial answers say how far it is.
#[test]
fn the_sync_embeds_recently_changed_files_first() {
    use code_intel_codebase::config::Config;
    use code_intel_codebase::repo::Repo;
    use code_intel_semantic::service::Semantic;

    let repo = repo();
    let root = repo.path();
    for i in 0..40 {
        let body: String =
            (0..6).map(|j| format!("def handler_{i}_{j}(request):\n    return respond(request, {j})\n\n\n")).collect();
        std::fs::write(root.join(format!("src/generated_{i:02}.py")), body).unwrap();
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "many handlers"]);
    // The newest commit touches a file that comes last in path order.
    std::fs::write(root.join("src/zz_recent.py"), "def freshly_written(x):\n    return x * 2\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "recent work"]);

    let config = Config::default();
    let semantic = Semantic::new(root, &config);
    let loaded = semantic.loaded().expect("model");
    let first_slice = std::sync::Mutex::new(None::<Vec<String>>);
    let report = semantic
        .sync_now(&Repo::at(root).unwrap(), &config, false, 0, &|done, total| {
            let mut first = first_slice.lock().unwrap();
            if first.is_none() {
                assert!(done < total, "more than one slice is needed: {done}/{total}");
                let forest = loaded.forest.read().unwrap();
                *first = Some(forest.files.keys().cloned().collect());
            }
        })
        .unwrap();
    assert!(report.chunks > 200, "{report:?}");
    let first = first_slice.into_inner().unwrap().expect("at least one slice");
    assert!(first.contains(&"src/zz_recent.py".to_owned()), "the newest change comes first: {first:?}");
    // Then the commit before it, in path order (the initial commit's files come after).
    assert!(first.iter().any(|f| f.starts_with("src/generated_0")), "{first:?}");
}

/// `forest push` shares the embeddings through refs/code-intel/forest on a real remote; a fresh
/// clone that runs `forest fetch` embeds nothing that did not change, and ignores another
/// model's vectors with a note.
#[test]
fn a_shared_forest_travels_and_another_models_is_ignored() {
    let run = |root: &Path, args: &[&str]| -> Value {
        let out = std::process::Command::new(BIN).args(["--json"]).args(args).current_dir(root).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare"]);
    let repo = repo();
    let root = repo.path();
    git(root, &["remote", "add", "origin", remote.path().to_str().unwrap()]);
    git(root, &["push", "-q", "origin", "main"]);
    let pushed = run(root, &["forest", "push"]);
    let shared = pushed["forest"]["shared"].as_u64().unwrap();
    assert!(shared > 10, "{pushed}");
    assert_eq!(pushed["pushed"], json!(["refs/code-intel/forest"]), "{pushed}");
    // The ref went only where it was asked to: the remote has it, and nothing else moved.
    let on_remote = git(remote.path(), &["rev-parse", "refs/code-intel/forest"]);
    assert_eq!(on_remote.trim(), pushed["forest"]["commit"].as_str().unwrap());
    let remote_refs = git(remote.path(), &["for-each-ref", "--format=%(refname)"]);
    assert_eq!(remote_refs.lines().collect::<Vec<_>>(), ["refs/code-intel/forest", "refs/heads/main"]);

    // A teammate's fresh clone.
    let clone_parent = tempfile::tempdir().unwrap();
    let clone = clone_parent.path().join("clone");
    let cloned = std::process::Command::new("git")
        .args(["clone", "-q", "-b", "main", remote.path().to_str().unwrap(), clone.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(cloned.success());
    assert!(
        std::process::Command::new("git")
            .args(["rev-parse", "-q", "--verify", "refs/code-intel/forest"])
            .current_dir(&clone)
            .output()
            .unwrap()
            .stdout
            .is_empty(),
        "a plain clone does not fetch the shared Forest"
    );
    // `forest fetch` stages the remote's Forest and syncs from it: every chunk's vector comes
    // from it, except the few embedded here to check them.
    let fetched = run(&clone, &["forest", "fetch"]);
    let chunks = fetched["chunks"].as_u64().unwrap();
    assert!(chunks > 10, "{fetched}");
    assert_eq!(fetched["embedded"], fetched["shared_checked"], "only the spot checks are embedded: {fetched}");
    assert!(fetched["shared_checked"].as_u64().unwrap() >= 1, "{fetched}");
    assert_eq!(fetched["shared_used"].as_u64().unwrap() + fetched["shared_checked"].as_u64().unwrap(), chunks);
    assert_eq!(fetched["shared_notes"], json!([]), "{fetched}");
    let index = run(&clone, &["index"]);
    assert_eq!(index["forest"]["embedded"], 0, "nothing changed since: {index}");
    // A rebuild recomputes everything it did not embed itself.
    let rebuilt = run(&clone, &["index", "--rebuild"]);
    assert_eq!(rebuilt["forest"]["shared_used"], 0, "{rebuilt}");
    assert_eq!(
        rebuilt["forest"]["embedded"].as_u64().unwrap() + rebuilt["forest"]["cache_hits"].as_u64().unwrap(),
        chunks,
        "{rebuilt}"
    );

    // The clone uses the fp32 model: the shared int8 vectors are not its own.
    std::fs::create_dir_all(clone.join(".code-intel")).unwrap();
    std::fs::write(clone.join(".code-intel/config.json"), json!({"embedding_model": FP32_MODEL}).to_string()).unwrap();
    let other = run(&clone, &["forest", "import"]);
    assert_eq!(other["shared_used"], 0, "{other}");
    assert_eq!(other["embedded"].as_u64(), Some(chunks), "{other}");
    let notes = other["shared_notes"].to_string();
    assert!(notes.contains("another model"), "{other}");
}

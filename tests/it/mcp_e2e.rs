//! End to end: the real binary as an MCP stdio server, driven by rmcp's own client.

use crate::common::mcp_client::{BIN, assert_fits_output_schema, call, connect, structured};

use std::process::Stdio;
use std::time::{Duration, Instant};

use code_intel_workflow::engine::registry;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

/// The project fixture plus the files git must not see and the files the walk must skip.
fn project() -> tempfile::TempDir {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::create_dir_all(root.join("ignored_build")).unwrap();
    std::fs::write(root.join("ignored_build/gen.py"), "def login_in_ignored():\n    login()\n").unwrap();
    std::fs::write(root.join("debug.log"), "login happened\n").unwrap();
    std::fs::write(root.join("blob.bin"), b"login\x00\x01\x02binary").unwrap();
    std::fs::write(root.join("huge.py"), "login = 1\n".repeat(120_000)).unwrap();
    repo
}

fn ok(result: CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "unexpected error: {:?}", result.structured_content);
    structured(&result)
}

fn err(result: CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(true), "expected an error: {:?}", result.structured_content);
    structured(&result)
}

fn files_of(list: &Value, key: &str) -> Vec<String> {
    list[key].as_array().unwrap().iter().map(|e| e["file"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_tool_of_the_registry_with_its_annotations() {
    let repo = project();
    let client = connect(repo.path()).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.clone().unwrap().name, "git-code-intel");
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    let mut expected: Vec<&str> = registry::TOOLS.iter().map(|t| t.name).collect();
    expected.sort();
    assert_eq!(names, expected, "the server serves exactly the registry's tools");
    for tool in &tools {
        let spec = registry::get(&tool.name).unwrap();
        let a = tool.annotations.as_ref().unwrap_or_else(|| panic!("{} has no annotations", tool.name));
        assert_eq!(a.read_only_hint, Some(spec.read_only()), "{}", tool.name);
        assert_eq!(a.destructive_hint, Some(spec.destructive), "{}", tool.name);
        assert_eq!(a.idempotent_hint, Some(spec.idempotent), "{}", tool.name);
        assert_eq!(a.open_world_hint, Some(false), "{}", tool.name);
        assert!(tool.output_schema.is_some(), "{} has no outputSchema", tool.name);
    }
    // Independently of the registry: what each of these tools changes, written out here.
    for writer in [
        "query",
        "record_outcome",
        "sync_index",
        "submit_phase",
        "start_session",
        "add_explored_files",
        "update_context",
        "cleanup_stale_branches",
    ] {
        let t = tools.iter().find(|t| t.name == writer).unwrap();
        assert_eq!(t.annotations.as_ref().and_then(|a| a.read_only_hint), Some(false), "{writer} writes");
    }
    for destroyer in ["submit_phase", "cleanup_stale_branches"] {
        let t = tools.iter().find(|t| t.name == destroyer).unwrap();
        assert_eq!(
            t.annotations.as_ref().and_then(|a| a.destructive_hint),
            Some(true),
            "{destroyer} deletes branches or rewrites files"
        );
    }
    let search = tools.iter().find(|t| t.name == "search_text").unwrap();
    let props = search.input_schema.get("properties").and_then(Value::as_object).unwrap();
    for arg in
        ["pattern", "path", "file_type", "case_sensitive", "fixed_strings", "context_lines", "max_results", "offset"]
    {
        assert!(props.contains_key(arg), "search_text lacks argument {arg}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_over_stdio() {
    let repo = project();
    let client = connect(repo.path()).await;

    // search_text: parallel patterns, context lines, gitignore, binary and size notes.
    let r = ok(call(
        &client,
        "search_text",
        json!({"pattern": ["login", "validate_token"], "context_lines": 1, "max_results": 1000}),
    )
    .await);
    let files: Vec<&str> = r["matches"].as_array().unwrap().iter().map(|m| m["file"].as_str().unwrap()).collect();
    assert!(files.contains(&"src/app.py") && files.contains(&"tests/test_auth.py"));
    assert!(
        !files.iter().any(|f| f.starts_with("ignored_build") || *f == "debug.log"),
        "gitignored files searched: {files:?}"
    );
    assert!(!files.contains(&"blob.bin") && !files.contains(&"huge.py"));
    let m = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["file"] == "src/app.py" && m["pattern"] == "login" && m["line"] == 5)
        .expect("app.py:5");
    assert_eq!(m["before"][0]["line"], 4);
    assert_eq!(m["after"][0]["line"], 6);
    assert_eq!(m["after"][0]["text"], "    print(\"logged in\")");
    assert_eq!(r["skipped"]["binary"], json!(["blob.bin"]));
    assert_eq!(r["skipped"]["too_large"][0]["path"], "huge.py");
    assert!(r["skipped"]["note"].as_str().unwrap().contains("2 file(s) skipped"));

    // A pattern that starts with '-' is a pattern, and case_sensitive=false works.
    std::fs::write(repo.path().join("src/flags.py"), "ARGS = ['-v', '--verbose']\n").unwrap();
    let r = ok(call(
        &client,
        "search_text",
        json!({"pattern": "--VERBOSE", "case_sensitive": false, "fixed_strings": true}),
    )
    .await);
    assert_eq!(r["matches"][0]["file"], "src/flags.py");

    // search_files
    let r = ok(call(&client, "search_files", json!({"pattern": "test_*.py"})).await);
    assert_eq!(
        r["files"],
        json!([{"path": "tests/test_auth.py", "size": std::fs::metadata(repo.path().join("tests/test_auth.py")).unwrap().len(), "language": "python"}])
    );

    // find_definitions
    let r = ok(call(&client, "find_definitions", json!({"symbol": "login"})).await);
    assert_eq!(r["total"], 1);
    let d = &r["definitions"][0];
    assert_eq!(
        (d["file"].as_str(), d["line"].as_u64(), d["kind"].as_str()),
        (Some("src/auth.py"), Some(17), Some("function"))
    );
    assert_eq!(d["signature"], "def login(user, password)");
    let r = ok(call(&client, "find_definitions", json!({"symbol": "REFRESH", "exact_match": false})).await);
    assert_eq!(r["definitions"][0]["scope"], "Session");
    assert_eq!(r["definitions"][0]["kind"], "method");

    // find_references: code only, with the enclosing function.
    let r = ok(call(&client, "find_references", json!({"symbol": "validate_token"})).await);
    let refs = r["references"].as_array().unwrap();
    let places: Vec<(String, u64)> =
        refs.iter().map(|x| (x["file"].as_str().unwrap().to_owned(), x["line"].as_u64().unwrap())).collect();
    assert_eq!(
        places,
        vec![("src/auth.py".into(), 9), ("tests/test_auth.py".into(), 1), ("tests/test_auth.py".into(), 9)]
    );
    assert_eq!(refs[0]["enclosing"]["name"], "refresh");
    assert_eq!(refs[2]["enclosing"]["name"], "test_validate_token");

    // get_symbols on a directory with a kind filter.
    let r = ok(call(&client, "get_symbols", json!({"path": "src", "kind": "class"})).await);
    assert_eq!(r["symbols"].as_array().unwrap().len(), 1);
    assert_eq!(r["symbols"][0]["name"], "Session");

    // analyze_structure, from a file and from inline code.
    let r = ok(call(&client, "analyze_structure", json!({"file_path": "src/auth.py"})).await);
    assert_eq!(r["classes"][0]["name"], "Session");
    assert_eq!(r["classes"][0]["methods"], json!(["__init__", "refresh"]));
    assert_eq!(r["summary"]["functions"], 4);
    let r = ok(call(
        &client,
        "analyze_structure",
        json!({"code": "import os\ndef f():\n    pass\n", "language": "python"}),
    )
    .await);
    assert_eq!(r["functions"][0]["name"], "f");
    assert_eq!(r["imports"][0]["text"], "import os");

    // get_function_at_line
    let r = ok(call(&client, "get_function_at_line", json!({"file_path": "src/auth.py", "line_number": 9})).await);
    assert_eq!(r["function"]["name"], "refresh");
    assert_eq!((r["function"]["line"].as_u64(), r["function"]["end_line"].as_u64()), (Some(8), Some(9)));
    assert_eq!(r["container"]["name"], "Session");

    // analyze_impact: callers must be verified; tests, docs and configs should be.
    let r = ok(call(
        &client,
        "analyze_impact",
        json!({"target_files": ["src/auth.py"], "change_description": "rename login"}),
    )
    .await);
    assert_eq!(files_of(&r, "must_verify"), vec!["src/app.py"]);
    assert!(r["must_verify"][0]["reason"].as_str().unwrap().contains("login"));
    let should = files_of(&r, "should_verify");
    for f in ["tests/test_auth.py", "docs/auth.md", "config.yaml"] {
        assert!(should.contains(&f.to_owned()), "{f} missing from should_verify {should:?}");
    }
    assert!(r["should_verify"].as_array().unwrap().iter().all(|e| !e["reason"].as_str().unwrap().is_empty()));

    // query: plans and runs.
    let r =
        ok(call(&client, "query", json!({"question": "Where is `validate_token` called?", "intent": "INVESTIGATE"}))
            .await);
    let tools: Vec<&str> = r["plan"].as_array().unwrap().iter().map(|p| p["tool"].as_str().unwrap()).collect();
    assert!(tools.contains(&"find_definitions") && tools.contains(&"find_references"), "{tools:?}");
    let defs = r["results"].as_array().unwrap().iter().find(|x| x["tool"] == "find_definitions").unwrap();
    assert_eq!(defs["output"]["definitions"][0]["file"], "src/auth.py");

    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_contract_errors() {
    let repo = project();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.py"), "def secret(): pass\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), repo.path().join("escape")).unwrap();
    let client = connect(repo.path()).await;

    let cases = [
        ("search_text", json!({}), "no_pattern", "No pattern specified"),
        ("search_text", json!({"pattern": []}), "no_pattern", "No pattern specified"),
        ("search_files", json!({"pattern": " "}), "no_pattern", "No pattern specified"),
        ("find_definitions", json!({}), "no_symbol", "No symbol specified"),
        ("find_references", json!({"symbol": ""}), "no_symbol", "No symbol specified"),
        ("analyze_structure", json!({}), "no_file_path", "No file_path specified"),
        ("get_function_at_line", json!({"line_number": 3}), "no_file_path", "No file_path specified"),
        ("analyze_impact", json!({"target_files": []}), "no_file_path", "No file_path specified"),
    ];
    for (tool, args, code, message) in cases {
        let e = err(call(&client, tool, args.clone()).await);
        assert_eq!(e, json!({"error": code, "message": message}), "{tool} {args}");
    }

    let e = err(call(&client, "search_text", json!({"pattern": ["a", "b", "c", "d", "e", "f"]})).await);
    assert_eq!(e["error"], "too_many_patterns");
    let e = err(call(&client, "search_text", json!({"pattern": "fn ("})).await);
    assert_eq!(e["error"], "invalid_regex");
    assert!(e["message"].as_str().unwrap().contains("fn ("));
    let e = err(call(&client, "search_files", json!({"pattern": "a[b"})).await);
    assert_eq!(e["error"], "invalid_glob");
    for (tool, args) in [
        ("search_text", json!({"pattern": "x", "path": "../"})),
        ("find_definitions", json!({"symbol": "x", "path": "/etc"})),
        ("analyze_structure", json!({"file_path": "src/../../outside.py"})),
        ("analyze_structure", json!({"file_path": "escape/secret.py"})),
        ("analyze_impact", json!({"target_files": ["escape/secret.py"]})),
    ] {
        let e = err(call(&client, tool, args.clone()).await);
        assert_eq!(e["error"], "path_outside_repo", "{tool} {args}");
    }
    let e = err(call(&client, "analyze_structure", json!({"file_path": "src/missing.py"})).await);
    assert_eq!(e["error"], "path_not_found");
    let e = err(call(&client, "analyze_structure", json!({"file_path": "blob.bin", "language": "python"})).await);
    assert_eq!(e["error"], "binary_file");
    let e = err(call(&client, "analyze_structure", json!({"file_path": "huge.py"})).await);
    assert_eq!(e["error"], "file_too_large");
    let e = err(call(&client, "analyze_structure", json!({"file_path": "docs/auth.md"})).await);
    assert_eq!(e["error"], "unsupported_language");
    let e = err(call(&client, "get_function_at_line", json!({"file_path": "src/auth.py", "line_number": 999})).await);
    assert_eq!(e["error"], "line_out_of_range");
    let e = err(call(&client, "get_function_at_line", json!({"file_path": "src/auth.py", "line_number": 1})).await);
    assert_eq!(e["error"], "no_function_at_line");
    let e = err(call(&client, "search_text", json!({"pattern": "x", "file_type": "no-such-type"})).await);
    assert_eq!(e["error"], "invalid_argument");
    let e = err(call(&client, "find_definitions", json!({"symbol": "x", "language": "cobol"})).await);
    assert_eq!(e["error"], "unsupported_language");
    let e = err(call(&client, "query", json!({})).await);
    assert_eq!(e["error"], "no_question");

    // Wrong argument types are refused by the protocol layer, and the server keeps serving.
    let wrong = client
        .call_tool(
            CallToolRequestParams::new("search_text")
                .with_arguments(json!({"pattern": 42}).as_object().unwrap().clone()),
        )
        .await;
    assert!(wrong.is_err() || wrong.unwrap().is_error == Some(true));
    ok(call(&client, "search_files", json!({"pattern": "*.py"})).await);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_responses_are_cut_with_an_offset_to_continue() {
    let repo = project();
    // ~400 KB of matching lines: over the 256 KB response limit.
    let line = format!("needle {}\n", "x".repeat(90));
    std::fs::write(repo.path().join("src/many.txt"), line.repeat(4000)).unwrap();
    let client = connect(repo.path()).await;
    let first = ok(call(&client, "search_text", json!({"pattern": "needle", "max_results": 100000})).await);
    assert_eq!(first["truncated"], true);
    assert_eq!(
        first["truncation_warning"],
        "Response exceeded 256KB and was truncated. Please narrow down the pattern."
    );
    let returned = first["returned"].as_u64().unwrap();
    assert_eq!(first["next_offset"].as_u64(), Some(returned));
    assert!(serde_json::to_vec(&first).unwrap().len() <= 256 * 1024);
    let second =
        ok(call(&client, "search_text", json!({"pattern": "needle", "max_results": 100000, "offset": returned})).await);
    assert_eq!(second["matches"][0]["line"].as_u64(), Some(returned + 1));

    // max_results is a total across patterns, with has_more/next_offset.
    let r = ok(call(&client, "search_text", json!({"pattern": ["needle", "login"], "max_results": 7})).await);
    assert_eq!(r["returned"], 7);
    assert_eq!(r["has_more"], true);
    assert_eq!(r["next_offset"], 7);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_follows_edits_while_serving() {
    let repo = project();
    let client = connect(repo.path()).await;
    // The first lookup does not wait for the index: it answers from the files that can
    // matter, says so, and the index is built in the background.
    let r = ok(call(&client, "find_definitions", json!({"symbol": "logout"})).await);
    assert_eq!(r["total"], 0);
    let note = r["fast_path"]["note"].as_str().unwrap_or_default();
    assert!(note.contains("built in the background"), "{r}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = ok(call(&client, "find_definitions", json!({"symbol": "login"})).await);
        if r["fast_path"].is_null() {
            assert_eq!(r["total"], 1, "{r}");
            break;
        }
        assert!(Instant::now() < deadline, "the background build never landed: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(repo.path().join(".code-intel/index/symbols.idx").exists(), "index persisted");
    assert!(
        std::process::Command::new("git")
            .args(["status", "--porcelain", "--ignored=no"])
            .current_dir(repo.path())
            .output()
            .map(|o| !String::from_utf8_lossy(&o.stdout).contains(".code-intel"))
            .unwrap()
    );

    let auth = repo.path().join("src/auth.py");
    let mut text = std::fs::read_to_string(&auth).unwrap();
    text.push_str("\n\ndef logout(session):\n    return None\n");
    std::fs::write(&auth, text).unwrap();
    std::fs::write(repo.path().join("src/new_module.py"), "def logout_all():\n    pass\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = ok(call(&client, "find_definitions", json!({"symbol": "logout", "exact_match": false})).await);
        let names: Vec<&str> =
            r["definitions"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
        if names == ["logout", "logout_all"] {
            break;
        }
        assert!(Instant::now() < deadline, "index did not follow the edit: {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::remove_file(repo.path().join("src/new_module.py")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = ok(call(&client, "find_definitions", json!({"symbol": "logout_all"})).await);
        if r["total"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "deleted file still indexed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_contract_rewords_messages() {
    let repo = project();
    std::fs::create_dir_all(repo.path().join(".code-intel")).unwrap();
    std::fs::write(
        repo.path().join(".code-intel/phase_contract.yml"),
        "tool_errors:\n  query:\n    no_symbol:\n      message: \"Name a symbol, please.\"\n",
    )
    .unwrap();
    let client = connect(repo.path()).await;
    let e = err(call(&client, "find_references", json!({})).await);
    assert_eq!(e, json!({"error": "no_symbol", "message": "Name a symbol, please."}));
    client.cancel().await.unwrap();
}

#[test]
fn server_exits_when_stdin_closes_and_keeps_stdout_clean() {
    use std::io::{BufRead, BufReader, Write};
    let repo = project();
    let mut child = std::process::Command::new(BIN)
        .arg("serve")
        .current_dir(repo.path())
        .env("CODE_INTEL_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "find_definitions", "arguments": {"symbol": "login"}}})).unwrap();
    writeln!(stdin, "this is not json").unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let msg: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("non-MCP output on stdout: {line:?}"));
        if msg.get("id").is_some() {
            seen.push(msg);
        }
    }
    assert_eq!(seen.len(), 3, "initialize, tools/call and the line that is not JSON answered: {seen:?}");
    let by_id = |id: Value| seen.iter().find(|m| m["id"] == id).unwrap_or_else(|| panic!("no answer for {id}"));
    assert_eq!(by_id(json!(2))["result"]["structuredContent"]["definitions"][0]["file"], "src/auth.py");
    assert_eq!(by_id(Value::Null)["error"]["code"], -32700, "a parse error for the line that is not JSON");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(Instant::now() < deadline, "server still running after stdin closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Anything left on stdout must still be MCP messages.
    for line in out.lines() {
        let line = line.unwrap();
        assert!(serde_json::from_str::<Value>(&line).is_ok(), "non-MCP output on stdout: {line:?}");
    }
}

/// Every ref with its target, HEAD, and what `git status` sees (ignored caches aside).
fn repo_state(root: &std::path::Path) -> String {
    let refs = crate::common::git(root, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    let head = crate::common::git(root, &["symbolic-ref", "-q", "HEAD"]);
    let status = crate::common::git(root, &["status", "--porcelain", "--untracked-files=all"]);
    format!("{refs}\nHEAD {head}\n{status}")
}

/// The annotations tell the truth: a tool marked read-only changes no ref and no file git sees
/// (caches under .code-intel/ are ignored by git), and a tool marked as writing does write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_tools_change_nothing_and_writers_write() {
    let repo = crate::common::committed_project();
    let root = repo.path();
    let client = connect(root).await;
    ok(call(&client, "start_session", json!({"intent": "INVESTIGATE", "query": "how does login work"})).await);
    let arguments = |name: &str| -> Option<Value> {
        Some(match name {
            "search_text" => json!({"pattern": "login"}),
            "search_files" => json!({"pattern": "*.py"}),
            "find_definitions" | "find_references" => json!({"symbol": "login"}),
            "get_symbols" => json!({"path": "src"}),
            "analyze_structure" => json!({"file_path": "src/auth.py"}),
            "get_function_at_line" => json!({"file_path": "src/auth.py", "line_number": 9}),
            "analyze_impact" => json!({"target_files": ["src/auth.py"]}),
            "semantic_search" => json!({"query": "log a user in"}),
            "fetch_chunk_detail" => json!({"chunk_id": "src/auth.py#login#0"}),
            "get_session_status" => json!({}),
            "check_write_target" => json!({"file_path": "src/auth.py"}),
            "review_changes" => json!({}),
            _ => return None,
        })
    };
    for spec in registry::TOOLS.iter().filter(|t| t.read_only()) {
        let args = arguments(spec.name).unwrap_or_else(|| panic!("no arguments for read-only tool {}", spec.name));
        let before = repo_state(root);
        call(&client, spec.name, args).await;
        assert_eq!(repo_state(root), before, "{} is marked read-only but changed the repository", spec.name);
    }
    let before = repo_state(root);
    ok(call(&client, "query", json!({"question": "where is login defined"})).await);
    assert_ne!(repo_state(root), before, "query appends to the DecisionLog");
    client.cancel().await.unwrap();
}

/// Every tool's answer, as a client receives it, validates against the outputSchema that
/// tools/list gave for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_validates_against_its_output_schema() {
    let repo = crate::common::committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let tools = client.list_all_tools().await.unwrap();
    let calls: Vec<(&str, Value)> = vec![
        ("start_session", json!({"intent": "INVESTIGATE", "query": "how does login work"})),
        ("get_session_status", json!({})),
        ("check_write_target", json!({"file_path": "src/auth.py"})),
        ("add_explored_files", json!({"files": ["src/auth.py"]})),
        ("submit_phase", json!({"data": {}})),
        ("review_changes", json!({})),
        ("cleanup_stale_branches", json!({})),
        ("search_text", json!({"pattern": "login"})),
        ("search_files", json!({"pattern": "*.py"})),
        ("find_definitions", json!({"symbol": "login"})),
        ("find_references", json!({"symbol": "login"})),
        ("get_symbols", json!({"path": "src"})),
        ("analyze_structure", json!({"file_path": "src/auth.py"})),
        ("get_function_at_line", json!({"file_path": "src/auth.py", "line_number": 9})),
        ("analyze_impact", json!({"target_files": ["src/auth.py"]})),
        ("query", json!({"question": "where is login defined"})),
        ("semantic_search", json!({"query": "log a user in"})),
        ("fetch_chunk_detail", json!({"chunk_id": "src/auth.py#login#0"})),
        ("sync_index", json!({})),
        ("update_context", json!({"summary": "login lives in src/auth.py"})),
        ("record_outcome", json!({"outcome": "success"})),
    ];
    let mut validated = Vec::new();
    for (name, args) in calls {
        let result = call(&client, name, args).await;
        if result.is_error == Some(true) {
            // A refusal or an error is `{error, message, …}`: the outputSchema is what a success
            // answers.
            let content = structured(&result);
            assert!(content["error"].is_string() && content["message"].is_string(), "{name}: {content}");
            continue;
        }
        assert_fits_output_schema(&tools, name, &structured(&result));
        validated.push(name);
    }
    // The ones that succeed in this order on this fixture, at least.
    for name in [
        "start_session",
        "get_session_status",
        "cleanup_stale_branches",
        "search_text",
        "search_files",
        "find_definitions",
        "find_references",
        "get_symbols",
        "analyze_structure",
        "get_function_at_line",
        "analyze_impact",
        "query",
        "update_context",
    ] {
        assert!(
            validated.contains(&name),
            "{name} did not answer successfully, so its answer was not validated ({validated:?})"
        );
    }
    // tools/list shows optional parameters without `null`, but an explicit `null` still means
    // "not given".
    let found = ok(call(&client, "find_definitions", json!({"symbol": "login", "path": null, "offset": null})).await);
    assert!(found["total"].as_u64().is_some_and(|n| n > 0), "{found}");
    client.cancel().await.unwrap();
}

/// An unknown `file_type` says which names exist, so the agent can retry without guessing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_file_type_names_the_known_ones() {
    let repo = project();
    let client = connect(repo.path()).await;
    let e = err(call(&client, "search_text", json!({"pattern": "x", "file_type": "no-such-type"})).await);
    assert_eq!(e["error"], "invalid_argument");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("no-such-type") && message.contains("rust, py"), "{message}");
    client.cancel().await.unwrap();
}

/// A common name's references come a page at a time, sized for an agent: 50 unless `limit`
/// says otherwise (at most 500), code before tests, the total always given, and `callers` naming
/// the definitions that use it most. Paging through visits every reference once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn references_of_a_common_name_come_in_pages_an_agent_can_read() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    // 3 code files: `busy` calls tick 40 times, each of `f0..f19` once; a test file calls it 200 times.
    std::fs::write(root.join("src/aa_clock.py"), "def tick():\n    return 1\n").unwrap();
    let mut busy = String::from("def busy():\n");
    busy.push_str(&"    tick()\n".repeat(40));
    std::fs::write(root.join("src/busy.py"), busy).unwrap();
    let few: String = (0..20).map(|i| format!("def f{i}():\n    return tick()\n\n")).collect();
    std::fs::write(root.join("src/few.py"), few).unwrap();
    let mut test = String::from("def test_ticks():\n");
    test.push_str(&"    tick()\n".repeat(200));
    std::fs::create_dir_all(root.join("tests")).unwrap();
    // Sorted first by path, but a test file: its references come after the code's.
    std::fs::write(root.join("tests/a_test_clock.py"), test).unwrap();

    let client = connect(root).await;
    let first = ok(call(&client, "find_references", json!({"symbol": "tick"})).await);
    assert_eq!(first["total"], 260, "{first}");
    let page = first["references"].as_array().unwrap();
    assert_eq!(page.len(), 50, "the default page");
    assert_eq!(first["next_offset"], 50);
    assert!(page.iter().all(|r| !r["file"].as_str().unwrap().starts_with("tests/")), "code first");
    // Callers: busy (40 uses) first, then the one-use functions; the test last; all counted.
    let callers = first["callers"].as_array().unwrap();
    assert_eq!(first["callers_total"], 22);
    assert_eq!(callers.len(), 20);
    assert_eq!((callers[0]["enclosing"]["name"].as_str(), callers[0]["uses"].as_u64()), (Some("busy"), Some(40)));
    assert!(callers[1..].iter().all(|c| c["uses"] == 1 && c["test"] == false), "{callers:?}");
    let listed: usize = callers.iter().map(|c| c["uses"].as_u64().unwrap() as usize).sum();
    assert!(listed < 260, "the test caller is beyond the first 20");
    assert!(first.to_string().len() < 48 * 1024 + 8 * 1024, "an answer an agent can read");

    // Paging with a larger limit visits every reference once, tests at the end.
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let r = ok(call(&client, "find_references", json!({"symbol": "tick", "offset": offset, "limit": 120})).await);
        assert_eq!(r["total"], 260);
        let refs = r["references"].as_array().unwrap();
        assert!(refs.len() <= 120);
        seen.extend(refs.iter().map(|x| (x["file"].as_str().unwrap().to_owned(), x["line"].as_u64().unwrap())));
        match r["next_offset"].as_u64() {
            Some(next) => offset = next as usize,
            None => break,
        }
    }
    assert_eq!(seen.len(), 260);
    let unique: std::collections::BTreeSet<_> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), 260, "no reference twice");
    let first_test = seen.iter().position(|(f, _)| f.starts_with("tests/")).unwrap();
    assert_eq!(first_test, 60, "every code reference before the first test one");
    // A limit above the cap is held to 500 and the page to 48 KB of references: this one stops
    // at the byte cap and says where to go on.
    let r = ok(call(&client, "find_references", json!({"symbol": "tick", "limit": 100000})).await);
    let n = r["references"].as_array().unwrap().len();
    assert!(n > 120 && n < 260, "{n}");
    assert_eq!(r["next_offset"].as_u64(), Some(n as u64));
    assert!(serde_json::to_string(&r["references"]).unwrap().len() <= 48 * 1024);
    let r = ok(call(&client, "find_references", json!({"symbol": "tick", "limit": 0})).await);
    assert_eq!(r["references"].as_array().unwrap().len(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_files_are_named_when_passed_over_and_searched_when_asked() {
    let repo = project();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
    std::fs::write(root.join(".github/workflows/ci.yml"), "run: pytest tests/test_auth.py\n").unwrap();
    std::fs::create_dir_all(root.join(".code-intel/index")).unwrap();
    std::fs::write(root.join(".code-intel/index/leftover.yml"), "run: pytest\n").unwrap();
    let client = connect(root).await;
    // As ripgrep: hidden entries are passed over by default, and named so the agent knows.
    let r = ok(call(&client, "search_files", json!({"pattern": "*.yml"})).await);
    assert_eq!(r["files"], json!([]), "{r}");
    let passed_over = r["hidden_not_searched"].as_array().unwrap();
    assert!(passed_over.contains(&json!(".github")), "{r}");
    assert!(!passed_over.contains(&json!(".git")), "{r}");
    assert!(
        !passed_over.contains(&json!(".code-intel")),
        "only code-intel's own index is in it: nothing to search {r}"
    );
    let r = ok(call(&client, "search_text", json!({"pattern": "run: pytest"})).await);
    assert_eq!(r["matches"], json!([]), "{r}");
    assert!(r["hidden_not_searched"].as_array().unwrap().contains(&json!(".github")), "{r}");
    // Asked for: found; code-intel's own index never.
    let r = ok(call(&client, "search_files", json!({"pattern": "*.yml", "hidden": true})).await);
    let found: Vec<&str> = r["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(found, [".github/workflows/ci.yml"], "{r}");
    assert!(r.get("hidden_not_searched").is_none(), "{r}");
    let r = ok(call(&client, "search_text", json!({"pattern": "run: pytest", "hidden": true})).await);
    assert_eq!(files_of(&r, "matches"), [".github/workflows/ci.yml"], "{r}");
    // Searching inside a hidden directory needs no flag.
    let r = ok(call(&client, "search_files", json!({"pattern": "*.yml", "path": ".github"})).await);
    assert_eq!(r["total"], 1, "{r}");
    client.cancel().await.unwrap();
}

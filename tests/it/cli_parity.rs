//! The CLI's tool subcommands take their flags from the MCP tools' own parameter types, so the
//! same arguments give the same answer: each subcommand's `--json` output is compared with what
//! the MCP tool returns for the equivalent arguments, and every flag's help is the parameter's
//! own description.

use std::path::Path;
use std::process::Command;

use crate::common::committed_project;
use crate::common::mcp_client::{BIN, call, connect, structured};
use serde_json::{Value, json};

fn cli_json(root: &Path, args: &[&str]) -> Value {
    let out = Command::new(BIN).arg("--json").args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// What can differ between a one-shot CLI run and a long-running server: how the index was
/// reached, not what it answers.
fn without_index_notes(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.remove("fast_path");
        map.remove("note");
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tool_subcommand_answers_as_its_mcp_tool() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "find_definitions",
            json!({"symbol": "login", "path": "src"}),
            vec!["find-definitions", "--symbol", "login", "--path", "src"],
        ),
        (
            "find_definitions",
            json!({"symbol": "LOG", "exact_match": false}),
            vec!["find-definitions", "--symbol", "LOG", "--exact-match", "false"],
        ),
        (
            "find_references",
            json!({"symbol": "validate_token", "language": "python"}),
            vec!["find-references", "--symbol", "validate_token", "--language", "python"],
        ),
        (
            "search_text",
            json!({"pattern": ["def login", "token"], "fixed_strings": true, "max_results": 3}),
            vec![
                "search-text",
                "--pattern",
                "def login",
                "--pattern",
                "token",
                "--fixed-strings",
                "--max-results",
                "3",
            ],
        ),
        (
            "search_text",
            json!({"pattern": "TOKEN", "case_sensitive": false, "context_lines": 1}),
            vec!["search-text", "--pattern", "TOKEN", "--case-sensitive", "false", "--context-lines", "1"],
        ),
        (
            "search_files",
            json!({"pattern": "*.py", "path": "src"}),
            vec!["search-files", "--pattern", "*.py", "--path", "src"],
        ),
        (
            "get_symbols",
            json!({"path": "src/auth.py", "kind": "function"}),
            vec!["get-symbols", "--path", "src/auth.py", "--kind", "function"],
        ),
        (
            "analyze_structure",
            json!({"file_path": "src/auth.py"}),
            vec!["analyze-structure", "--file-path", "src/auth.py"],
        ),
        (
            "get_function_at_line",
            json!({"file_path": "src/auth.py", "line_number": 9}),
            vec!["get-function-at-line", "--file-path", "src/auth.py", "--line-number", "9"],
        ),
        (
            "analyze_impact",
            json!({"target_files": ["src/auth.py"], "change_description": "rename login"}),
            vec!["analyze-impact", "--target-files", "src/auth.py", "--change-description", "rename login"],
        ),
    ];
    for (tool, mcp_args, cli_args) in cases {
        let result = call(&client, tool, mcp_args.clone()).await;
        assert_ne!(result.is_error, Some(true), "{tool} {mcp_args}: {:?}", result.structured_content);
        let served = without_index_notes(structured(&result));
        let printed = without_index_notes(cli_json(root, &cli_args));
        assert_eq!(printed, served, "`git code-intel {}` differs from {tool} {mcp_args}", cli_args.join(" "));
    }
    client.cancel().await.unwrap();
}

#[test]
fn each_flag_carries_its_parameter_description() {
    let out = Command::new(BIN).args(["find-definitions", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for described in [
        "The symbol name to look for",
        "Only definitions in this file or directory",
        "Skip this many definitions (from a previous `next_offset`)",
    ] {
        assert!(help.contains(described), "{described:?} missing from:\n{help}");
    }
}

/// `status` outside a git repository says once that sessions need git: the recovery that runs
/// before it does not say it a second time.
#[test]
fn status_outside_git_says_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN).arg("status").current_dir(dir.path()).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(said.matches("Sessions are stored in git").count(), 1, "{said}");
}

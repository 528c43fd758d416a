//! The real binary as an MCP stdio server, driven by rmcp's own client.
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_git-code-intel");

pub type Client = RunningService<RoleClient, ()>;

pub async fn connect(root: &Path) -> Client {
    connect_with_env(root, &[]).await
}

/// A server with extra environment variables.
pub async fn connect_with_env(root: &Path, env: &[(&str, &str)]) -> Client {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").current_dir(root).env("CODE_INTEL_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let transport = TokioChildProcess::builder(cmd).stderr(Stdio::null()).spawn().expect("spawn server").0;
    ().serve(transport).await.expect("initialize")
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(map) = args else { panic!("arguments must be an object") };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The structured content, after checking that the text content carries the same JSON.
pub fn structured(result: &CallToolResult) -> Value {
    let value = result.structured_content.clone().expect("structuredContent");
    let text = result.content.first().and_then(|c| c.as_text()).expect("text content").text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value, "text and structured content differ");
    value
}

/// A call that must succeed: its structured content.
pub async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool} failed: {:?}", r.structured_content);
    structured(&r)
}

/// A call that must fail: its `{error, message, …}`.
pub async fn err(client: &Client, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_eq!(r.is_error, Some(true), "{tool} should fail: {:?}", r.structured_content);
    structured(&r)
}

/// `submit_phase` with `data`, which must be accepted.
/// Has the server run the project fixture's tests (`run_check`), as POST_IMPL_VERIFY's
/// `passed: true` needs; asserts they passed.
pub async fn witness_tests(client: &Client) -> Value {
    assert!(crate::common::pytest_installed(), "pytest is needed for a witnessed run (scripts/test.sh installs it)");
    let run = ok(client, "run_check", serde_json::json!({"command": "python3 -m pytest"})).await;
    assert_eq!(run["exit_code"], 0, "the fixture's tests fail: {run}");
    run
}

pub async fn submit(client: &Client, data: Value) -> Value {
    ok(client, "submit_phase", serde_json::json!({"data": data})).await
}

/// Asserts that `content`, a successful answer of the tool `name`, fits the outputSchema
/// tools/list gave for it.
pub fn assert_fits_output_schema(tools: &[rmcp::model::Tool], name: &str, content: &Value) {
    let tool = tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} is not listed"));
    let schema =
        Value::Object((**tool.output_schema.as_ref().unwrap_or_else(|| panic!("{name}: no outputSchema"))).clone());
    let validator = jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: invalid outputSchema: {e}"));
    let errors: Vec<String> = validator.iter_errors(content).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{name}'s answer does not fit its outputSchema: {errors:?}\n{content}");
}

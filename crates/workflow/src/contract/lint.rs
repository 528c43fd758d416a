//! The contract lint: reads a contract as the agent will, and reports text that would send it
//! wrong. Run on the compiled-in contract by `tests/it/contract_lint.rs` (it must be clean), and on
//! a project's override when it is loaded (its findings are logged as warnings).
//!
//! - every key of the [`super::catalogue`] exists, with exactly the placeholders the
//!   code fills;
//! - no instruction or message carries comment text (a YAML `#` line swallowed by a block);
//! - every tool it names is one this server serves: a call `name(…)` must be a served tool, and
//!   every other snake_case word must be a served tool, a parameter or payload field the server
//!   knows, or one of the seeds' own words ([`PROSE_WORDS`]).

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::catalogue::{self, Msg};
use super::{Contract, placeholders};

/// What the server really has: tool names, and the other words the contract may use (tool
/// parameters, payload fields, response fields).
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    pub tools: BTreeSet<String>,
    pub words: BTreeSet<String>,
}

/// snake_case words of the seeds' prose that are neither tools nor fields: the keys of
/// `.code-intel/context.yml` that DOCUMENT_RESEARCH reads.
pub const PROSE_WORDS: &[&str] = &["project_rules", "doc_research", "document_search", "rule_refs", "must_read"];

/// One finding: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub path: String,
    pub problem: String,
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.problem)
    }
}

/// Adds the names of every property in a JSON Schema (at any depth) to `out`.
pub fn property_names(schema: &serde_json::Value, out: &mut BTreeSet<String>) {
    match schema {
        serde_json::Value::Object(o) => {
            if let Some(serde_json::Value::Object(props)) = o.get("properties") {
                out.extend(props.keys().cloned());
            }
            o.values().for_each(|v| property_names(v, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| property_names(v, out)),
        _ => {}
    }
}

/// Every finding for `contract`.
pub fn lint(contract: &Contract, vocabulary: &Vocabulary) -> Vec<Issue> {
    let mut issues = Vec::new();
    for key in catalogue::ALL {
        check_key(contract, key, &mut issues);
    }
    for (phase, vars) in catalogue::INSTRUCTIONS {
        let path = format!("phases.{phase}.instruction");
        match contract.get(&["phases", phase, "instruction"]).and_then(Value::as_str) {
            None => issues.push(Issue { path, problem: "missing".into() }),
            Some(text) => check_placeholders(&path, text, vars, &mut issues),
        }
    }
    check_phase_keys(contract, &mut issues);
    for (path, text) in texts(contract) {
        check_text(&path, &text, vocabulary, &mut issues);
    }
    issues
}

/// Under `phases`, only the known phases and their `instruction` have an effect: what a payload
/// holds comes from the payload types (`expected_payload_schema`), not from the contract.
fn check_phase_keys(contract: &Contract, issues: &mut Vec<Issue>) {
    let Some(Value::Mapping(phases)) = contract.get(&["phases"]) else { return };
    for (phase, node) in phases {
        let Some(phase) = phase.as_str() else { continue };
        if !catalogue::INSTRUCTIONS.iter().any(|(k, _)| *k == phase) {
            issues.push(Issue { path: format!("phases.{phase}"), problem: "is not a phase; it has no effect".into() });
            continue;
        }
        for key in node.as_mapping().into_iter().flat_map(|m| m.keys()).filter_map(Value::as_str) {
            if key != "instruction" {
                issues.push(Issue {
                    path: format!("phases.{phase}.{key}"),
                    problem: "has no effect: what a payload holds comes from the payload types, sent as \
                              expected_payload and expected_payload_schema"
                        .into(),
                });
            }
        }
    }
}

fn check_key(contract: &Contract, key: &Msg, issues: &mut Vec<Issue>) {
    let path = key.dotted();
    let Some(node) = contract.get(key.path) else {
        issues.push(Issue { path, problem: "used by the code but missing from the contract".into() });
        return;
    };
    match node.get("message").and_then(Value::as_str) {
        Some(text) => check_placeholders(&path, text, key.vars, issues),
        // A message made at run time: only its error code comes from the contract.
        None if node.get("error").is_some() && key.vars.is_empty() => {}
        None => issues.push(Issue { path, problem: "has no message".into() }),
    }
}

fn check_placeholders(path: &str, text: &str, declared: &[&str], issues: &mut Vec<Issue>) {
    let used: BTreeSet<String> = placeholders(text).into_iter().collect();
    let declared: BTreeSet<String> = declared.iter().map(|s| (*s).to_owned()).collect();
    for unfilled in used.difference(&declared) {
        issues.push(Issue {
            path: path.to_owned(),
            problem: format!("placeholder {{{unfilled}}} is never filled by the code"),
        });
    }
    for unused in declared.difference(&used) {
        issues.push(Issue {
            path: path.to_owned(),
            problem: format!("the code fills {{{unused}}}, but the text does not use it"),
        });
    }
}

/// Every text the agent can read: instructions, messages, and the `instruction` of failures.
fn texts(contract: &Contract) -> Vec<(String, String)> {
    let mut out = Vec::new();
    collect(contract.root(), String::new(), &mut out);
    out
}

fn collect(node: &Value, prefix: String, out: &mut Vec<(String, String)>) {
    let Value::Mapping(map) = node else { return };
    for (k, v) in map {
        let Some(k) = k.as_str() else { continue };
        let path = if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
        match v {
            Value::String(text) if matches!(k, "message" | "instruction") => out.push((path, text.clone())),
            Value::Mapping(_) => collect(v, path, out),
            _ => {}
        }
    }
}

fn check_text(path: &str, text: &str, vocabulary: &Vocabulary, issues: &mut Vec<Issue>) {
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            issues.push(Issue { path: path.to_owned(), problem: format!("carries comment text: {:?}", line.trim()) });
        }
    }
    for (word, is_call) in snake_words(text) {
        let known = vocabulary.tools.contains(&word);
        if is_call && !known {
            issues
                .push(Issue {
                    path: path.to_owned(), problem: format!("calls {word}(…), which is not a served tool")
                });
        } else if !known && !vocabulary.words.contains(&word) && !PROSE_WORDS.contains(&word.as_str()) {
            issues.push(Issue {
                path: path.to_owned(),
                problem: format!("names `{word}`, which is neither a served tool nor a field or parameter of one"),
            });
        }
    }
}

/// The lower-case snake_case words of `text` (with at least one `_`), outside `{placeholders}`
/// and file paths, each with whether it is written as a call `word(`.
fn snake_words(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for chunk in text.split_whitespace() {
        if chunk.contains('/') || looks_like_file(chunk) {
            continue;
        }
        let chars: Vec<char> = chunk.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '{' {
                while i < chars.len() && chars[i] != '}' {
                    i += 1;
                }
                i += 1;
                continue;
            }
            if chars[i].is_ascii_alphanumeric() || chars[i] == '_' {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let is_call = chars.get(i) == Some(&'(');
                if is_snake(&word) {
                    out.push((word, is_call));
                }
                continue;
            }
            i += 1;
        }
    }
    out
}

fn is_snake(word: &str) -> bool {
    word.contains('_')
        && !word.starts_with('_')
        && !word.ends_with('_')
        && word.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `task_planning.md`, `context.yml`, `auth.py:42`: a file name, not a word.
fn looks_like_file(chunk: &str) -> bool {
    let trimmed = chunk.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    trimmed.split(':').next().unwrap_or("").rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty() && (1..=4).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        Vocabulary {
            tools: ["submit_phase", "check_write_target"].iter().map(|s| (*s).to_owned()).collect(),
            words: ["task_id", "tools_used"].iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn findings(text: &str) -> Vec<Issue> {
        let mut issues = Vec::new();
        check_text("phases.X.instruction", text, &vocabulary(), &mut issues);
        issues
    }

    #[test]
    fn a_fake_tool_is_found() {
        let issues = findings("Submit via complete_task(task_id, data={summary, checklist}).");
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].problem.contains("complete_task"), "{issues:?}");
        let issues = findings("Then run frobnicate_index on the tree.");
        assert!(issues.iter().any(|i| i.problem.contains("frobnicate_index")), "{issues:?}");
    }

    #[test]
    fn served_tools_fields_paths_and_placeholders_pass() {
        assert!(findings("Run check_write_target, then submit_phase with task_id and tools_used.").is_empty());
        assert!(findings("Read .code-intel/review_prompts/garbage_detection.md and task_planning.md").is_empty());
        assert!(findings("Fill {missing_list} and cite auth_store.py:42.").is_empty());
        assert!(findings("Based on project_rules in context.yml; llm_task_* branches; READY_PLAN.").is_empty());
    }

    #[test]
    fn comment_text_is_found() {
        let issues = findings("Submit the merge.\n# =====\n# v1.15: Externalized Message Definitions");
        assert_eq!(issues.iter().filter(|i| i.problem.contains("comment")).count(), 2, "{issues:?}");
    }

    #[test]
    fn placeholders_must_match_what_the_code_fills() {
        let mut issues = Vec::new();
        check_placeholders("a.b", "Task {task_id} of {count}", &["task_id"], &mut issues);
        assert_eq!(issues.len(), 1);
        assert!(issues[0].problem.contains("{count}"));
        issues.clear();
        check_placeholders("a.b", "Task {task_id}", &["task_id", "extra"], &mut issues);
        assert!(issues[0].problem.contains("{extra}"));
    }
}

//! The procedure files the phase instructions name (`.code-intel/review_prompts/…`,
//! `.code-intel/verifiers/*.md`, …): `git code-intel init` writes them, and a repository that
//! never ran it has none. An answer whose instruction names one that is missing carries its
//! default text, so the instruction stays one the agent can follow.

use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;

use code_intel_workflow::contract::catalogue as msg;

use crate::workspace::Workspace;

/// Every procedure file init writes: its path in the repository, and its default text. (No
/// instruction names `doc_research/default.md`: DOCUMENT_RESEARCH lists the prompts that exist in
/// `documents.prompts`; it is here because init writes it from this table.)
pub const DEFAULTS: &[(&str, &str)] = &[
    (".code-intel/task_planning.md", include_str!("../../../../templates/init/task_planning.md")),
    (".code-intel/user_escalation.md", include_str!("../../../../templates/init/user_escalation.md")),
    (".code-intel/verifiers/tests.md", include_str!("../../../../templates/init/verifiers/tests.md")),
    (".code-intel/verifiers/build_and_lint.md", include_str!("../../../../templates/init/verifiers/build_and_lint.md")),
    (".code-intel/interventions/step_back.md", include_str!("../../../../templates/init/interventions/step_back.md")),
    (
        ".code-intel/interventions/reproduce_first.md",
        include_str!("../../../../templates/init/interventions/reproduce_first.md"),
    ),
    (
        ".code-intel/review_prompts/garbage_detection.md",
        include_str!("../../../../templates/init/review_prompts/garbage_detection.md"),
    ),
    (
        ".code-intel/review_prompts/quality_review.md",
        include_str!("../../../../templates/init/review_prompts/quality_review.md"),
    ),
    (".code-intel/doc_research/default.md", include_str!("../../../../templates/init/doc_research/default.md")),
];

/// The defaults of the procedure files an answer names and the repository lacks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DefaultProcedures {
    /// What these are and how to use them.
    pub note: String,
    pub files: Vec<DefaultProcedure>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DefaultProcedure {
    /// The path the instruction names (not in this repository).
    pub path: String,
    /// The text `git code-intel init` would write there: follow it as that file.
    pub text: String,
}

/// The procedure files `texts` name (a path, or a directory's `*.md`) that are not in the
/// repository at `root`, with their defaults. A directory counts as present when it holds at
/// least one `.md` file (the project's own procedures replace the defaults).
pub fn missing<'a>(root: &Path, texts: impl IntoIterator<Item = &'a str>) -> Vec<DefaultProcedure> {
    let mut found: Vec<DefaultProcedure> = Vec::new();
    for named in texts.into_iter().flat_map(named_paths) {
        let defaults: Vec<&(&str, &str)> = match named.strip_suffix("*.md") {
            Some(dir) if !has_markdown(&root.join(dir)) => DEFAULTS
                .iter()
                .filter(|(path, _)| path.strip_prefix(dir).is_some_and(|rest| !rest.contains('/')))
                .collect(),
            Some(_) => Vec::new(),
            None if root.join(&named).is_file() => Vec::new(),
            None => DEFAULTS.iter().filter(|(path, _)| *path == named).collect(),
        };
        for (path, text) in defaults {
            if !found.iter().any(|f| f.path == *path) {
                found.push(DefaultProcedure { path: (*path).to_owned(), text: (*text).to_owned() });
            }
        }
    }
    found
}

/// The `.code-intel/…` paths `text` names, with sentence punctuation after them left off.
fn named_paths(text: &str) -> impl Iterator<Item = String> + '_ {
    text.match_indices(".code-intel/").map(move |(at, _)| {
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-' | '*')))
            .unwrap_or(rest.len());
        rest[..end].trim_end_matches(['.', '/']).to_owned()
    })
}

fn has_markdown(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| e.path().extension().is_some_and(|x| x == "md") && e.path().is_file())
    })
}

/// What to send with an answer whose `texts` (its instruction, message, warning) name procedure
/// files the repository lacks; None when it has them all.
pub(super) fn for_answer<'a>(ws: &Workspace, texts: impl IntoIterator<Item = &'a str>) -> Option<DefaultProcedures> {
    let files = missing(ws.repo.root(), texts);
    if files.is_empty() {
        return None;
    }
    let paths = files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>().join(", ");
    Some(DefaultProcedures { note: ws.contract.message(&msg::DEFAULT_PROCEDURES, &[("paths", &paths)]), files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_directories_without_trailing_punctuation() {
        let text = "Follow .code-intel/review_prompts/quality_review.md. Pick from .code-intel/verifiers/*.md (yours too), then .code-intel/user_escalation.md";
        let named: Vec<String> = named_paths(text).collect();
        assert_eq!(
            named,
            [
                ".code-intel/review_prompts/quality_review.md",
                ".code-intel/verifiers/*.md",
                ".code-intel/user_escalation.md"
            ]
        );
    }

    #[test]
    fn a_missing_file_or_empty_directory_gets_its_defaults_and_a_present_one_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let text = "Use .code-intel/verifiers/*.md and .code-intel/review_prompts/quality_review.md.";
        let paths = |found: Vec<DefaultProcedure>| found.into_iter().map(|f| f.path).collect::<Vec<_>>();
        assert_eq!(
            paths(missing(root, [text])),
            [
                ".code-intel/verifiers/tests.md",
                ".code-intel/verifiers/build_and_lint.md",
                ".code-intel/review_prompts/quality_review.md"
            ]
        );
        std::fs::create_dir_all(root.join(".code-intel/verifiers")).unwrap();
        std::fs::write(root.join(".code-intel/verifiers/cargo.md"), "Run cargo test.").unwrap();
        std::fs::create_dir_all(root.join(".code-intel/review_prompts")).unwrap();
        std::fs::write(root.join(".code-intel/review_prompts/quality_review.md"), "Ours.").unwrap();
        assert!(missing(root, [text]).is_empty(), "the project's own procedures replace the defaults");
        let quality = &missing(dir.path(), [".code-intel/review_prompts/garbage_detection.md"])[0];
        assert!(quality.text.contains("keep"), "the text is init's template: {}", quality.text);
    }
}

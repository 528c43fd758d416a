//! What both renderers say the same way: a report's figures in words, times, and the payloads'
//! fields read as the engine accepts them (a flag given as "true", a reviewed file under its
//! alias `path`, a decision with spaces around it).

use super::{Provenance, Report};

/// What the explored set is, as the report lists it.
pub(super) const EXPLORED: &str = "Explored files (named in a payload, or shown by a tool's answer)";

/// A note for a file kept in a review that the session's commit does not change (the user's own
/// change from before the task, left uncommitted, or a file the commit did not touch after all).
pub(super) fn not_committed(r: &Report, file: &str, decision: &str) -> &'static str {
    let in_commit = r.diff.iter().any(|f| f.path == file);
    if decision == "keep" && !in_commit && (r.git.task_commit.is_some() || r.git.merge_commit.is_some()) {
        " (not in the commit)"
    } else {
        ""
    }
}

/// How many tools were called, and submissions made (and refused).
pub(super) fn calls_line(r: &Report) -> String {
    format!(
        "{} tool call(s) besides start_session and submit_phase; {} submission(s) accepted, {} refused",
        r.tool_calls, r.submissions, r.refused_submissions
    )
}

/// The merge row's label and what it says.
pub(super) fn merge_label(r: &Report) -> &'static str {
    if r.git.fast_forward { "Merged (fast-forward to the task commit)" } else { "Merge commit" }
}

pub(super) fn provenance(p: Provenance) -> &'static str {
    match p {
        Provenance::ThisWorkTree => "this work tree (in progress)",
        Provenance::ThisClone => "this clone",
        Provenance::AnotherClone => "another clone (fetched with the shared history)",
    }
}

/// The tools called in a phase, each with how often.
pub(super) fn tool_counts(r: &Report, phase: &str) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for c in r.steps.iter().filter(|s| s.phase == phase).flat_map(|s| &s.calls) {
        let name = if c.tool == "submit_phase" { "submit_phase refused".to_owned() } else { c.tool.clone() };
        match counts.iter_mut().find(|(t, _)| *t == name) {
            Some((_, n)) => *n += 1,
            None => counts.push((name, 1)),
        }
    }
    if counts.is_empty() {
        return "—".into();
    }
    counts.iter().map(|(t, n)| if *n > 1 { format!("{t} ×{n}") } else { t.clone() }).collect::<Vec<_>>().join(", ")
}

/// A JSON value as text: strings as they are, anything else as compact JSON.
pub(super) fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line of at most `max` characters.
pub(super) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// An RFC 3339 time as a reader wants it: to the second, in UTC.
pub(super) fn when(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339).map_or_else(
        |_| rfc3339.to_owned(),
        |t| t.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

pub(super) fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// A payload flag as the engine accepts it: `true`, or the text "true".
pub(super) fn truthy(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// QUERY_FRAME's slots: name, value, quote (a slot given as plain text has no quote).
pub(super) fn slots(frame: &serde_json::Value) -> Vec<(String, String, String)> {
    frame["slots"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, slot)| match slot {
            serde_json::Value::String(s) => (name.clone(), s.clone(), String::new()),
            other => (name.clone(), text(&other["value"]), text(&other["quote"])),
        })
        .collect()
}

/// A PRE_COMMIT review's files: path (normalised as the engine does), decision, reason. A file
/// given as a path alone is kept.
pub(super) fn reviewed_files(review: &serde_json::Value) -> Vec<(String, String, String)> {
    review["reviewed_files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| match f {
            serde_json::Value::String(p) => (normalized(p), "keep".to_owned(), String::new()),
            _ => {
                let file = if f["file"].is_null() { &f["path"] } else { &f["file"] };
                let decision = if f["decision"].is_null() { &f["action"] } else { &f["decision"] };
                (normalized(&text(file)), text(decision).trim().to_ascii_lowercase(), text(&f["reason"]))
            }
        })
        .collect()
}

/// A path as the engine compares it (`./a/../b.rs` → `b.rs`).
pub(super) fn normalized(path: &str) -> String {
    code_intel_workflow::engine::submit::normalize_rel(path.trim())
}

/// A quality review's issues.
pub(super) fn issues(review: &serde_json::Value) -> Vec<String> {
    review["issues"].as_array().into_iter().flatten().map(text).filter(|i| !i.trim().is_empty()).collect()
}

/// Lines added and removed in the whole diff.
pub(super) fn diff_totals(r: &Report) -> (usize, usize) {
    r.diff.iter().fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions))
}

/// A call's arguments as a reader wants them: unset (null) ones left out, when they are whole
/// JSON (a trail written before they were left out when recorded).
pub(super) fn args(recorded: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(recorded) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.retain(|_, v| !v.is_null());
            serde_json::Value::Object(fields).to_string()
        }
        _ => recorded.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_fields_read_as_the_engine_accepts_them() {
        assert!(truthy(&serde_json::json!(true)) && truthy(&serde_json::json!(" True ")));
        assert!(!truthy(&serde_json::json!("false")) && !truthy(&serde_json::json!(1)));
        let review =
            serde_json::json!({"reviewed_files": ["a.rs", {"path": "./c.rs", "action": " Keep", "reason": "r"}]});
        assert_eq!(
            reviewed_files(&review),
            [
                ("a.rs".to_owned(), "keep".to_owned(), String::new()),
                ("c.rs".to_owned(), "keep".to_owned(), "r".to_owned())
            ]
        );
        assert_eq!(args(r#"{"symbol":"x","path":null}"#), r#"{"symbol":"x"}"#);
        assert_eq!(args(r#"{"symbol":"x","pa…"#), r#"{"symbol":"x","pa…"#, "cut arguments stay as they are");
    }
}

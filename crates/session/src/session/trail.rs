//! The trail a session leaves for its report (docs/REPORT.md): each accepted submission adds a
//! step to the checkpoint (the payload kept here, bounded), and when the session ends the history
//! keeps the report data ([`kept`]) beside its record; the `report` module reads them.

use serde::{Deserialize, Serialize};

use code_intel_workflow::engine::state::{Checkpoint, TrailStep};

/// The version of the report's JSON and of the kept report data; a reader refuses a newer one.
pub const REPORT_VERSION: u32 = 1;
/// A payload larger than this is not kept in the trail (a note says so instead).
const MAX_KEPT_PAYLOAD_BYTES: usize = 32 * 1024;

/// How the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// It reached its last phase (for a change: merged).
    Completed,
    /// `git code-intel clean` removed it before it finished.
    Cleaned,
    /// It is this work tree's session, not finished yet.
    InProgress,
}

/// The report data the history keeps for a session (`report.json` beside its record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    pub report_version: u32,
    pub ended: Ended,
    pub ended_at: String,
    /// The last checkpoint, with its trail (the user's own uncommitted files left out).
    pub session: Checkpoint,
}

/// The report data of a session that ends now, as the history keeps it.
pub fn kept(checkpoint: &Checkpoint, ended: Ended, ended_at: &str) -> serde_json::Value {
    let mut session = checkpoint.clone();
    // Which of the user's own files were uncommitted is theirs, not the team's.
    session.orchestrator_state.user_changes.clear();
    let kept = Kept { report_version: REPORT_VERSION, ended, ended_at: ended_at.to_owned(), session };
    serde_json::to_value(&kept)
        .unwrap_or_else(|e| serde_json::json!({"report_version": REPORT_VERSION, "unwritable": e.to_string()}))
}

/// A payload as the trail keeps it: whole, or (too large to keep) a note of its size and its
/// summary.
pub fn kept_payload(data: &serde_json::Value) -> serde_json::Value {
    let size = serde_json::to_vec(data).map_or(usize::MAX, |v| v.len());
    if size <= MAX_KEPT_PAYLOAD_BYTES {
        return data.clone();
    }
    omitted(data, format!("{size} bytes, over the {MAX_KEPT_PAYLOAD_BYTES} a report keeps"))
}

/// A payload given way to `why`: the note, and the payload's summary (cut short).
fn omitted(payload: &serde_json::Value, why: String) -> serde_json::Value {
    let mut note = serde_json::json!({ "omitted": why });
    if let Some(summary) = payload.get("summary").and_then(serde_json::Value::as_str) {
        note["summary"] = summary.chars().take(MAX_OMITTED_SUMMARY_CHARS).collect::<String>().into();
    }
    note
}

/// What a checkpoint's trail holds at most, in bytes of its compact JSON (about 1.3 times that
/// as the checkpoint stores it). The checkpoint's own cap leaves the trail out; every tool call
/// reads the checkpoint, so the trail is kept small.
const MAX_TRAIL_BYTES: usize = 192 * 1024;
/// What an omitted payload keeps of its summary.
const MAX_OMITTED_SUMMARY_CHARS: usize = 400;

/// Keeps `trail` under `MAX_TRAIL_BYTES`, oldest steps first: their payloads give way (a
/// note says so, with the summary), then their calls' arguments and messages, then their calls
/// (counted in `calls_not_kept`), then the summaries. Each step's size is measured once and
/// again only when it changes.
pub fn bound_trail(trail: &mut [TrailStep]) {
    let size_of = |s: &TrailStep| serde_json::to_vec(s).map_or(MAX_TRAIL_BYTES, |v| v.len());
    let mut sizes: Vec<usize> = trail.iter().map(size_of).collect();
    let mut total: usize = sizes.iter().sum();
    for shed in 0..4 {
        for (i, step) in trail.iter_mut().enumerate() {
            if total <= MAX_TRAIL_BYTES {
                return;
            }
            let changed = match shed {
                0 if step.payload.get("omitted").is_none() => {
                    let why = format!("{} bytes: the trail was over {MAX_TRAIL_BYTES}", sizes[i]);
                    step.payload = omitted(&step.payload, why);
                    true
                }
                1 if step.calls.iter().any(|c| !c.args.is_empty() || c.detail.is_some()) => {
                    for call in &mut step.calls {
                        call.args.clear();
                        call.detail = None;
                    }
                    true
                }
                2 if !step.calls.is_empty() => {
                    step.calls_not_kept += step.calls.len();
                    step.calls.clear();
                    true
                }
                3 if step.payload.get("summary").is_some() => {
                    if let Some(fields) = step.payload.as_object_mut() {
                        fields.remove("summary");
                    }
                    true
                }
                _ => false,
            };
            if changed {
                let size = size_of(step);
                total = total - sizes[i] + size;
                sizes[i] = size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_intel_workflow::engine::state::ServedCall;

    fn step(n: usize, payload_bytes: usize) -> TrailStep {
        TrailStep {
            step: format!("step_{n:02}_X"),
            submitted_at: "2026-11-27T08:00:00.000Z".into(),
            calls: vec![ServedCall { tool: "search_text".into(), args: "a".repeat(300), ..ServedCall::default() }; 10],
            payload: serde_json::json!({"summary": format!("step {n}"), "findings": ["x".repeat(payload_bytes)]}),
            ..TrailStep::default()
        }
    }

    #[test]
    fn a_trail_over_its_bound_sheds_the_oldest_payloads_first_and_keeps_the_summaries() {
        let mut trail: Vec<TrailStep> = (0..40).map(|n| step(n, 30_000)).collect();
        bound_trail(&mut trail);
        let size: usize = trail.iter().map(|s| serde_json::to_vec(s).unwrap().len()).sum();
        assert!(size <= MAX_TRAIL_BYTES, "{size}");
        assert!(trail[0].payload["omitted"].is_string(), "the oldest payload gave way");
        assert_eq!(trail[0].payload["summary"], "step 0");
        assert!(trail[39].payload["omitted"].is_null(), "the newest payload is kept");
        assert_eq!(trail[0].calls[0].args.len(), 300, "calls are kept while payloads can give way");
        // Under the bound, nothing changes.
        let mut small: Vec<TrailStep> = (0..3).map(|n| step(n, 100)).collect();
        let before = small.clone();
        bound_trail(&mut small);
        assert_eq!(small, before);
    }

    #[test]
    fn a_payload_too_large_to_keep_is_a_note_of_its_size() {
        let big = serde_json::json!({"findings": ["y".repeat(MAX_KEPT_PAYLOAD_BYTES)]});
        assert!(kept_payload(&big)["omitted"].as_str().unwrap().contains("bytes, over the"));
        let small = serde_json::json!({"summary": "s"});
        assert_eq!(kept_payload(&small), small);
    }
}

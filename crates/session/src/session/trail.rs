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

/// A payload as the trail keeps it: whole, or a note when it is too large to keep.
pub fn kept_payload(data: &serde_json::Value) -> serde_json::Value {
    let size = serde_json::to_vec(data).map_or(usize::MAX, |v| v.len());
    if size <= MAX_KEPT_PAYLOAD_BYTES {
        data.clone()
    } else {
        serde_json::json!({"omitted": format!("{size} bytes, over the {MAX_KEPT_PAYLOAD_BYTES} a report keeps")})
    }
}

/// The most a checkpoint's trail holds, in bytes of its JSON (the checkpoint's own cap leaves
/// the trail out).
const MAX_TRAIL_BYTES: usize = 512 * 1024;

/// Keeps `trail` under [`MAX_TRAIL_BYTES`]: the oldest steps' payloads give way first (a note
/// says so), then their calls' arguments and messages, then their calls.
pub fn bound_trail(trail: &mut [TrailStep]) {
    let size = |t: &[TrailStep]| serde_json::to_vec_pretty(t).map_or(usize::MAX, |v| v.len());
    if size(trail) <= MAX_TRAIL_BYTES {
        return;
    }
    let omitted =
        |bytes: usize| serde_json::json!({"omitted": format!("{bytes} bytes: the trail was over {MAX_TRAIL_BYTES}")});
    for shed in 0..3 {
        for i in 0..trail.len() {
            let step = &mut trail[i];
            match shed {
                0 if step.payload.get("omitted").is_none() => {
                    let bytes = serde_json::to_vec(&step.payload).map_or(0, |v| v.len());
                    let summary = step.payload.get("summary").cloned();
                    step.payload = omitted(bytes);
                    if let Some(summary) = summary {
                        step.payload["summary"] = summary;
                    }
                }
                1 => {
                    for call in &mut step.calls {
                        call.args.clear();
                        call.detail = None;
                    }
                }
                2 => step.calls.clear(),
                _ => continue,
            }
            if size(trail) <= MAX_TRAIL_BYTES {
                return;
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
            commit: None,
        }
    }

    #[test]
    fn a_trail_over_its_bound_sheds_the_oldest_payloads_first_and_keeps_the_summaries() {
        let mut trail: Vec<TrailStep> = (0..40).map(|n| step(n, 30_000)).collect();
        bound_trail(&mut trail);
        let size = serde_json::to_vec_pretty(&trail).unwrap().len();
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

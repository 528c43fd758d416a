//! Failures teach: when a session's request is close to one whose outcome was recorded as a
//! failure or partial, EXPLORATION shows what was tried then and the user's note of why it did
//! not work, as quoted data with its provenance (recorded in this clone, or a teammate's that
//! came with the shared OutcomeLog).
//!
//! Close means lexically close: the share of the request's content words (lower-cased, common
//! words left out) that the recorded request and target also hold, at least
//! [`MIN_OVERLAP`] and at least two words. No model is needed, so it works everywhere.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::Serialize;

use code_intel_gitstate::CloneKey;
use code_intel_gitstate::log::{self, OUTCOME_LOG, OUTCOME_SEAL};

/// Records looked at, newest first.
const LOOKED_AT: usize = 500;
/// Lessons shown at most.
const SHOWN: usize = 3;
/// The share of the request's content words a recorded request must hold.
pub const MIN_OVERLAP: f32 = 0.5;
/// Each quoted text is cut to this many characters.
const MAX_QUOTED_CHARS: usize = 300;

/// Words that tell requests apart too little.
const COMMON: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "fix", "for", "from", "how", "i", "if", "in",
    "into", "is", "it", "its", "make", "of", "on", "or", "so", "that", "the", "this", "to", "we", "what", "when",
    "where", "which", "why", "with", "you", "should", "would", "could", "please", "add", "use", "new", "not", "no",
    "change", "update",
];

/// One earlier outcome, quoted.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PastFailure {
    /// failure or partial.
    pub outcome: String,
    /// The earlier session's request, as recorded.
    pub query: String,
    /// Why it failed, in the words recorded with the outcome.
    pub note: String,
    pub target_feature: String,
    /// The file:line places that session's tasks cited (at most 5).
    pub evidence: Vec<String>,
    pub session_id: String,
    pub recorded_at: String,
    /// "local" (recorded in this clone) or "shared" (a teammate's, from the shared OutcomeLog).
    pub provenance: &'static str,
    /// The share of this request's words the earlier one holds.
    pub overlap: f32,
}

/// What EXPLORATION shows of earlier failures.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PastFailures {
    /// How to read them (from the contract).
    pub note: String,
    pub outcomes: Vec<PastFailure>,
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !COMMON.contains(&w.as_str()))
        .collect()
}

fn quoted(value: &serde_json::Value) -> String {
    let text = value.as_str().unwrap_or_default().trim();
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The recorded failures and partials whose request is close to `query`, closest first.
pub fn close_to(repo: &gix::Repository, query: &str) -> Vec<PastFailure> {
    let wanted = words(query);
    if wanted.len() < 2 {
        return Vec::new();
    }
    let Ok(read) = log::records(repo, OUTCOME_LOG, "record.json", LOOKED_AT) else { return Vec::new() };
    let key = CloneKey::of(repo).ok();
    let mut found: Vec<PastFailure> = Vec::new();
    for record in read.records {
        let v = &record.value;
        let outcome = v["outcome"].as_str().unwrap_or_default();
        if !matches!(outcome, "failure" | "partial") {
            continue;
        }
        let theirs = words(&format!(
            "{} {}",
            v["query"].as_str().unwrap_or_default(),
            v["target_feature"].as_str().unwrap_or_default()
        ));
        let shared = wanted.intersection(&theirs).count();
        let overlap = shared as f32 / wanted.len() as f32;
        if shared < 2 || overlap < MIN_OVERLAP {
            continue;
        }
        let here =
            key.as_ref().zip(record.seal.as_deref()).is_some_and(|(k, s)| k.verifies(OUTCOME_SEAL, &record.bytes, s));
        found.push(PastFailure {
            outcome: outcome.to_owned(),
            query: quoted(&v["query"]),
            note: quoted(&v["note"]),
            target_feature: quoted(&v["target_feature"]),
            evidence: v["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str())
                .take(5)
                .map(|e| quoted(&serde_json::Value::String(e.to_owned())))
                .collect(),
            session_id: quoted(&v["session_id"]),
            recorded_at: quoted(&v["recorded_at"]),
            provenance: if here { "local" } else { "shared" },
            overlap,
        });
    }
    found.sort_by(|a, b| b.overlap.total_cmp(&a.overlap));
    found.truncate(SHOWN);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(outcome: &str, query: &str, note: &str) -> serde_json::Value {
        json!({"outcome": outcome, "query": query, "note": note, "target_feature": "", "evidence": ["src/auth.py:3"],
               "session_id": "s", "recorded_at": "2026-11-26T00:00:00Z"})
    }

    /// Which records are shown, in which order, how they are cut, and whose they are.
    #[test]
    fn close_failures_are_shown_closest_first_cut_and_with_their_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init(dir.path()).unwrap();
        let key = CloneKey::of(&repo).unwrap();
        let sealed = |v: &serde_json::Value| {
            log::append_sealed(&repo, OUTCOME_LOG, v, "outcome", |b| key.seal(OUTCOME_SEAL, b)).unwrap();
        };
        let long_note = "n".repeat(400);
        sealed(&outcome("failure", "Make login() refresh the Session token before it expires", &long_note));
        // A teammate's (no seal of this clone): shared.
        log::append(&repo, OUTCOME_LOG, &outcome("failure", "refresh session token in login", "broke cookies"), "o")
            .unwrap();
        // Too far (2 of 6 words), a success, and a third and fourth close one beyond the cap.
        log::append(&repo, OUTCOME_LOG, &outcome("partial", "session token expiry", "x"), "o").unwrap();
        log::append(&repo, OUTCOME_LOG, &outcome("success", "refresh session token login before expires", "x"), "o")
            .unwrap();
        log::append(&repo, OUTCOME_LOG, &outcome("partial", "login token refresh", "third"), "o").unwrap();
        log::append(&repo, OUTCOME_LOG, &outcome("failure", "token refresh for the session", "fourth"), "o").unwrap();

        let found = close_to(&repo, "Refresh the session token in login before it expires");
        let notes: Vec<&str> = found.iter().map(|f| f.note.as_str()).collect();
        assert_eq!(found.len(), 3, "{notes:?}");
        assert_eq!(found[0].provenance, "local");
        assert_eq!(found[0].overlap, 1.0);
        assert_eq!(found[0].note.chars().count(), MAX_QUOTED_CHARS + 1, "cut, with an ellipsis");
        assert_eq!((found[1].note.as_str(), found[1].provenance), ("broke cookies", "shared"));
        assert!(found.iter().all(|f| f.overlap >= MIN_OVERLAP && f.outcome != "success"), "{notes:?}");
        assert!(!notes.contains(&"x"), "{notes:?}");
        // Fewer than two content words: nothing is matched.
        assert!(close_to(&repo, "Fix the login").is_empty());
    }

    #[test]
    fn content_words_leave_the_common_ones_out() {
        assert_eq!(
            words("Fix the login() token refresh, please"),
            ["login", "refresh", "token"].iter().map(|s| (*s).to_owned()).collect()
        );
    }
}

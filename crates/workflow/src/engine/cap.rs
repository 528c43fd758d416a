//! The checkpoint's size cap (the seeds: about 256 KB). A checkpoint over it first has its
//! phase summaries shortened (each keeps its opening and every `path:line` it cites); one still
//! over it is refused, and nothing is saved.
//!
//! The size is the checkpoint as the store writes it (pretty JSON), less the record of the
//! user's own uncommitted files (`user_changes`): those are the user's, not the agent's, and a
//! submit must never be refused for them; and less the trail (what the session's report is made
//! of), which the adapter keeps under a bound of its own: a report must never cost a session its
//! next step.

use super::evidence;
use super::state::Checkpoint;

/// The largest checkpoint stored, in bytes of its JSON.
pub const CHECKPOINT_LIMIT: usize = 256 * 1024;
/// What a shortened summary keeps of its opening, in characters.
const SHORT_SUMMARY_CHARS: usize = 400;

/// What fitting a checkpoint under the cap did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// It was under the cap as it was.
    AsItWas,
    /// Its summaries were shortened to fit.
    SummariesShortened,
}

/// The checkpoint's size in bytes as stored, the user's own uncommitted files left out.
pub fn size(checkpoint: &Checkpoint) -> usize {
    let mut counted = checkpoint.clone();
    counted.orchestrator_state.user_changes.clear();
    counted.trail.clear();
    stored_bytes(&counted)
}

/// The checkpoint's bytes as the store writes them (pretty JSON).
fn stored_bytes(checkpoint: &Checkpoint) -> usize {
    serde_json::to_vec_pretty(checkpoint).map_or(usize::MAX, |v| v.len())
}

/// Fits `checkpoint` under `limit`, shortening its summaries if it must; `Err(size)` when even
/// that is not enough (the size with the summaries shortened).
pub fn fit(checkpoint: &mut Checkpoint, limit: usize) -> Result<Fit, usize> {
    // Measured without the user's files and the trail, which are put back whatever the outcome.
    let user_changes = std::mem::take(&mut checkpoint.orchestrator_state.user_changes);
    let trail = std::mem::take(&mut checkpoint.trail);
    let fitted = fit_counted(checkpoint, limit);
    checkpoint.orchestrator_state.user_changes = user_changes;
    checkpoint.trail = trail;
    fitted
}

fn fit_counted(checkpoint: &mut Checkpoint, limit: usize) -> Result<Fit, usize> {
    if stored_bytes(checkpoint) <= limit {
        return Ok(Fit::AsItWas);
    }
    for record in checkpoint.phase_payloads.values_mut() {
        record.summary = shorten(&record.summary, SHORT_SUMMARY_CHARS);
    }
    match stored_bytes(checkpoint) {
        n if n <= limit => Ok(Fit::SummariesShortened),
        n => Err(n),
    }
}

/// `text` cut to its first `keep` characters, followed by every `path:line` reference of the
/// rest (each once).
pub fn shorten(text: &str, keep: usize) -> String {
    if text.chars().count() <= keep {
        return text.to_owned();
    }
    let cut: usize = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let (head, rest) = text.split_at(cut);
    let mut refs: Vec<&str> = Vec::new();
    for word in rest.split_whitespace() {
        let word = word.trim_matches(|c: char| matches!(c, ',' | ';' | '(' | ')' | '`' | '\'' | '"' | '[' | ']'));
        let word = word.trim_end_matches('.');
        if evidence::parse_any_order(word).is_some() && !refs.contains(&word) {
            refs.push(word);
        }
    }
    if refs.is_empty() {
        format!("{head} [shortened]")
    } else {
        format!("{head} [shortened; cites {}]", refs.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortened_summary_keeps_its_opening_and_its_references() {
        let text = format!("{} see src/a.py:10-12, and src/b.rs:4. {}", "x".repeat(500), "y ".repeat(300));
        let short = shorten(&text, 400);
        assert!(short.starts_with(&"x".repeat(400)));
        assert!(short.ends_with("[shortened; cites src/a.py:10-12, src/b.rs:4]"), "{short}");
        assert_eq!(shorten("short", 400), "short");
    }

    #[test]
    fn the_trail_does_not_count_against_the_cap_and_is_kept() {
        let mut cp = crate::engine::submit::start(
            &crate::contract::Contract::builtin(),
            crate::engine::submit::StartParams {
                session_id: "s".into(),
                intent: crate::engine::state::Intent::Investigate,
                query: "q".into(),
                flags: Default::default(),
                created_at: "2026-11-27T00:00:00Z".into(),
                stale_branches: false,
                verify_commands: Vec::new(),
            },
        )
        .0;
        let bulky =
            crate::engine::state::TrailStep { payload: serde_json::json!("z".repeat(300_000)), ..Default::default() };
        cp.trail.push(bulky.clone());
        assert!(size(&cp) < 10_000);
        assert_eq!(fit(&mut cp, CHECKPOINT_LIMIT), Ok(Fit::AsItWas));
        assert_eq!(cp.trail, vec![bulky], "the trail is put back");
    }
}

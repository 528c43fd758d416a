//! What a successful session teaches the Map: its query, QUERY_FRAME's target, and the files
//! and symbols its done checklist items cite as `file:line` evidence.

use std::collections::BTreeSet;

use code_intel_workflow::engine::evidence;
use code_intel_workflow::engine::state::{ItemStatus, SessionState};

use super::map::MapEntry;

/// The `file:line` evidence of the session's done checklist items, in task order.
pub fn evidence_of(state: &SessionState) -> Vec<String> {
    let mut out = Vec::new();
    for task in &state.tasks {
        for item in &task.checklist {
            if item.status == ItemStatus::Done
                && let Some(e) = item.evidence.as_deref().filter(|e| evidence::parse(e).is_some())
                && !out.iter().any(|x| x == e)
            {
                out.push(e.to_owned());
            }
        }
    }
    out
}

/// What a finished or active session looks like to the Map.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct SessionFacts {
    #[serde(default)]
    pub session_id: String,
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub learned: code_intel_workflow::engine::state::Learned,
    #[serde(default)]
    pub evidence: Vec<String>,
}

impl SessionFacts {
    pub fn of(state: &SessionState) -> SessionFacts {
        SessionFacts {
            session_id: state.session_id.clone(),
            query: state.query.clone(),
            learned: state.learned.clone(),
            evidence: evidence_of(state),
        }
    }
}

/// The Map entry for `facts`. `symbol_at(file, line)` names the definition enclosing a line;
/// `recorded_by` is who records it (the clone's git identity).
pub fn entry_for(
    facts: &SessionFacts,
    symbol_at: impl Fn(&str, usize) -> Option<String>,
    now: &str,
    recorded_by: &str,
) -> MapEntry {
    let mut files = BTreeSet::new();
    let mut symbols: Vec<String> = facts.learned.target_symbols.clone();
    for e in &facts.evidence {
        let Some(r) = evidence::parse(e) else { continue };
        files.insert(r.path.clone());
        if let Some(s) = symbol_at(&r.path, r.start)
            && !symbols.contains(&s)
        {
            symbols.push(s);
        }
    }
    MapEntry {
        id: MapEntry::make_id(&facts.query, &facts.session_id),
        query: facts.query.clone(),
        target_feature: facts.learned.target_feature.clone(),
        symbols,
        files: files.into_iter().collect(),
        session_id: facts.session_id.clone(),
        recorded_at: now.to_owned(),
        recorded_by: recorded_by.to_owned(),
    }
    .fitted()
}

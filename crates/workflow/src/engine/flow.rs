//! The phase matrix: which phase comes next, given the intent and the flags.
//! Decisions the seeds leave open are recorded in `docs/PROTOCOL.md`.

use super::phase::{Phase, ReadyStep};
use super::state::{Flags, GateLevel, Intent};
use crate::contract::catalogue::{self as msg, Msg};

/// Where a session goes after exploration and the gates, or where a finished session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    Phase(Phase, Option<ReadyStep>),
    /// The session ends, with this message.
    Complete(Msg),
}

/// Investigation sessions end after exploration: INVESTIGATE/QUESTION intents, or `only_explore`.
pub(super) fn investigates(intent: Intent, flags: &Flags) -> bool {
    !intent.implements() || flags.only_explore
}

/// `fast` and `quick` skip exploration (steps 5–11) — for implementation sessions only; an
/// investigation without exploration would have nothing to do.
fn skips_exploration(intent: Intent, flags: &Flags) -> bool {
    (flags.fast || flags.quick) && !investigates(intent, flags)
}

/// The first phase after `start_session`.
pub(super) fn first(intent: Intent, flags: &Flags, stale_branches: bool) -> Phase {
    if flags.only_verify && intent.implements() {
        Phase::PostImplVerify
    } else if stale_branches {
        Phase::BranchIntervention
    } else {
        after_branch_intervention(flags)
    }
}

pub(super) fn after_branch_intervention(flags: &Flags) -> Phase {
    if flags.no_doc_research { Phase::QueryFrame } else { Phase::DocumentResearch }
}

pub(super) fn after_query_frame(intent: Intent, flags: &Flags) -> Next {
    if skips_exploration(intent, flags) {
        Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
    } else {
        Next::Phase(Phase::Exploration, None)
    }
}

/// After a gate: its phase when the agent says it is needed or the gate level is full.
pub(super) fn after_gate(gate: Phase, answer: bool, flags: &Flags, intent: Intent, semantic_available: bool) -> Next {
    let run = answer || flags.gate_level == GateLevel::Full;
    match gate {
        Phase::Q1 if run && semantic_available => Next::Phase(Phase::Semantic, None),
        Phase::Q1 => Next::Phase(Phase::Q2, None),
        Phase::Q2 if run => Next::Phase(Phase::Verification, None),
        Phase::Q2 => Next::Phase(Phase::Q3, None),
        Phase::Q3 if run => Next::Phase(Phase::ImpactAnalysis, None),
        _ => end_of_exploration(intent, flags, Phase::Q3),
    }
}

/// After the last exploration phase (`from`: Q3, or IMPACT_ANALYSIS).
pub(super) fn end_of_exploration(intent: Intent, flags: &Flags, from: Phase) -> Next {
    if investigates(intent, flags) && from == Phase::ImpactAnalysis {
        Next::Complete(msg::INVESTIGATION_COMPLETE_AFTER_IMPACT)
    } else if investigates(intent, flags) {
        Next::Complete(msg::INVESTIGATION_COMPLETE)
    } else {
        Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
    }
}

/// After READY completion (step 14).
pub(super) fn after_ready(flags: &Flags) -> Next {
    match (flags.no_verify, flags.quick) {
        (true, true) => Next::Complete(msg::SESSION_COMPLETE_NO_VERIFY_QUICK),
        (true, false) => Next::Phase(Phase::PreCommit, None),
        _ => Next::Phase(Phase::PostImplVerify, None),
    }
}

/// After a passed verification.
pub(super) fn after_verify_passed(flags: &Flags) -> Next {
    if flags.quick || flags.only_verify {
        Next::Complete(msg::SESSION_COMPLETE_QUICK)
    } else {
        Next::Phase(Phase::PreCommit, None)
    }
}

/// Whether failed verifications go to VERIFY_INTERVENTION once a task has failed 3 times.
pub(super) fn intervention_enabled(flags: &Flags) -> bool {
    !(flags.no_intervention || flags.quick || flags.no_verify)
}

/// After PRE_COMMIT: QUALITY_REVIEW unless `no_quality` or `fast`.
pub(super) fn after_pre_commit(flags: &Flags) -> Phase {
    if flags.no_quality || flags.fast { Phase::Merge } else { Phase::QualityReview }
}

/// Whether the flow works on a task branch: every implementation flow except `quick`. (After
/// BRANCH_INTERVENTION `continue` the branch HEAD was on is adopted; when HEAD was on none, the
/// session makes its own, as a fresh one would.)
pub(super) fn uses_task_branch(flags: &Flags) -> bool {
    !flags.quick
}

/// Failures before VERIFY_INTERVENTION, interventions before user escalation, quality reverts
/// before forced completion.
pub(super) const FAILURES_BEFORE_INTERVENTION: u32 = 3;
pub(super) const INTERVENTIONS_BEFORE_ESCALATION: u32 = 2;
pub(super) const QUALITY_REVERTS_BEFORE_FORCED_COMPLETION: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(f: impl FnOnce(&mut Flags)) -> Flags {
        let mut x = Flags::default();
        f(&mut x);
        x
    }

    #[test]
    fn first_phase() {
        let none = Flags::default();
        assert_eq!(first(Intent::Implement, &none, false), Phase::DocumentResearch);
        assert_eq!(first(Intent::Implement, &none, true), Phase::BranchIntervention);
        assert_eq!(first(Intent::Investigate, &flags(|f| f.no_doc_research = true), false), Phase::QueryFrame);
        assert_eq!(first(Intent::Modify, &flags(|f| f.only_verify = true), true), Phase::PostImplVerify);
        assert_eq!(first(Intent::Question, &flags(|f| f.only_verify = true), false), Phase::DocumentResearch);
    }

    #[test]
    fn fast_and_quick_skip_exploration_only_when_implementing() {
        let fast = flags(|f| f.fast = true);
        assert_eq!(after_query_frame(Intent::Implement, &fast), Next::Phase(Phase::Ready, Some(ReadyStep::Plan)));
        assert_eq!(after_query_frame(Intent::Investigate, &fast), Next::Phase(Phase::Exploration, None));
        let quick_explore = flags(|f| {
            f.quick = true;
            f.only_explore = true
        });
        assert_eq!(after_query_frame(Intent::Implement, &quick_explore), Next::Phase(Phase::Exploration, None));
    }

    #[test]
    fn gates_follow_the_answer_unless_full() {
        let auto = Flags::default();
        let full = flags(|f| f.gate_level = GateLevel::Full);
        let i = Intent::Implement;
        assert_eq!(after_gate(Phase::Q1, true, &auto, i, true), Next::Phase(Phase::Semantic, None));
        assert_eq!(after_gate(Phase::Q1, false, &auto, i, true), Next::Phase(Phase::Q2, None));
        assert_eq!(after_gate(Phase::Q1, false, &full, i, true), Next::Phase(Phase::Semantic, None));
        assert_eq!(after_gate(Phase::Q1, true, &auto, i, false), Next::Phase(Phase::Q2, None));
        assert_eq!(after_gate(Phase::Q2, true, &auto, i, true), Next::Phase(Phase::Verification, None));
        assert_eq!(after_gate(Phase::Q2, false, &auto, i, true), Next::Phase(Phase::Q3, None));
        assert_eq!(after_gate(Phase::Q2, false, &full, i, true), Next::Phase(Phase::Verification, None));
        assert_eq!(after_gate(Phase::Q3, true, &auto, i, true), Next::Phase(Phase::ImpactAnalysis, None));
        assert_eq!(after_gate(Phase::Q3, false, &auto, i, true), Next::Phase(Phase::Ready, Some(ReadyStep::Plan)));
        assert_eq!(after_gate(Phase::Q3, false, &full, i, true), Next::Phase(Phase::ImpactAnalysis, None));
        assert_eq!(
            after_gate(Phase::Q3, false, &auto, Intent::Investigate, true),
            Next::Complete(msg::INVESTIGATION_COMPLETE)
        );
    }

    #[test]
    fn implementation_tail_follows_the_matrix() {
        let d = Flags::default();
        assert_eq!(after_ready(&d), Next::Phase(Phase::PostImplVerify, None));
        assert_eq!(after_ready(&flags(|f| f.no_verify = true)), Next::Phase(Phase::PreCommit, None));
        assert_eq!(
            after_ready(&flags(|f| {
                f.no_verify = true;
                f.quick = true
            })),
            Next::Complete(msg::SESSION_COMPLETE_NO_VERIFY_QUICK)
        );
        assert_eq!(after_ready(&flags(|f| f.quick = true)), Next::Phase(Phase::PostImplVerify, None));
        assert_eq!(after_verify_passed(&d), Next::Phase(Phase::PreCommit, None));
        assert_eq!(after_verify_passed(&flags(|f| f.quick = true)), Next::Complete(msg::SESSION_COMPLETE_QUICK));
        assert_eq!(after_pre_commit(&d), Phase::QualityReview);
        assert_eq!(after_pre_commit(&flags(|f| f.no_quality = true)), Phase::Merge);
        assert_eq!(after_pre_commit(&flags(|f| f.fast = true)), Phase::Merge);
        assert!(intervention_enabled(&d));
        assert!(!intervention_enabled(&flags(|f| f.no_intervention = true)));
        assert!(!intervention_enabled(&flags(|f| f.quick = true)));
        assert!(uses_task_branch(&d));
        assert!(!uses_task_branch(&flags(|f| f.quick = true)));
    }
}

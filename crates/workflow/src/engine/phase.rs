//! The phases of a session, their step numbers, and the names the contract knows them by.

use serde::{Deserialize, Serialize};

/// Where a session is. The READY phase has three substeps, see [`ReadyStep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    BranchIntervention,
    DocumentResearch,
    QueryFrame,
    Exploration,
    Q1,
    Semantic,
    Q2,
    Verification,
    Q3,
    ImpactAnalysis,
    Ready,
    PostImplVerify,
    VerifyIntervention,
    PreCommit,
    QualityReview,
    Merge,
    SessionComplete,
}

/// The substeps of READY: planning (12), implementation (13, once per task), completion (14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReadyStep {
    Plan,
    Impl,
    Complete,
}

impl Phase {
    pub const ALL: &'static [Phase] = &[
        Phase::BranchIntervention,
        Phase::DocumentResearch,
        Phase::QueryFrame,
        Phase::Exploration,
        Phase::Q1,
        Phase::Semantic,
        Phase::Q2,
        Phase::Verification,
        Phase::Q3,
        Phase::ImpactAnalysis,
        Phase::Ready,
        Phase::PostImplVerify,
        Phase::VerifyIntervention,
        Phase::PreCommit,
        Phase::QualityReview,
        Phase::Merge,
        Phase::SessionComplete,
    ];

    /// The name used in responses and in the contract.
    pub fn name(self) -> &'static str {
        match self {
            Phase::BranchIntervention => "BRANCH_INTERVENTION",
            Phase::DocumentResearch => "DOCUMENT_RESEARCH",
            Phase::QueryFrame => "QUERY_FRAME",
            Phase::Exploration => "EXPLORATION",
            Phase::Q1 => "Q1",
            Phase::Semantic => "SEMANTIC",
            Phase::Q2 => "Q2",
            Phase::Verification => "VERIFICATION",
            Phase::Q3 => "Q3",
            Phase::ImpactAnalysis => "IMPACT_ANALYSIS",
            Phase::Ready => "READY",
            Phase::PostImplVerify => "POST_IMPL_VERIFY",
            Phase::VerifyIntervention => "VERIFY_INTERVENTION",
            Phase::PreCommit => "PRE_COMMIT",
            Phase::QualityReview => "QUALITY_REVIEW",
            Phase::Merge => "MERGE",
            Phase::SessionComplete => "SESSION_COMPLETE",
        }
    }

    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.iter().copied().find(|p| p.name() == name)
    }

    /// The step number of the seeds' 19-step flow (READY is 12–14, see [`step`]).
    pub fn base_step(self) -> u8 {
        match self {
            Phase::BranchIntervention => 2,
            Phase::DocumentResearch => 3,
            Phase::QueryFrame => 4,
            Phase::Exploration => 5,
            Phase::Q1 => 6,
            Phase::Semantic => 7,
            Phase::Q2 => 8,
            Phase::Verification => 9,
            Phase::Q3 => 10,
            Phase::ImpactAnalysis => 11,
            Phase::Ready => 12,
            Phase::PostImplVerify => 15,
            Phase::VerifyIntervention => 16,
            Phase::PreCommit => 17,
            Phase::QualityReview => 18,
            Phase::Merge => 19,
            Phase::SessionComplete => 20,
        }
    }
}

/// The step number of a phase, counting READY's substeps.
pub fn step(phase: Phase, ready: Option<ReadyStep>) -> u8 {
    match (phase, ready) {
        (Phase::Ready, Some(ReadyStep::Impl)) => 13,
        (Phase::Ready, Some(ReadyStep::Complete)) => 14,
        (p, _) => p.base_step(),
    }
}

/// The key of a phase in the contract's `phases` section.
pub fn contract_key(phase: Phase, ready: Option<ReadyStep>) -> &'static str {
    match (phase, ready) {
        (Phase::Ready, Some(ReadyStep::Impl)) => "READY_IMPL",
        (Phase::Ready, Some(ReadyStep::Complete)) => "READY_COMPLETE",
        (Phase::Ready, _) => "READY_PLAN",
        (p, _) => p.name(),
    }
}

/// The key a phase's summary is stored under: `step_05_EXPLORATION`, `step_12_READY_PLAN`.
pub fn summary_key(phase: Phase, ready: Option<ReadyStep>) -> String {
    format!("step_{:02}_{}", step(phase, ready), contract_key(phase, ready))
}

//! The state of one session: what the orchestrator keeps, and what goes into a checkpoint.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::phase::{Phase, ReadyStep};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Intent {
    Implement,
    Modify,
    Investigate,
    Question,
}

impl Intent {
    pub fn parse(s: &str) -> Option<Intent> {
        match s.trim().to_ascii_uppercase().as_str() {
            "IMPLEMENT" => Some(Intent::Implement),
            "MODIFY" => Some(Intent::Modify),
            "INVESTIGATE" => Some(Intent::Investigate),
            "QUESTION" => Some(Intent::Question),
            _ => None,
        }
    }

    /// INVESTIGATE and QUESTION end after exploration; there is no READY for them.
    pub fn implements(self) -> bool {
        matches!(self, Intent::Implement | Intent::Modify)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum GateLevel {
    #[default]
    Auto,
    Full,
}

impl GateLevel {
    /// `auto`/`a` and `full`/`f`, any case.
    pub fn parse(s: &str) -> Option<GateLevel> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "a" => Some(GateLevel::Auto),
            "full" | "f" => Some(GateLevel::Full),
            _ => None,
        }
    }
}

/// The options a session starts with (the skill's command flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Flags {
    pub gate_level: GateLevel,
    pub fast: bool,
    pub quick: bool,
    pub no_verify: bool,
    pub no_quality: bool,
    pub no_doc_research: bool,
    pub no_intervention: bool,
    pub only_explore: bool,
    pub only_verify: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItemStatus {
    Pending,
    Done,
    Skipped,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChecklistItem {
    pub item: String,
    pub status: ItemStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// blake3 (hex) of the evidence lines when the item was accepted: READY's completion
    /// re-checks them, so a later task that rewrote those lines reopens the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_hash: Option<String>,
    /// Done, with code that was already right: why (the agent's word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_right: Option<String>,
    /// Done, citing lines the session did not change (found at READY's completion).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Pending,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    pub description: String,
    pub status: TaskStatus,
    #[serde(default)]
    pub checklist: Vec<ChecklistItem>,
    #[serde(default)]
    pub failure_count: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revert_reason: String,
    /// Pending again because a later task changed the lines its evidence cited: its code is
    /// written, so reporting it anew needs no check_write_target (editing it still does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reopened: bool,
}

/// The safety-valve counters; `failure_count` is per task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Counters {
    /// Failed verifications since the last intervention.
    pub verification_failure_count: u32,
    pub quality_revert_count: u32,
    pub intervention_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseState {
    pub current_phase: Phase,
    pub step: u8,
    pub ready_substep: Option<ReadyStep>,
}

/// Everything the orchestrator knows about a session. Serialized as the checkpoint's
/// `orchestrator_state`; the phase summaries travel next to it as `phase_payloads`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    pub session_id: String,
    pub intent: Intent,
    pub query: String,
    pub flags: Flags,
    pub phase_state: PhaseState,
    /// `continue` when the user chose to stay on the current branch.
    pub branch_policy: Option<String>,
    /// The `llm_task_*` branch of this session, once created, and the branch it came from.
    pub task_branch: Option<String>,
    pub base_branch: Option<String>,
    /// The base branch's commit when the task branch was created.
    #[serde(default)]
    pub base_commit: Option<String>,
    /// The user's uncommitted changes when the task branch was created: path → blob id of the
    /// content then (None: deleted). They are left uncommitted unless the agent changed them.
    #[serde(default)]
    pub user_changes: BTreeMap<String, Option<String>>,
    pub counters: Counters,
    pub compaction_count: u64,
    pub tasks: Vec<Task>,
    pub completed_steps: Vec<u8>,
    /// Files the agent may write in READY.
    pub explored_files: BTreeSet<String>,
    /// git-code-intel tools the server served in the current phase.
    pub tools_called: BTreeSet<String>,
    /// Why the session came back to READY planning, shown in the instruction.
    pub revert_reason: Option<String>,
    pub quality_review_passed: bool,
    pub forced_completion: bool,
    pub created_at: String,
    /// What QUERY_FRAME named as the target, kept for the Map when the session succeeds.
    #[serde(default)]
    pub learned: Learned,
    /// The project's test, build and lint commands when the session started, which the
    /// verification phases' instructions name. What the hooks let run is read from the project
    /// each time, never from here.
    #[serde(default)]
    pub verify_commands: Vec<String>,
    /// How many times the session entered READY, where code changes: a witnessed run made
    /// after the last entry is a run of the code as it is now; one made at 0, before any
    /// change, is the baseline.
    #[serde(default)]
    pub ready_visits: u32,
    /// The checks the server ran itself (`run_check`), oldest first, the last
    /// [`MAX_WITNESSED_RUNS`] kept.
    #[serde(default)]
    pub witnessed_runs: Vec<WitnessedRun>,
    /// VERIFICATION's hypotheses, each with what its evidence is, as the server judged it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hypotheses: Vec<VerifiedHypothesis>,
}

/// What a hypothesis's evidence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// A run the server witnessed (`run:N`).
    WitnessedRun,
    /// `path:line` of code that exists.
    Code,
    /// Words alone: the agent's reasoning.
    Reasoning,
}

/// A hypothesis VERIFICATION accepted, with its evidence as given and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifiedHypothesis {
    pub hypothesis: String,
    pub evidence: Vec<String>,
    pub kind: EvidenceKind,
    /// The witnessed runs it cites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<u32>,
}

/// The most witnessed runs a session keeps.
pub const MAX_WITNESSED_RUNS: usize = 40;

/// A check the server ran itself in the work tree, under the phase's sandbox, and what its
/// output showed. Nothing here is the agent's word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessedRun {
    /// 1, 2, … in the session.
    pub id: u32,
    /// The project's verify command it ran.
    pub verify_command: String,
    /// The command line as run: the verify command and the selector, if one was given.
    pub command: String,
    /// The phase it ran in.
    pub phase: String,
    /// [`SessionState::ready_visits`] when it ran.
    pub after_ready_visits: u32,
    pub exit_code: i32,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Read from the runner's summary line, when one was recognised.
    pub runner: Option<String>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    pub failing: Vec<String>,
    /// The end of the output.
    pub tail: String,
}

impl WitnessedRun {
    pub fn succeeded(&self) -> bool {
        self.exit_code == 0 && !self.timed_out && self.failed.unwrap_or(0) == 0
    }

    /// The phase it ran in, and "(baseline)" when it ran before the session first entered READY.
    pub fn phase_label(&self) -> String {
        if self.after_ready_visits == 0 { format!("{} (baseline)", self.phase) } else { self.phase.clone() }
    }

    /// One line: how it ended, with the counts and failing tests when known.
    pub fn outcome(&self) -> String {
        let mut out =
            if self.timed_out { "the time limit ended it".to_owned() } else { format!("exit {}", self.exit_code) };
        if let (Some(p), Some(f)) = (self.passed, self.failed) {
            out.push_str(&format!(", {p} passed, {f} failed"));
        }
        if !self.failing.is_empty() {
            out.push_str(&format!(", failing: {}", self.failing.join(", ")));
        }
        out
    }
}

/// The parts of a session the Map learns from, besides the query and the task evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Learned {
    pub target_feature: String,
    pub target_symbols: Vec<String>,
}

impl SessionState {
    pub fn phase(&self) -> Phase {
        self.phase_state.current_phase
    }

    pub fn ready_step(&self) -> Option<ReadyStep> {
        self.phase_state.ready_substep
    }

    pub fn is_complete(&self) -> bool {
        self.phase() == Phase::SessionComplete
    }

    /// Moves to `phase` (and READY substep), forgetting the tools called in the old phase.
    pub fn enter(&mut self, phase: Phase, ready: Option<ReadyStep>) {
        let step = super::phase::step(self.phase(), self.ready_step());
        if !self.completed_steps.contains(&step) {
            self.completed_steps.push(step);
        }
        let ready = if phase == Phase::Ready { ready.or(Some(ReadyStep::Plan)) } else { None };
        if phase == Phase::Ready && self.phase() != Phase::Ready {
            self.ready_visits += 1;
        }
        self.phase_state =
            PhaseState { current_phase: phase, step: super::phase::step(phase, ready), ready_substep: ready };
        self.tools_called.clear();
    }

    /// The witnessed runs that speak for the code as it is now (made since the session last
    /// entered READY, once it has; in an `only_verify` session, which changes nothing, every
    /// run): for each verify command, its last full run and every run of one selector after
    /// it. A selector's passing run does not answer a full run's failure.
    pub fn current_runs(&self) -> Vec<&WitnessedRun> {
        let changes_code = !self.flags.only_verify;
        let since: Vec<&WitnessedRun> = self
            .witnessed_runs
            .iter()
            .filter(|r| (self.ready_visits > 0 || !changes_code) && r.after_ready_visits == self.ready_visits)
            .collect();
        let mut out: Vec<&WitnessedRun> = Vec::new();
        for (i, run) in since.iter().enumerate() {
            let later_full =
                since[i + 1..].iter().any(|r| r.verify_command == run.verify_command && r.command == r.verify_command);
            if !later_full {
                out.push(run);
            }
        }
        out
    }

    /// The baseline of `verify_command`: its last full run before the session first entered
    /// READY, when the agent could not yet have changed anything. An `only_verify` session has
    /// none: its runs are the verdict itself, and a failure there is never "pre-existing".
    pub fn baseline_for(&self, verify_command: &str) -> Option<&WitnessedRun> {
        if self.flags.only_verify {
            return None;
        }
        self.witnessed_runs
            .iter()
            .rev()
            .find(|r| r.after_ready_visits == 0 && r.verify_command == verify_command && r.command == r.verify_command)
    }

    /// The first witnessed run of the code as it is that fails for a reason the baseline does
    /// not explain, with the failing tests the baseline did not have (empty: not known by
    /// name). A run whose every failing test already failed in the baseline is pre-existing.
    pub fn regression(&self) -> Option<(&WitnessedRun, Vec<String>)> {
        self.current_runs().into_iter().filter(|r| !r.succeeded()).find_map(|run| {
            let base = self.baseline_for(&run.verify_command);
            let new: Vec<String> = match base {
                Some(b) if !b.succeeded() && !b.failing.is_empty() => {
                    run.failing.iter().filter(|f| !b.failing.contains(f)).cloned().collect()
                }
                _ => return Some((run, run.failing.clone())),
            };
            let explained = !run.failing.is_empty() && new.is_empty() && !run.timed_out;
            (!explained).then_some((run, new))
        })
    }

    pub fn pending_tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|t| t.status == TaskStatus::Pending)
    }
}

/// A checkpoint: the orchestrator state plus the summary of each accepted phase, and the trail
/// of what the session did (for its report; the engine decides by the state and summaries only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub orchestrator_state: SessionState,
    /// `step_05_EXPLORATION` → `{ "summary": … }` (only the summaries: the payloads are in the
    /// trail, for the report alone)
    pub phase_payloads: BTreeMap<String, SummaryRecord>,
    /// What the session did, one entry per accepted submission, for its report (`git code-intel
    /// report`). The engine never decides anything by it; the adapter writes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trail: Vec<TrailStep>,
}

/// One accepted submission in a session's trail: the step it answered, when, the tools served
/// in that step before it, the payload as sent, and the commit its git work made, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrailStep {
    /// The step's summary key (`step_05_EXPLORATION`), with `#<task id>` in READY's implementation.
    pub step: String,
    /// RFC 3339, when the submission was accepted.
    pub submitted_at: String,
    pub calls: Vec<ServedCall>,
    /// Calls made in the step beyond the ones kept.
    #[serde(skip_serializing_if = "is_zero")]
    pub calls_not_kept: usize,
    /// The payload as the agent sent it (or, when it was too large to keep, a note saying so).
    pub payload: serde_json::Value,
    /// The commit this step's git work made: the task commit (PRE_COMMIT, QUALITY_REVIEW) or
    /// the merge's result (MERGE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A tool call the server served in a step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServedCall {
    pub tool: String,
    /// The arguments, as compact JSON, cut at a few hundred bytes.
    pub args: String,
    /// RFC 3339, when the call started.
    pub at: String,
    pub ms: u64,
    /// The error code, when the call was refused or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error's message, cut at a few hundred bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// How many files its answer showed the content or symbols of.
    #[serde(skip_serializing_if = "is_zero")]
    pub files: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SummaryRecord {
    pub summary: String,
}

impl Checkpoint {
    /// The summaries as a flat map, the `phase_summaries` of a response.
    pub fn summaries(&self) -> BTreeMap<String, String> {
        self.phase_payloads.iter().map(|(k, v)| (k.clone(), v.summary.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Contract;
    use crate::engine::submit::{StartParams, start};

    fn run(id: u32, command: &str, verify: &str, visit: u32, exit_code: i32) -> WitnessedRun {
        WitnessedRun {
            id,
            verify_command: verify.into(),
            command: command.into(),
            phase: "POST_IMPL_VERIFY".into(),
            after_ready_visits: visit,
            exit_code,
            timed_out: false,
            duration_ms: 1,
            runner: None,
            passed: None,
            failed: None,
            skipped: None,
            failing: Vec::new(),
            tail: String::new(),
        }
    }

    #[test]
    fn the_runs_that_speak_for_the_code_are_those_since_the_last_ready_visit() {
        let params = StartParams {
            session_id: "s".into(),
            intent: Intent::Implement,
            query: "q".into(),
            flags: Flags::default(),
            created_at: "t".into(),
            stale_branches: false,
            verify_commands: vec!["pytest".into()],
        };
        let mut st = start(&Contract::builtin(), params).0.orchestrator_state;
        st.witnessed_runs.push(run(1, "pytest", "pytest", 0, 1));
        assert!(st.current_runs().is_empty(), "before any change: a baseline, not the code as it is");
        st.enter(Phase::Ready, None);
        st.enter(Phase::Ready, Some(ReadyStep::Impl));
        assert_eq!(st.ready_visits, 1, "a READY substep is the same visit");
        st.enter(Phase::PostImplVerify, None);
        st.witnessed_runs.push(run(2, "pytest", "pytest", 1, 1));
        st.witnessed_runs.push(run(3, "pytest 'tests/a.py'", "pytest", 1, 0));
        let ids = |st: &SessionState| st.current_runs().iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&st), [2, 3], "a selector's pass does not answer the full run's failure");
        st.witnessed_runs.push(run(4, "pytest", "pytest", 1, 0));
        assert_eq!(ids(&st), [4]);
        st.enter(Phase::Ready, None);
        assert!(st.current_runs().is_empty(), "back in READY the code changes: earlier runs are stale");
        // A session that only verifies changes nothing: its runs are of the code as it is.
        st.flags.only_verify = true;
        st.ready_visits = 0;
        st.witnessed_runs = vec![run(5, "pytest", "pytest", 0, 0)];
        assert_eq!(ids(&st), [5]);
        st.witnessed_runs = vec![run(6, "pytest", "pytest", 0, 1)];
        assert!(st.baseline_for("pytest").is_none() && st.regression().is_some(), "its own failure is no baseline");
    }
}

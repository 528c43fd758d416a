//! What `submit_phase` accepts in each phase, as Rust types.
//!
//! One type per phase holds its own fields; [`Common`] (summary, compaction_count) and
//! [`ToolsUsed`] are read from the same JSON object beside it. The doc comments are the field
//! descriptions the agent reads: [`super::schema`] turns these types into the
//! `expected_payload_schema` of every response and the human-readable `expected_payload` next
//! to it, so the description, the schema and the parser cannot drift apart.
//!
//! The types accept a few lenient forms the schema does not advertise (a slot as a plain
//! string, slots at the top level, `action` for `decision`, a number for a task id or a quality
//! score, `"true"` for `true`). Required fields are `Option` here so that a missing field gets
//! the contract's own message from `decode` or the engine, not a serde error.
//!
//! `decode` (via [`super::submit::decode_payload`]) is the only way in: it picks the type from the session's phase, recognizes
//! a payload meant for another phase, and maps a type error to a contract message.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Fields of every payload.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Common {
    /// What someone resuming needs (200-400 characters, at most 5 points); kept as
    /// phase_summaries.
    #[schemars(required, regex(pattern = r"\S"))]
    pub summary: Option<String>,
    /// Echo the last compaction_count; after losing your context, send the last value you
    /// know plus 1.
    pub compaction_count: Option<u64>,
}

/// `tools_used`, asked for in every phase except READY completion and MERGE.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ToolsUsed {
    /// Tools you called in this phase; this server's are checked, others (Read, ...) count
    /// for nothing.
    #[schemars(required, extend("uniqueItems" = true))]
    pub tools_used: Option<Vec<String>>,
}

/// The summary-only payload's optional `tools_used`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct OptionalToolsUsed {
    /// Tools used in this phase, if any (optional here).
    #[schemars(extend("uniqueItems" = true))]
    pub tools_used: Option<Vec<String>>,
}

/// Step 2: what to do with the `llm_task_*` branches earlier sessions left.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct BranchInterventionPayload {
    /// The user's choice. delete: remove every llm_task_* branch. merge: merge the task branch
    /// HEAD is on into its base, delete the others. continue: keep them; work on the task
    /// branch HEAD is on, or on a new one if HEAD is on none.
    #[schemars(required, extend("enum" = ["delete", "merge", "continue"]))]
    pub choice: Option<String>,
}

/// Step 3: the project documents read before the work.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct DocumentResearchPayload {
    /// The documents you read (paths relative to the repository root): every must_read one
    /// you did not skip; empty only when documents.must_read is empty or all of it is in
    /// skipped_documents.
    #[schemars(required)]
    pub documents_reviewed: Option<Vec<String>>,
    /// must_read documents you did not read, each with why.
    pub skipped_documents: Option<Vec<SkippedDocument>>,
}

/// A must_read document left unread, and why.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct SkippedDocument {
    /// Its path, as must_read gives it.
    #[schemars(required)]
    pub file: Option<String>,
    /// Why it does not apply to this task, in at least 10 characters.
    #[schemars(required, length(min = 10), regex(pattern = r"\S"))]
    pub reason: Option<String>,
}

/// One slot of the query frame: what it says, and the user's own words that say it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct QuotedSlot {
    // What the slot is, in the agent's words (described once, on `slots`: four copies of the
    // same text would be read four times).
    #[schemars(required)]
    pub value: Option<String>,
    // The words of the request it comes from.
    #[schemars(required)]
    pub quote: Option<String>,
}

/// A slot as `{value, quote}`, or (accepted, not advertised) a plain string without a quote.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Slot {
    Text(String),
    Quoted(QuotedSlot),
}

impl JsonSchema for Slot {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Slot".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        QuotedSlot::json_schema(generator)
    }
}

impl Slot {
    pub fn value(&self) -> &str {
        match self {
            Slot::Text(s) => s.trim(),
            Slot::Quoted(q) => q.value.as_deref().unwrap_or("").trim(),
        }
    }
    pub fn quote(&self) -> Option<&str> {
        match self {
            Slot::Text(_) => None,
            Slot::Quoted(q) => q.quote.as_deref().map(str::trim).filter(|q| !q.is_empty()),
        }
    }
}

/// The four slots of a request.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Slots {
    /// What to work on: the feature, module or symbol.
    #[schemars(required)]
    pub target_feature: Option<Slot>,
    /// When the problem happens (the condition that reproduces it).
    #[schemars(required)]
    pub trigger_condition: Option<Slot>,
    /// What is wrong now, the problem motivating the change.
    #[schemars(required)]
    pub observed_issue: Option<Slot>,
    /// What the user wants done.
    #[schemars(required)]
    pub desired_action: Option<Slot>,
}

impl Slots {
    /// The slots by name, in the order the hints are given.
    pub fn named(&self) -> [(&'static str, Option<&Slot>); 4] {
        [
            ("target_feature", self.target_feature.as_ref()),
            ("trigger_condition", self.trigger_condition.as_ref()),
            ("observed_issue", self.observed_issue.as_ref()),
            ("desired_action", self.desired_action.as_ref()),
        ]
    }
}

/// Step 4: the request taken apart into slots, each backed by a quote of the user's words.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct QueryFramePayload {
    /// Each slot {value, quote}, filled as the instruction says; a quote not in the request
    /// (case and spacing aside) is refused.
    #[schemars(required)]
    pub slots: Option<Slots>,
    /// The kind of work: implement, modify, investigate or answer.
    pub action_type: Option<String>,
    /// Symbols or files the request names.
    pub target_symbols: Option<Vec<String>>,
    /// Where the work is confined (files, modules).
    pub scope: Option<String>,
    /// Constraints the request sets.
    pub constraints: Option<String>,
}

/// Step 5: what exploration found.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ExplorationPayload {
    /// The files whose code you read or whose symbols you looked at (paths relative to the
    /// repository root), at least one. Only explored files may be written in READY.
    #[schemars(required, length(min = 1))]
    pub explored_files: Option<Vec<String>>,
    /// What you found and why it matters, citing file:line where you can; at least one.
    #[schemars(required, length(min = 1))]
    pub findings: Option<Vec<String>>,
}

/// Q1 (step 6): is SEMANTIC needed?
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Q1Payload {
    /// true: search semantically (SEMANTIC, with semantic_search) before going on; false: go
    /// on to Q2.
    #[schemars(required, with = "bool")]
    pub needs_more_information: Option<Value>,
    /// Why, in at least 10 characters (needs_more_information_reason is accepted too).
    #[serde(alias = "needs_more_information_reason")]
    #[schemars(required, with = "String", length(min = 10), regex(pattern = r"\S"))]
    pub reason: Option<Value>,
}

/// Q2 (step 8): is VERIFICATION needed?
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Q2Payload {
    /// true: there are unverified hypotheses, weak evidence or conflicting results, so verify
    /// them (VERIFICATION) next; false: go on to Q3.
    #[schemars(required, with = "bool")]
    pub has_unverified_hypotheses: Option<Value>,
    /// Why, in at least 10 characters (has_unverified_hypotheses_reason is accepted too).
    #[serde(alias = "has_unverified_hypotheses_reason")]
    #[schemars(required, with = "String", length(min = 10), regex(pattern = r"\S"))]
    pub reason: Option<Value>,
}

/// Q3 (step 10): is IMPACT_ANALYSIS needed?
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Q3Payload {
    /// true: the impact of the change on references and dependencies is not yet clear, so run
    /// IMPACT_ANALYSIS next; false: it is clear.
    #[schemars(required, with = "bool")]
    pub needs_impact_analysis: Option<Value>,
    /// Why, in at least 10 characters (needs_impact_analysis_reason is accepted too).
    #[serde(alias = "needs_impact_analysis_reason")]
    #[schemars(required, with = "String", length(min = 10), regex(pattern = r"\S"))]
    pub reason: Option<Value>,
}

/// Step 7: what semantic search added.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct SemanticPayload {
    /// The query you gave semantic_search.
    pub search_query: Option<String>,
    /// What you rely on from the results: chunk ids or file:line places with a word on each;
    /// at least one.
    #[schemars(required, with = "Vec<String>", length(min = 1))]
    pub search_results: Option<Vec<Value>>,
}

/// One verified hypothesis.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Hypothesis {
    /// The hypothesis, in one sentence.
    #[schemars(required, regex(pattern = r"\S"))]
    pub hypothesis: Option<String>,
    /// true when the evidence confirms it. false is refused: verify again until it holds, or
    /// drop the hypothesis.
    #[schemars(required)]
    pub result: Option<Flag>,
    /// What shows it: path:line of code, run:N of a run_check run, or words (reasoning
    /// only); one string or a list of them.
    #[schemars(with = "String")]
    pub evidence: Option<Value>,
}

impl Hypothesis {
    /// The evidence as items: a list's strings, or one string split at commas, semicolons and
    /// line breaks; each trimmed, the empty ones left out.
    pub fn evidence_items(&self) -> Vec<String> {
        let texts: Vec<String> = match &self.evidence {
            Some(Value::String(s)) => s.split([',', ';', '\n']).map(str::to_owned).collect(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            Some(Value::Null) | None => Vec::new(),
            Some(other) => vec![other.to_string()],
        };
        texts.into_iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect()
    }
}

/// The witnessed run an evidence item names (`run:3`, `run 3`, `run #3`), if it is one.
pub fn cited_run(item: &str) -> Option<u32> {
    let rest = item.trim().strip_prefix("run").or_else(|| item.trim().strip_prefix("Run"))?;
    let rest = rest.trim_start_matches([':', ' ', '#']);
    rest.parse().ok()
}

/// Step 9: hypotheses checked one by one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct VerificationPayload {
    /// Each hypothesis with its result and evidence; at least one.
    #[schemars(required, length(min = 1))]
    pub hypotheses_verified: Option<Vec<Hypothesis>>,
}

/// Step 11: the impact of the change.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ImpactAnalysisPayload {
    /// What analyze_impact found, in your words: for example must_verify and should_verify
    /// (files and why), and what you will check. Not empty.
    #[schemars(required, with = "ImpactSummarySchema")]
    pub impact_summary: Option<Value>,
}

/// `impact_summary`: an object with at least one entry (a non-empty string or list is accepted
/// too, not advertised).
struct ImpactSummarySchema;

impl JsonSchema for ImpactSummarySchema {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ImpactSummary".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object", "minProperties": 1})
    }
}

/// A checklist item of a planned task: `{item}` (or, accepted, a plain string).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum PlannedItem {
    Text(String),
    Item(PlannedItemFields),
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct PlannedItemFields {
    /// A concrete implementation step, checkable on its own.
    #[schemars(required, regex(pattern = r"\S"))]
    pub item: Option<String>,
    /// "pending" (the server tracks progress itself).
    #[schemars(extend("const" = "pending"))]
    pub status: Option<String>,
}

impl JsonSchema for PlannedItem {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PlannedItem".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        PlannedItemFields::json_schema(generator)
    }
}

impl PlannedItem {
    pub fn text(&self) -> &str {
        match self {
            PlannedItem::Text(s) => s.trim(),
            PlannedItem::Item(f) => f.item.as_deref().unwrap_or("").trim(),
        }
    }
}

/// A task of the plan.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct PlannedTask {
    /// A short id, unique in the plan (t1, t2, ...).
    #[schemars(required, regex(pattern = r"\S"))]
    pub id: Option<Text>,
    /// What the task changes.
    #[schemars(required, regex(pattern = r"\S"))]
    pub description: Option<Text>,
    /// "pending" for work to do; "completed" only for a task the server already recorded as
    /// completed (resending a plan after a revert).
    #[schemars(required, extend("enum" = ["pending", "completed"]))]
    pub status: Option<String>,
    /// The task's concrete implementation steps; at least one for a pending task.
    pub checklist: Option<Vec<PlannedItem>>,
}

/// Step 12: the task list.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ReadyPlanPayload {
    /// The complete task list, in the order the tasks will be done; at least one pending.
    #[schemars(required, length(min = 1))]
    pub tasks: Option<Vec<PlannedTask>>,
}

/// A checklist item reported done or skipped.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ReportedItem {
    /// The item, exactly as registered in the plan.
    #[schemars(required)]
    pub item: Option<String>,
    /// "done" (with evidence) or "skipped" (with a reason).
    #[schemars(required, extend("enum" = ["done", "skipped"]))]
    pub status: Option<String>,
    /// For done: where the code is, as path:line or path:start-end (the lines must hold real
    /// code, not a stub).
    #[schemars(
        regex(pattern = r"^[^\s:][^:]*:[1-9][0-9]{0,8}(-[1-9][0-9]{0,8})?$"),
        extend("examples" = ["src/auth.py:42", "src/auth.py:42-58"])
    )]
    pub evidence: Option<String>,
    /// For skipped: why the item is not needed, in at least 10 characters.
    #[schemars(length(min = 10), regex(pattern = r"\S"))]
    pub reason: Option<String>,
    /// For done, when the cited code was already right and this session did not change it:
    /// why, in at least 10 characters. Without it, done items whose cited lines this session
    /// did not change are flagged at READY's completion and in the report.
    #[schemars(length(min = 10), regex(pattern = r"\S"))]
    pub already_right: Option<String>,
}

/// Step 13: one task done.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ReadyImplPayload {
    /// The task reported: the next pending one.
    #[schemars(required)]
    pub task_id: Option<Text>,
    /// Every checklist item of the task, each done or skipped.
    #[schemars(required)]
    pub checklist: Option<Vec<ReportedItem>>,
}

/// Steps 14 and 19: a summary alone.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct SummaryOnlyPayload {}

/// Step 15: the verifier's verdict.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct PostImplVerifyPayload {
    /// true when the verification passed.
    #[schemars(required)]
    pub passed: Option<Flag>,
    /// The verifier you followed (name or path under .code-intel/verifiers/).
    pub verifier_used: Option<String>,
    /// When it failed: the ids of the tasks that failed (none named: every task counts as
    /// failed).
    pub failed_tasks: Option<Vec<Text>>,
    /// What was run and, on failure, what exactly failed.
    pub details: Option<String>,
}

/// Step 16: the intervention carried out.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct VerifyInterventionPayload {
    /// The intervention prompt you followed (name or path).
    #[schemars(required, regex(pattern = r"\S"))]
    pub prompt_used: Option<String>,
    /// What you did, and what the plan should change.
    #[schemars(required, regex(pattern = r"\S"))]
    pub action_taken: Option<String>,
}

/// A reviewed file: `{file, decision, reason}` (or, accepted, a path alone, kept).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ReviewedFile {
    Path(String),
    Decision(ReviewedFileFields),
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct ReviewedFileFields {
    /// The file, as review_changes lists it.
    #[serde(alias = "path")]
    #[schemars(required, regex(pattern = r"\S"))]
    pub file: Option<String>,
    /// keep: commit it; discard: restore it to the base commit (a new file is deleted); fix:
    /// nothing is committed yet, the session goes back to READY planning to change it.
    #[serde(alias = "action")]
    #[schemars(required, extend("enum" = ["keep", "discard", "fix"]))]
    pub decision: Option<String>,
    /// Why; required for discard and fix (for fix: what to change).
    pub reason: Option<String>,
}

impl JsonSchema for ReviewedFile {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ReviewedFile".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ReviewedFileFields::json_schema(generator)
    }
}

/// Step 17: the review of the diff.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct PreCommitPayload {
    /// The garbage-detection procedure you followed (name or path).
    pub review_prompt_used: Option<String>,
    /// A decision for every file review_changes lists (its own earlier changes of the user's
    /// aside): keep, discard with a reason, or fix with what to change (back to READY). A file
    /// the garbage check flags is committed only when kept with a reason.
    #[schemars(required)]
    pub reviewed_files: Option<Vec<ReviewedFile>>,
    /// The message of the commit the server makes on the task branch when this review is
    /// accepted.
    #[schemars(required, regex(pattern = r"\S"))]
    pub commit_message: Option<String>,
}

/// Step 18: the quality review.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct QualityReviewPayload {
    /// The quality checklist you followed (name or path).
    pub quality_prompt_used: Option<String>,
    /// Your score for the change, for example "8/10".
    #[schemars(required)]
    pub quality_score: Option<Text>,
    /// Problems that must be fixed. Empty (or absent): the review passed and the session goes
    /// on to MERGE; otherwise back to READY planning to fix them.
    pub issues: Option<Vec<Text>>,
}

/// Text given as a string (a number or a bool is accepted and written out).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Text(s)),
            Value::Number(n) => Ok(Text(n.to_string())),
            Value::Bool(b) => Ok(Text(b.to_string())),
            Value::Null => Ok(Text(String::new())),
            other => Ok(Text(other.to_string())),
        }
    }
}

impl JsonSchema for Text {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "string".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

impl Text {
    pub fn trimmed(&self) -> &str {
        self.0.trim()
    }
}

/// A boolean (the strings "true" and "false" are accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Flag(b)),
            Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Ok(Flag(true)),
            Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Ok(Flag(false)),
            other => Err(serde::de::Error::custom(format!("expected true or false, got {other}"))),
        }
    }
}

impl JsonSchema for Flag {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "boolean".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        bool::json_schema(generator)
    }
}

/// A phase's own part of a payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    BranchIntervention(BranchInterventionPayload),
    DocumentResearch(DocumentResearchPayload),
    QueryFrame(Box<QueryFramePayload>),
    Exploration(ExplorationPayload),
    Q1(Q1Payload),
    Semantic(SemanticPayload),
    Q2(Q2Payload),
    Verification(VerificationPayload),
    Q3(Q3Payload),
    ImpactAnalysis(ImpactAnalysisPayload),
    ReadyPlan(ReadyPlanPayload),
    ReadyImpl(ReadyImplPayload),
    ReadyComplete,
    PostImplVerify(PostImplVerifyPayload),
    VerifyIntervention(VerifyInterventionPayload),
    PreCommit(PreCommitPayload),
    QualityReview(QualityReviewPayload),
    Merge,
}

/// A decoded payload: the phase's fields, the common ones, and `tools_used`.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    pub common: Common,
    /// None when absent (allowed only in summary-only phases).
    pub tools_used: Option<Vec<String>>,
    pub body: Body,
}

impl Payload {
    pub fn summary(&self) -> &str {
        self.common.summary.as_deref().unwrap_or("").trim()
    }
}

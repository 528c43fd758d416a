//! Reading `submit_phase`'s `data` as the payload of the session's phase: [`decode`] picks the
//! type ([`super::payload`]) from the phase, recognizes a payload meant for another phase by its
//! fields (the schemas' properties, [`super::schema`]), and maps a type error to the contract's
//! message for that field.

use serde_json::{Map, Value};

use super::payload::{Body, Common, OptionalToolsUsed, Payload, QueryFramePayload, Slots, ToolsUsed};
use super::phase::{Phase, ReadyStep, contract_key};
use crate::contract::catalogue::{self as msg, Msg};

/// Why a payload was not decoded: a contract message and its variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    pub key: Msg,
    pub vars: Vec<(&'static str, String)>,
}

impl Violation {
    pub(super) fn new(key: Msg) -> Violation {
        Violation { key, vars: Vec::new() }
    }
    pub(super) fn with(key: Msg, vars: &[(&'static str, &str)]) -> Violation {
        Violation { key, vars: vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect() }
    }
}

/// The READY substep a payload is for: a plan (`tasks`), a task (`task_id`), or the end.
pub(super) fn ready_step_of(data: &Map<String, Value>) -> ReadyStep {
    if data.contains_key("tasks") {
        ReadyStep::Plan
    } else if data.contains_key("task_id") {
        ReadyStep::Impl
    } else {
        ReadyStep::Complete
    }
}

/// The gate fields, each in its own phase only.
pub(super) const GATE_FIELDS: &[(&str, Phase)] = &[
    ("needs_more_information", Phase::Q1),
    ("has_unverified_hypotheses", Phase::Q2),
    ("needs_impact_analysis", Phase::Q3),
];

/// The lenient top-level forms of the query-frame slots.
pub(super) const SLOT_NAMES: &[&str] = &["target_feature", "trigger_condition", "observed_issue", "desired_action"];

/// Reads `data` as the payload of `phase` (READY: of the substep its keys ask for).
pub(super) fn decode(phase: Phase, data: &Value) -> Result<Payload, Violation> {
    let Some(obj) = data.as_object() else {
        return Err(Violation::with(msg::INVALID_DATA, &[("error", "data must be a JSON object")]));
    };
    let ready = (phase == Phase::Ready).then(|| ready_step_of(obj));
    let key = contract_key(phase, ready);
    check_phase_keys(phase, key, obj)?;
    let common: Common = parse(key, data)?;
    let tools_used = if super::schema::asks_tools_used(key) {
        parse::<ToolsUsed>(key, data)?.tools_used
    } else {
        parse::<OptionalToolsUsed>(key, data)?.tools_used
    };
    let body = match key {
        "BRANCH_INTERVENTION" => Body::BranchIntervention(parse(key, data)?),
        "DOCUMENT_RESEARCH" => Body::DocumentResearch(parse(key, data)?),
        "QUERY_FRAME" => {
            let mut frame: QueryFramePayload = parse(key, data)?;
            // Slots at the top level count where `slots` leaves them out.
            let top: Slots = parse(key, data)?;
            let slots = frame.slots.get_or_insert_with(Slots::default);
            slots.target_feature = slots.target_feature.take().or(top.target_feature);
            slots.trigger_condition = slots.trigger_condition.take().or(top.trigger_condition);
            slots.observed_issue = slots.observed_issue.take().or(top.observed_issue);
            slots.desired_action = slots.desired_action.take().or(top.desired_action);
            Body::QueryFrame(Box::new(frame))
        }
        "EXPLORATION" => Body::Exploration(parse(key, data)?),
        "Q1" => Body::Q1(parse(key, data)?),
        "SEMANTIC" => Body::Semantic(parse(key, data)?),
        "Q2" => Body::Q2(parse(key, data)?),
        "VERIFICATION" => Body::Verification(parse(key, data)?),
        "Q3" => Body::Q3(parse(key, data)?),
        "IMPACT_ANALYSIS" => Body::ImpactAnalysis(parse(key, data)?),
        "READY_PLAN" => Body::ReadyPlan(parse(key, data)?),
        "READY_IMPL" => Body::ReadyImpl(parse(key, data)?),
        "READY_COMPLETE" => Body::ReadyComplete,
        "POST_IMPL_VERIFY" => Body::PostImplVerify(parse(key, data)?),
        "VERIFY_INTERVENTION" => Body::VerifyIntervention(parse(key, data)?),
        "PRE_COMMIT" => Body::PreCommit(parse(key, data)?),
        "QUALITY_REVIEW" => Body::QualityReview(parse(key, data)?),
        "MERGE" => Body::Merge,
        _ => return Err(Violation::with(msg::UNKNOWN_PHASE, &[("phase", phase.name())])),
    };
    Ok(Payload { common, tools_used, body })
}

/// The names of a payload type's own fields (its schema's properties), common fields aside.
pub(super) fn own_fields(key: &str) -> Vec<String> {
    let mut fields = super::schema::body_fields(key);
    if key == "QUERY_FRAME" {
        fields.extend(SLOT_NAMES.iter().map(|s| (*s).to_owned()));
    }
    fields
}

/// A payload meant for another phase: task registration or completion outside READY, a gate's
/// answer outside its gate, or only another phase's fields.
fn check_phase_keys(phase: Phase, key: &str, obj: &Map<String, Value>) -> Result<(), Violation> {
    if phase != Phase::Ready {
        if obj.contains_key("tasks") {
            return Err(Violation::new(msg::PHASE_MISMATCH_REGISTER));
        }
        if obj.contains_key("task_id") {
            return Err(Violation::new(msg::PHASE_MISMATCH_COMPLETE));
        }
    }
    let mismatch =
        |other: &str| Violation::with(msg::PAYLOAD_MISMATCH, &[("phase", phase.name()), ("other_phase", other)]);
    for (field, gate) in GATE_FIELDS {
        if *gate != phase && obj.contains_key(*field) {
            return Err(mismatch(gate.name()));
        }
    }
    let own = own_fields(key);
    if own.iter().any(|k| obj.contains_key(k)) {
        return Ok(());
    }
    for other in Phase::ALL.iter().filter(|p| **p != phase && **p != Phase::SessionComplete) {
        let theirs = own_fields(contract_key(*other, None));
        if theirs.iter().any(|k| obj.contains_key(k) && !own.contains(k)) {
            return Err(mismatch(other.name()));
        }
    }
    Ok(())
}

/// Deserializes `T` from the whole payload object; a type error becomes the contract's message
/// for that field, or `payload_invalid` naming the field and what was expected.
fn parse<T: serde::de::DeserializeOwned>(key: &str, data: &Value) -> Result<T, Violation> {
    serde_path_to_error::deserialize(data).map_err(|e| {
        let path = e.path().to_string();
        let top = path.split(['.', '[']).next().unwrap_or("").to_owned();
        let specific = match (key, top.as_str()) {
            (_, "summary") => Some(msg::SUMMARY_REQUIRED),
            (_, "tools_used") => Some(msg::TOOLS_USED_INVALID),
            ("BRANCH_INTERVENTION", "choice") => Some(msg::INVALID_CHOICE),
            _ => None,
        };
        match specific {
            Some(m) => Violation::new(m),
            None => Violation::with(msg::PAYLOAD_INVALID, &[("path", &path), ("error", &e.inner().to_string())]),
        }
    })
}

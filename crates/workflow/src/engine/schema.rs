//! `expected_payload_schema` and `expected_payload`: both made from the payload types of
//! [`super::payload`], so what the agent is told, what the schema says and what the server
//! accepts come from one source.
//!
//! The schema of a phase is its type's JSON Schema (draft 2020-12, every subschema inline)
//! merged with the common fields, then made exact for the session at hand: the tools the phase
//! requires, the next task's id and checklist, the task ids a verification may name, and the
//! compaction_count to echo. A payload the schema accepts is never refused for its shape; the
//! property test in `tests/it/payload_schema.rs` holds the server to that.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::payload::*;
use super::phase;
use super::registry;
use super::state::{SessionState, TaskStatus};

/// The contract keys that have a payload, in flow order.
pub const PAYLOAD_KEYS: &[&str] = &[
    "BRANCH_INTERVENTION",
    "DOCUMENT_RESEARCH",
    "QUERY_FRAME",
    "EXPLORATION",
    "Q1",
    "SEMANTIC",
    "Q2",
    "VERIFICATION",
    "Q3",
    "IMPACT_ANALYSIS",
    "READY_PLAN",
    "READY_IMPL",
    "READY_COMPLETE",
    "POST_IMPL_VERIFY",
    "VERIFY_INTERVENTION",
    "PRE_COMMIT",
    "QUALITY_REVIEW",
    "MERGE",
];

/// Whether the payload of `key` must carry `tools_used` (all but the summary-only ones).
pub fn asks_tools_used(key: &str) -> bool {
    !matches!(key, "READY_COMPLETE" | "MERGE")
}

/// The tools `key` requires in this session: [`required_tools`], less check_write_target when
/// the task to report is a reopened one (its code is written; reporting it writes nothing).
pub fn required_tools_now(key: &str, state: &SessionState) -> Vec<&'static str> {
    let reopened = key == "READY_IMPL" && state.pending_tasks().next().is_some_and(|t| t.reopened);
    required_tools(key).iter().copied().filter(|t| !(reopened && *t == "check_write_target")).collect()
}

/// A served tool the phase cannot pass without: the agent must call it and report it.
pub fn required_tools(key: &str) -> &'static [&'static str] {
    match key {
        "SEMANTIC" => &["semantic_search"],
        "IMPACT_ANALYSIS" => &["analyze_impact"],
        "READY_IMPL" => &["check_write_target"],
        "PRE_COMMIT" => &["review_changes"],
        _ => &[],
    }
}

/// The formats JSON Schema (2020-12) defines. A client validates a schema with another
/// `format` as an error or a warning (Claude Code prints `unknown format "uint8" ignored`), so
/// every schema we send keeps only these; a number's range stays in `minimum`/`maximum`.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Whether `format` is one JSON Schema defines.
pub fn is_standard_format(format: &str) -> bool {
    STANDARD_FORMATS.contains(&format)
}

/// How many distinct code-intelligence tools EXPLORATION needs.
pub const EXPLORATION_MIN_TOOLS: usize = 2;

fn generate<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let mut value = settings.into_generator().into_root_schema_for::<T>().to_value();
    strip_optional_null(&mut value);
    if let Some(o) = value.as_object_mut() {
        o.remove("$schema");
        o.remove("title");
        o.remove("description");
    }
    value
}

/// schemars writes an optional field as `["string", "null"]`; an absent field is what we mean,
/// so the `null` goes. Descriptions (doc comments) become one line each, and schemars' own
/// integer formats go.
fn strip_optional_null(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(d)) = o.get_mut("description") {
                *d = d.split_whitespace().collect::<Vec<_>>().join(" ");
            }
            // schemars' number formats (uint8, int64, double, …) are not JSON Schema formats.
            if o.get("format").and_then(Value::as_str).is_some_and(|f| !is_standard_format(f)) {
                o.shift_remove("format");
            }
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types[0].clone();
                    o.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = o.get_mut("anyOf") {
                any.retain(|s| s != &json!({"type": "null"}));
            }
            o.values_mut().for_each(strip_optional_null);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_optional_null),
        _ => {}
    }
}

fn body_schema(key: &str) -> Value {
    match key {
        "BRANCH_INTERVENTION" => generate::<BranchInterventionPayload>(),
        "DOCUMENT_RESEARCH" => generate::<DocumentResearchPayload>(),
        "QUERY_FRAME" => generate::<QueryFramePayload>(),
        "EXPLORATION" => generate::<ExplorationPayload>(),
        "Q1" => generate::<Q1Payload>(),
        "SEMANTIC" => generate::<SemanticPayload>(),
        "Q2" => generate::<Q2Payload>(),
        "VERIFICATION" => generate::<VerificationPayload>(),
        "Q3" => generate::<Q3Payload>(),
        "IMPACT_ANALYSIS" => generate::<ImpactAnalysisPayload>(),
        "READY_PLAN" => generate::<ReadyPlanPayload>(),
        "READY_IMPL" => generate::<ReadyImplPayload>(),
        "POST_IMPL_VERIFY" => generate::<PostImplVerifyPayload>(),
        "VERIFY_INTERVENTION" => generate::<VerifyInterventionPayload>(),
        "PRE_COMMIT" => generate::<PreCommitPayload>(),
        "QUALITY_REVIEW" => generate::<QualityReviewPayload>(),
        _ => generate::<SummaryOnlyPayload>(),
    }
}

/// The phase's own fields, then tools_used, then the common ones, as one closed object.
fn merged(key: &str) -> Value {
    let tools = if asks_tools_used(key) { generate::<ToolsUsed>() } else { generate::<OptionalToolsUsed>() };
    let mut properties = Map::new();
    let mut required: Vec<Value> = Vec::new();
    for part in [body_schema(key), tools, generate::<Common>()] {
        if let Some(props) = part.get("properties").and_then(Value::as_object) {
            properties.extend(props.clone());
        }
        if let Some(req) = part.get("required").and_then(Value::as_array) {
            required.extend(req.iter().cloned());
        }
    }
    // No `$schema`: the dialect is JSON Schema 2020-12, said once in the response's own schema.
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The schema of `key` before it is made exact for a session.
pub fn base(key: &str) -> &'static Value {
    static BASE: OnceLock<BTreeMap<&'static str, Value>> = OnceLock::new();
    static EMPTY: OnceLock<Value> = OnceLock::new();
    let all = BASE.get_or_init(|| PAYLOAD_KEYS.iter().map(|k| (*k, merged(k))).collect());
    all.get(key).unwrap_or_else(|| EMPTY.get_or_init(|| json!({"type": "object"})))
}

/// The names of the fields a phase's own type declares (the common ones aside).
pub fn body_fields(key: &str) -> Vec<String> {
    static FIELDS: OnceLock<BTreeMap<&'static str, Vec<String>>> = OnceLock::new();
    let all = FIELDS.get_or_init(|| {
        PAYLOAD_KEYS
            .iter()
            .map(|k| {
                let names = body_schema(k)
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (*k, names)
            })
            .collect()
    });
    all.get(key).cloned().unwrap_or_default()
}

/// The schema of `key` as it stands for this session.
pub fn for_state(key: &str, state: &SessionState) -> Value {
    let mut schema = base(key).clone();
    let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return schema };
    if let Some(count) = props.get_mut("compaction_count").and_then(Value::as_object_mut) {
        count.insert("minimum".into(), json!(0));
        count.insert("default".into(), json!(state.compaction_count));
    }
    if let Some(tools) = props.get_mut("tools_used").and_then(Value::as_object_mut) {
        let required = required_tools_now(key, state);
        match required.as_slice() {
            [] => {}
            [one] => {
                tools.insert("contains".into(), json!({"const": one}));
            }
            many => {
                let all: Vec<Value> = many.iter().map(|t| json!({"contains": {"const": t}})).collect();
                tools.insert("allOf".into(), Value::Array(all));
            }
        }
        if key == "EXPLORATION" {
            let names: Vec<&str> = registry::code_intelligence().collect();
            tools.insert("contains".into(), json!({"enum": names}));
            tools.insert("minContains".into(), json!(EXPLORATION_MIN_TOOLS));
        }
    }
    match key {
        "READY_PLAN" => plan_schema(props, state),
        "READY_IMPL" => task_schema(props, state),
        "PRE_COMMIT" => {
            // A discard or a fix needs its reason.
            if let Some(item) =
                props.get_mut("reviewed_files").and_then(|f| f.get_mut("items")).and_then(Value::as_object_mut)
            {
                item.insert(
                    "anyOf".into(),
                    json!([
                        {"properties": {"decision": {"const": "keep"}}},
                        {"properties": {"decision": {"const": "discard"}, "reason": {"pattern": r"\S"}}, "required": ["reason"]},
                        {"properties": {"decision": {"const": "fix"}, "reason": {"pattern": r"\S"}}, "required": ["reason"]},
                    ]),
                );
            }
        }
        "POST_IMPL_VERIFY" => {
            if let Some(failed) = props.get_mut("failed_tasks").and_then(Value::as_object_mut) {
                let ids: Vec<&str> = state.tasks.iter().map(|t| t.id.as_str()).collect();
                if ids.is_empty() {
                    failed.insert("maxItems".into(), json!(0));
                } else {
                    failed.insert("items".into(), json!({"type": "string", "enum": ids}));
                }
                failed.insert("uniqueItems".into(), json!(true));
            }
        }
        _ => {}
    }
    schema
}

/// READY planning: a pending task needs a checklist; "completed" is only for tasks the server
/// recorded as completed; at least one task is pending.
fn plan_schema(props: &mut Map<String, Value>, state: &SessionState) {
    let Some(tasks) = props.get_mut("tasks").and_then(Value::as_object_mut) else { return };
    let Some(item) = tasks.get_mut("items").and_then(Value::as_object_mut) else { return };
    let completed: Vec<&str> =
        state.tasks.iter().filter(|t| t.status == TaskStatus::Completed).map(|t| t.id.as_str()).collect();
    if completed.is_empty() {
        // Every task is pending, so every task needs a checklist.
        if let Some(props) = item.get_mut("properties").and_then(Value::as_object_mut) {
            if let Some(status) = props.get_mut("status").and_then(Value::as_object_mut) {
                status.remove("enum");
                status.insert("const".into(), json!("pending"));
            }
            if let Some(list) = props.get_mut("checklist").and_then(Value::as_object_mut) {
                list.insert("minItems".into(), json!(1));
            }
        }
        if let Some(Value::Array(required)) = item.get_mut("required") {
            required.push(json!("checklist"));
        }
    } else {
        let pending = json!({
            "properties": {"status": {"const": "pending"}, "checklist": {"minItems": 1}},
            "required": ["checklist"],
        });
        let done = json!({"properties": {"status": {"const": "completed"}, "id": {"enum": completed}}});
        item.insert("anyOf".into(), json!([pending, done]));
    }
    tasks.insert("contains".into(), json!({"properties": {"status": {"const": "pending"}}}));
}

/// READY implementation: the next pending task, and exactly its checklist items, each done with
/// evidence or skipped with a reason.
fn task_schema(props: &mut Map<String, Value>, state: &SessionState) {
    let Some(task) = state.pending_tasks().next() else { return };
    if let Some(id) = props.get_mut("task_id").and_then(Value::as_object_mut) {
        id.insert("const".into(), json!(task.id));
    }
    let Some(list) = props.get_mut("checklist").and_then(Value::as_object_mut) else { return };
    let Some(item) = list.get("items").cloned() else { return };
    let prefix: Vec<Value> = task
        .checklist
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut s = item.clone();
            if let Some(o) = s.as_object_mut() {
                // What each field means is said once, in the first item: the others repeated it
                // word for word, which made the answer hard to read.
                if i > 0 {
                    o.remove("description");
                    for field in o.get_mut("properties").and_then(Value::as_object_mut).into_iter().flatten() {
                        if let Some(f) = field.1.as_object_mut() {
                            f.remove("description");
                        }
                    }
                }
                o.insert(
                    "anyOf".into(),
                    json!([
                        {"properties": {"status": {"const": "done"}}, "required": ["evidence"]},
                        {"properties": {"status": {"const": "skipped"}}, "required": ["reason"]},
                    ]),
                );
                if let Some(p) = o.get_mut("properties").and_then(|p| p.get_mut("item")).and_then(Value::as_object_mut)
                {
                    p.insert("const".into(), json!(c.item));
                }
            }
            s
        })
        .collect();
    let n = prefix.len();
    list.insert("prefixItems".into(), Value::Array(prefix));
    list.insert("items".into(), json!(false));
    list.insert("minItems".into(), json!(n));
    list.insert("maxItems".into(), json!(n));
}

/// The human-readable `expected_payload`: an outline of `schema`, each field with its type,
/// constraints and whether it is required. The descriptions are said once, in the schema.
pub fn describe(schema: &Value) -> Map<String, Value> {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut out = Map::new();
    for (name, prop) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let mut text = type_of(prop);
        let constraints = constraints_of(prop);
        if !constraints.is_empty() {
            text.push_str(&format!(" ({})", constraints.join(", ")));
        }
        text.push_str(if required.contains(&name.as_str()) { ", required" } else { ", optional" });
        out.insert(name.clone(), Value::String(text));
    }
    out
}

/// A compact type: `str`, `bool`, `int`, `list[...]`, `{a, b?}`, `'x' | 'y'`, a constant.
fn type_of(s: &Value) -> String {
    if let Some(c) = s.get("const") {
        return c.to_string();
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    match s.get("type").and_then(Value::as_str) {
        Some("string") => "str".into(),
        Some("boolean") => "bool".into(),
        Some("integer") => "int".into(),
        Some("number") => "number".into(),
        Some("array") => {
            if let Some(prefix) = s.get("prefixItems").and_then(Value::as_array) {
                let items: Vec<String> = prefix.iter().map(type_of).collect();
                return format!("[{}]", items.join(", "));
            }
            format!("list[{}]", s.get("items").map(type_of).unwrap_or_else(|| "any".into()))
        }
        Some("object") => match s.get("properties").and_then(Value::as_object) {
            Some(_) if s.get("anyOf").is_some() => {
                let mut base = s.clone();
                let alternatives = base.as_object_mut().and_then(|o| o.remove("anyOf")).unwrap_or(Value::Null);
                let rules: Vec<String> = alternatives.as_array().into_iter().flatten().map(rule_of).collect();
                format!("{} where {}", type_of(&base), rules.join(" or "))
            }
            Some(props) => {
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let fields: Vec<String> = props
                    .iter()
                    .map(|(k, v)| {
                        let opt = if required.contains(&k.as_str()) { "" } else { "?" };
                        let inner = type_of(v);
                        format!("{k}{opt}: {inner}")
                    })
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
            None => "dict".into(),
        },
        _ => "any".into(),
    }
}

/// One alternative of an `anyOf`, as a rule: `status "done" with evidence`.
fn rule_of(alt: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (name, p) in alt.get("properties").and_then(Value::as_object).into_iter().flatten() {
        if let Some(c) = p.get("const") {
            parts.push(format!("{name} {c}"));
        } else if let Some(e) = p.get("enum") {
            parts.push(format!("{name} in {e}"));
        } else if let Some(n) = p.get("minItems") {
            parts.push(format!("{name} with at least {n}"));
        }
    }
    let needs: Vec<&str> =
        alt.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    if !needs.is_empty() {
        parts.push(format!("needs {}", needs.join(", ")));
    }
    format!("({})", parts.join(", "))
}

fn constraints_of(s: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = s.get("minItems").and_then(Value::as_u64).filter(|n| *n > 0) {
        if s.get("maxItems").and_then(Value::as_u64) == Some(n) {
            out.push(format!("exactly {n}"));
        } else {
            out.push(format!("at least {n}"));
        }
    }
    if s.get("maxItems").and_then(Value::as_u64) == Some(0) {
        out.push("empty".into());
    } else if s.get("type").and_then(Value::as_str) == Some("array")
        && s.get("minItems").is_none()
        && s.get("contains").is_none()
        && s.get("allOf").is_none()
    {
        out.push("may be empty".into());
    }
    if let Some(n) = s.get("minLength").and_then(Value::as_u64) {
        out.push(format!("at least {n} characters"));
    }
    if let Some(n) = s.get("minProperties").and_then(Value::as_u64) {
        out.push(format!("at least {n} entr{}", if n == 1 { "y" } else { "ies" }));
    }
    if let Some(c) = s.get("contains") {
        let min = s.get("minContains").and_then(Value::as_u64).unwrap_or(1);
        match (c.get("const"), c.get("enum")) {
            (Some(t), _) => out.push(format!("must include {}", t.as_str().unwrap_or(""))),
            (None, Some(Value::Array(e))) => {
                let names: Vec<&str> = e.iter().filter_map(Value::as_str).collect();
                out.push(format!("at least {min} distinct of {}", names.join(", ")));
            }
            _ => {
                if let Some(st) = c.pointer("/properties/status/const").and_then(Value::as_str) {
                    out.push(format!("at least one {st}"));
                }
            }
        }
    }
    if let Some(d) = s.get("default") {
        out.push(format!("now {d}"));
    }
    if let Some(ex) = s.get("examples").and_then(Value::as_array) {
        let ex: Vec<String> = ex.iter().map(Value::to_string).collect();
        out.push(format!("e.g. {}", ex.join(", ")));
    }
    out
}

/// The phase key whose schema a response shows for the session's current phase.
pub fn key_for(state: &SessionState) -> &'static str {
    phase::contract_key(state.phase(), state.ready_step())
}

/// The schema of a value that is an object with any members (a tool's arguments or output, a
/// payload's JSON Schema): declared as an object, not as the bare `true` schemars gives a
/// `serde_json::Value`.
pub fn free_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "additionalProperties": true})
}

//! `expected_payload_schema` against the engine, in every phase:
//!
//! - property: payloads generated from the schema (valid, as an independent validator
//!   confirms) are never refused for their shape, and some are accepted;
//! - fuzz: 10,000 random payloads per phase (random JSON, and valid payloads with fields
//!   deleted, retyped or added): no panic, a refusal leaves the checkpoint byte for byte as it
//!   was, and a payload the schema accepts never gets a shape refusal;
//! - the other way round: a payload that breaks the schema's `required` gets a refusal.

use crate::common::engine_harness::Session;
use crate::common::schema_gen::Gen;
use code_intel_workflow::contract::catalogue::Kind;
use code_intel_workflow::engine::registry;
use code_intel_workflow::engine::response;
use code_intel_workflow::engine::state::{Flags, Intent};
use code_intel_workflow::engine::submit;
use serde_json::{Map, Value, json};

const QUERY: &str = "Add a logout() method to the Auth class so sessions end cleanly";

/// A session in the phase (READY: substep) of every payload key, with every tool served.
fn sessions() -> Vec<(&'static str, Session)> {
    let mut out: Vec<(&'static str, Session)> = Vec::new();
    let all_tools: Vec<&str> = registry::TOOLS.iter().map(|t| t.name).collect();
    let mut push = |key: &'static str, mut s: Session| {
        s.called(&all_tools);
        out.push((key, s));
    };
    push("BRANCH_INTERVENTION", Session::with_stale(Intent::Implement, Flags::default(), true));
    let mut s = Session::new(Intent::Implement, Flags::default());
    push("DOCUMENT_RESEARCH", clone(&s));
    s.doc();
    push("QUERY_FRAME", clone(&s));
    s.frame();
    push("EXPLORATION", clone(&s));
    s.explore();
    push("Q1", clone(&s));
    let mut sem = clone(&s);
    sem.gate("needs_more_information", true);
    push("SEMANTIC", sem);
    s.gate("needs_more_information", false);
    push("Q2", clone(&s));
    let mut ver = clone(&s);
    ver.gate("has_unverified_hypotheses", true);
    push("VERIFICATION", ver);
    s.gate("has_unverified_hypotheses", false);
    push("Q3", clone(&s));
    let mut imp = clone(&s);
    imp.gate("needs_impact_analysis", true);
    push("IMPACT_ANALYSIS", imp);
    s.gate("needs_impact_analysis", false);
    push("READY_PLAN", clone(&s));
    s.plan(&["t1", "t2"]);
    push("READY_IMPL", clone(&s));
    s.complete("t1");
    s.complete("t2");
    push("READY_COMPLETE", clone(&s));
    s.finish();
    push("POST_IMPL_VERIFY", clone(&s));
    let mut failing = clone(&s);
    failing.post(false);
    push("READY_PLAN", clone(&failing)); // planning again, with completed tasks
    for _ in 0..2 {
        failing.plan(&["t1"]);
        failing.complete("t1");
        failing.finish();
        failing.post(false);
    }
    push("VERIFY_INTERVENTION", failing);
    s.post(true);
    push("PRE_COMMIT", clone(&s));
    s.pre_commit();
    push("QUALITY_REVIEW", clone(&s));
    s.quality(&[]);
    push("MERGE", clone(&s));
    out
}

fn clone(s: &Session) -> Session {
    Session { contract: s.contract.clone(), cp: s.cp.clone(), facts: s.facts.clone(), last_effect: None }
}

fn schema_of(s: &Session) -> Value {
    serde_json::to_value(response::for_phase(&s.contract, &s.cp)).unwrap()["expected_payload_schema"].clone()
}

/// Every `format` keyword in a schema.
fn formats_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(f)) = o.get("format") {
                out.push(f.clone());
            }
            o.values().for_each(|c| formats_in(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| formats_in(c, out)),
        _ => {}
    }
}

#[test]
fn every_phase_is_covered() {
    let keys: std::collections::BTreeSet<&str> = sessions().iter().map(|(k, _)| *k).collect();
    for key in code_intel_workflow::engine::schema::PAYLOAD_KEYS {
        assert!(keys.contains(key), "no session at {key}");
    }
    for (key, s) in sessions() {
        let r = serde_json::to_value(response::for_phase(&s.contract, &s.cp)).unwrap();
        let substep = r.get("ready_substep").and_then(Value::as_str).unwrap_or(r["phase"].as_str().unwrap());
        assert_eq!(substep, key, "the session meant for {key} is in {substep}");
        let schema = &r["expected_payload_schema"];
        assert!(jsonschema::meta::is_valid(schema), "{key}: not a valid JSON Schema: {schema}");
        let mut formats = Vec::new();
        formats_in(schema, &mut formats);
        formats.retain(|f| !code_intel_workflow::engine::schema::is_standard_format(f));
        assert!(formats.is_empty(), "{key}: formats JSON Schema does not define: {formats:?}");
        // The readable expected_payload lists exactly the schema's fields.
        let described: Vec<&String> = r["expected_payload"].as_object().unwrap().keys().collect();
        let fields: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(described, fields, "{key}");
    }
}

#[test]
fn payloads_generated_from_the_schema_are_never_refused_for_their_shape() {
    for (key, s) in sessions() {
        let schema = schema_of(&s);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let mut accepted = 0;
        for seed in 0..400u64 {
            let payload = Gen::new(seed, QUERY).value(&schema);
            if let Err(e) = validator.validate(&payload) {
                panic!("{key}: the generator made an invalid payload ({e}): {payload}");
            }
            match submit::submit_value(&s.contract, &s.cp, &payload, &s.facts) {
                Ok(_) => accepted += 1,
                Err(r) => assert_ne!(
                    r.key.kind,
                    Kind::Shape,
                    "{key}: a payload the schema accepts was refused for its shape ({}: {}):\n{payload}",
                    r.key.dotted(),
                    r.message
                ),
            }
        }
        eprintln!("{key}: {accepted} of 400 accepted");
        assert!(accepted > 0, "{key}: no generated payload was accepted");
    }
}

/// A random payload: random JSON, or a generated valid one with a field deleted, retyped, or
/// a field of another phase added.
fn fuzz_payload(rnd: &mut Gen, schema: &Value, foreign: &[String]) -> Value {
    match rnd.rng.u8(..4) {
        0 => rnd.any(3),
        _ => {
            let mut payload = rnd.value(schema);
            let Some(obj) = payload.as_object_mut() else { return payload };
            let keys: Vec<String> = obj.keys().cloned().collect();
            for _ in 0..rnd.rng.usize(1..4) {
                match rnd.rng.u8(..3) {
                    0 if !keys.is_empty() => {
                        obj.remove(&keys[rnd.rng.usize(..keys.len())]);
                    }
                    1 if !keys.is_empty() => {
                        let k = &keys[rnd.rng.usize(..keys.len())];
                        obj.insert(k.clone(), rnd.any(2));
                    }
                    _ => {
                        let k = &foreign[rnd.rng.usize(..foreign.len())];
                        obj.insert(k.clone(), rnd.any(1));
                    }
                }
            }
            payload
        }
    }
}

#[test]
fn ten_thousand_random_payloads_per_phase_change_nothing_when_refused() {
    let mut foreign: Vec<String> = Vec::new();
    for key in code_intel_workflow::engine::schema::PAYLOAD_KEYS {
        let base = code_intel_workflow::engine::schema::base(key);
        foreign.extend(base["properties"].as_object().unwrap().keys().cloned());
    }
    foreign.extend(["tasks", "task_id", "slots", "target_feature", "decision", "junk"].map(String::from));
    for (i, (key, s)) in sessions().into_iter().enumerate() {
        let schema = schema_of(&s);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let before = serde_json::to_vec(&s.cp).unwrap();
        let mut rnd = Gen::new(1_000_003 * (i as u64 + 1), QUERY);
        let (mut refused, mut valid) = (0, 0);
        for _ in 0..10_000 {
            let payload = fuzz_payload(&mut rnd, &schema, &foreign);
            let schema_valid = validator.is_valid(&payload);
            valid += usize::from(schema_valid);
            match submit::submit_value(&s.contract, &s.cp, &payload, &s.facts) {
                Ok(_) => {}
                Err(r) => {
                    refused += 1;
                    assert!(
                        !(schema_valid && r.key.kind == Kind::Shape),
                        "{key}: schema-valid payload refused for its shape ({}): {payload}",
                        r.key.dotted()
                    );
                    assert!(!r.success && !r.message.is_empty() && !r.instruction.is_empty());
                }
            }
            assert_eq!(serde_json::to_vec(&s.cp).unwrap(), before, "{key}: the checkpoint changed");
        }
        eprintln!("{key}: fuzz refused {refused}, schema-valid {valid}");
        assert!(refused > 1_000, "{key}: only {refused} of 10,000 random payloads refused");
        assert!(valid > 0, "{key}: no random payload was schema-valid");
    }
}

#[test]
fn a_payload_missing_a_required_field_is_refused() {
    for (key, s) in sessions() {
        let schema = schema_of(&s);
        let required: Vec<String> =
            schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
        for field in &required {
            // A valid payload except for this one field.
            let mut payload = Gen::new(7, QUERY).value(&schema);
            let obj: &mut Map<String, Value> = payload.as_object_mut().unwrap();
            obj.remove(field);
            if key == "QUERY_FRAME" && field == "slots" {
                // Slots may come at the top level too, or not at all (the hints then say what
                // is missing): the schema is stricter than the server here.
                continue;
            }
            if key == "PRE_COMMIT" && field == "reviewed_files" {
                // Needed when the task changed files: a fact the server looks up at submit
                // (review_incomplete), not a shape.
                continue;
            }
            let r = submit::submit_value(&s.contract, &s.cp, &payload, &s.facts)
                .err()
                .unwrap_or_else(|| panic!("{key}: accepted without {field}: {payload}"));
            assert_eq!(r.key.kind, Kind::Shape, "{key} without {field}: {}", r.key.dotted());
        }
    }
    let _ = json!({});
}

/// The same fuzz through the real session adapter against a real git repository: a refused
/// payload moves no ref (the checkpoint commit stays the one it was), and the object store
/// stays sound.
#[test]
fn random_payloads_through_the_session_adapter_move_no_ref() {
    use code_intel_session::session::{Sessions, StartRequest};
    use code_intel_session::workspace::Workspace;
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    crate::common::git(root, &["checkout", "-q", "-b", "main"]);
    crate::common::git(root, &["add", "-A"]);
    crate::common::git(root, &["commit", "-q", "-m", "initial"]);
    let ws = Workspace::open(root, false).unwrap();
    let sessions = Sessions::open(&ws);
    let start = StartRequest { intent: "IMPLEMENT".into(), query: QUERY.into(), ..StartRequest::default() };
    assert!(sessions.start(&ws, start).is_ok(), "start_session");
    let refs = || {
        crate::common::git(
            root,
            &["for-each-ref", "--format=%(refname) %(objectname)", "refs/worktree/code-intel/", "refs/code-intel/"],
        )
    };
    let valid = [
        json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs"}),
        json!({"slots": {}, "tools_used": [], "summary": "frame"}),
    ];
    let mut rnd = Gen::new(42, QUERY);
    let foreign: Vec<String> =
        ["tasks", "task_id", "summary", "tools_used", "choice", "explored_files"].map(String::from).into();
    for (round, next) in valid.iter().enumerate() {
        let status = serde_json::to_value(sessions.status(&ws, None, false).ok().unwrap()).unwrap();
        let schema = status["expected_payload_schema"].clone();
        for _ in 0..300 {
            let payload = fuzz_payload(&mut rnd, &schema, &foreign);
            let before = refs();
            if sessions.submit(&ws, payload.clone()).is_err() {
                assert_eq!(refs(), before, "round {round}: a refused payload moved a ref: {payload}");
            } else {
                // Accepted by chance: go back to a known phase by starting over.
                code_intel_session::session::store::SessionStore::open(root)
                    .unwrap()
                    .clean(&code_intel_session::session::cleaned_ending)
                    .unwrap();
                let start = StartRequest { intent: "IMPLEMENT".into(), query: QUERY.into(), ..StartRequest::default() };
                assert!(sessions.start(&ws, start).is_ok(), "start_session again");
                for earlier in &valid[..round] {
                    assert!(sessions.submit(&ws, earlier.clone()).is_ok(), "replay");
                }
            }
        }
        assert!(sessions.submit(&ws, next.clone()).is_ok(), "the valid payload");
    }
    let out =
        std::process::Command::new("git").args(["fsck", "--full", "--strict"]).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

//! A driver for the pure phase engine: a session with valid payloads for every phase, used by
//! `crates/workflow/tests/engine.rs` (the seeds' test plan) and, through a `#[path]` module,
//! `tests/it/contract_messages.rs` and `tests/it/payload_schema.rs` (every message reached).
#![allow(dead_code)]

use code_intel_workflow::contract::Contract;
use code_intel_workflow::engine::evidence::EvidenceFile;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::state::{Checkpoint, Flags, Intent};
use code_intel_workflow::engine::submit::{self, Effect, Facts, StartParams};
use serde_json::{Value, json};

pub struct Session {
    pub contract: Contract,
    pub cp: Checkpoint,
    pub facts: Facts,
    pub last_effect: Option<Effect>,
}

impl Session {
    pub fn new(intent: Intent, flags: Flags) -> Session {
        Session::with_stale(intent, flags, false)
    }

    pub fn with_stale(intent: Intent, flags: Flags, stale: bool) -> Session {
        let contract = Contract::builtin();
        let (cp, response) = submit::start(
            &contract,
            StartParams {
                session_id: "s1".into(),
                intent,
                query: "Add a logout() method to the Auth class so sessions end cleanly".into(),
                flags,
                created_at: "2026-11-22T00:00:00Z".into(),
                stale_branches: stale,
                verify_commands: vec!["python3 -m unittest".into()],
            },
        );
        assert!(response.success);
        let mut facts = Facts { semantic_available: true, ..Facts::default() };
        facts.evidence.insert("src/auth.py".into(), EvidenceFile::Lines(auth_py()));
        facts.evidence.insert("src/stub.py".into(), EvidenceFile::Lines(vec!["def f():".into(), "    pass".into()]));
        facts.evidence.insert("../outside.py".into(), EvidenceFile::Outside);
        Session { contract, cp, facts, last_effect: None }
    }

    pub fn phase(&self) -> Phase {
        self.cp.orchestrator_state.phase()
    }

    pub fn step(&self) -> u8 {
        self.cp.orchestrator_state.phase_state.step
    }

    /// Records `tools` as called in this phase, as the adapter does; in this fixture a tool
    /// that shows code shows src/auth.py, which then counts as explored (the adapter merges
    /// what the tools showed before the engine judges).
    pub fn called(&mut self, tools: &[&str]) {
        const SHOWING: &[&str] = &[
            "find_definitions",
            "find_references",
            "search_text",
            "get_symbols",
            "get_function_at_line",
            "analyze_structure",
            "semantic_search",
        ];
        for t in tools {
            self.cp.orchestrator_state.tools_called.insert((*t).to_owned());
            if SHOWING.contains(t) {
                self.cp.orchestrator_state.explored_files.insert("src/auth.py".into());
            }
        }
    }

    /// Submits and expects acceptance; carries out branch effects like the adapter would.
    pub fn ok(&mut self, data: Value) -> Value {
        let phase = self.phase();
        let response = self.attempt(data);
        assert_eq!(response["success"], true, "rejected in {phase:?}: {response}");
        response
    }

    /// Submits and returns the response, accepted or not (an accepted one moves the session).
    pub fn attempt(&mut self, data: Value) -> Value {
        match submit::submit_value(&self.contract, &self.cp, &data, &self.facts) {
            Ok(a) => {
                self.cp = a.session;
                if a.effect == Some(Effect::CreateTaskBranch) {
                    self.cp.orchestrator_state.task_branch = Some("llm_task_s1".into());
                    self.cp.orchestrator_state.base_branch = Some("main".into());
                }
                self.last_effect = a.effect;
                serde_json::to_value(a.response).unwrap()
            }
            Err(r) => serde_json::to_value(r).unwrap(),
        }
    }

    /// Submits and expects the given error; the session must be unchanged.
    pub fn err(&mut self, data: Value, error: &str) -> Value {
        let before = self.cp.clone();
        match submit::submit_value(&self.contract, &self.cp, &data, &self.facts) {
            Ok(a) => panic!("accepted in {:?}: {:?}", self.phase(), a.response),
            Err(r) => {
                let r = serde_json::to_value(r).unwrap();
                assert_eq!(r["error"], error, "{r}");
                assert_eq!(r["success"], false);
                assert_eq!(r["current_phase"], before.orchestrator_state.phase().name());
                assert!(r["instruction"].as_str().is_some_and(|s| !s.is_empty()));
                assert!(r["expected_payload"].is_object());
                assert!(r["expected_payload_schema"].is_object());
                assert_eq!(self.cp, before, "a rejection must leave the session unchanged");
                r
            }
        }
    }

    /// The contract's message at `path` (a key the code produces), filled with `vars`.
    pub fn message(&self, path: &[&str], vars: &[(&str, &str)]) -> String {
        let key =
            code_intel_workflow::contract::catalogue::find(path).unwrap_or_else(|| panic!("{path:?} is not produced"));
        self.contract.message(&key, vars)
    }

    // The phases, with valid payloads.
    pub fn doc(&mut self) -> Value {
        self.ok(json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "auth rules read"}))
    }
    pub fn frame(&mut self) -> Value {
        self.ok(json!({
            "action_type": "implement", "target_symbols": ["Auth"], "scope": "src/auth.py", "constraints": "",
            "slots": {
                "target_feature": {"value": "Auth.logout", "quote": "a logout()   method to the AUTH class"},
                "desired_action": {"value": "add method", "quote": "sessions end cleanly"},
                "observed_issue": "sessions never end",
                "trigger_condition": "user logs out"
            },
            "tools_used": [], "summary": "add logout to Auth"
        }))
    }
    pub fn explore(&mut self) -> Value {
        self.called(&["find_definitions", "search_text"]);
        self.ok(json!({
            "explored_files": ["src/auth.py"], "findings": ["Auth at src/auth.py:1"],
            "tools_used": ["find_definitions", "search_text"], "summary": "Auth class found"
        }))
    }
    pub fn gate(&mut self, field: &str, answer: bool) -> Value {
        self.ok(json!({field: answer, "reason": "because of the findings so far", "tools_used": [], "summary": "gate"}))
    }
    pub fn semantic(&mut self) -> Value {
        self.called(&["semantic_search"]);
        self.ok(json!({"search_query": "logout", "search_results": ["src/auth.py"], "tools_used": ["semantic_search"], "summary": "s"}))
    }
    pub fn verify_hypotheses(&mut self) -> Value {
        self.called(&["find_references"]);
        self.ok(json!({
            "hypotheses_verified": [{"hypothesis": "Auth has login", "result": true, "evidence": "src/auth.py:3"}],
            "tools_used": ["find_references"], "summary": "verified"
        }))
    }
    pub fn impact(&mut self) -> Value {
        self.called(&["analyze_impact"]);
        self.ok(json!({"impact_summary": {"must_verify": ["src/app.py"]}, "tools_used": ["analyze_impact"], "summary": "i"}))
    }
    pub fn plan(&mut self, ids: &[&str]) -> Value {
        let tasks: Vec<Value> = ids
            .iter()
            .map(|id| {
                json!({"id": id, "description": format!("do {id}"), "status": "pending",
                             "checklist": [{"item": format!("{id} code"), "status": "pending"}]})
            })
            .collect();
        self.ok(json!({"tasks": tasks, "tools_used": [], "summary": "plan"}))
    }
    pub fn complete(&mut self, id: &str) -> Value {
        self.called(&["check_write_target"]);
        self.ok(json!({
            "task_id": id,
            "checklist": [{"item": format!("{id} code"), "status": "done", "evidence": "src/auth.py:2-3"}],
            "tools_used": ["check_write_target"], "summary": format!("{id} done")
        }))
    }
    pub fn finish(&mut self) -> Value {
        self.ok(json!({"summary": "all tasks done"}))
    }
    pub fn post(&mut self, passed: bool) -> Value {
        self.ok(json!({"verifier_used": "verifiers/tests.md", "passed": passed, "details": "pytest", "tools_used": [], "summary": "v"}))
    }
    pub fn intervene(&mut self) -> Value {
        self.ok(json!({"prompt_used": "interventions/step_back.md", "action_taken": "re-read the failing test", "tools_used": [], "summary": "i"}))
    }
    pub fn pre_commit(&mut self) -> Value {
        self.called(&["review_changes"]);
        self.ok(json!({
            "review_prompt_used": "garbage_detection.md", "reviewed_files": [{"file": "src/auth.py", "decision": "keep"}],
            "commit_message": "Add logout", "tools_used": ["review_changes"], "summary": "reviewed"
        }))
    }
    pub fn quality(&mut self, issues: &[&str]) -> Value {
        self.ok(json!({"quality_prompt_used": "quality_review.md", "quality_score": "8/10", "issues": issues, "tools_used": [], "summary": "q"}))
    }
    pub fn merge(&mut self) -> Value {
        self.ok(json!({"summary": "merged"}))
    }

    /// Start to READY planning through every exploration phase, saying no at the gates.
    pub fn through_exploration(&mut self) {
        self.doc();
        self.frame();
        self.explore();
        self.gate("needs_more_information", false);
        self.gate("has_unverified_hypotheses", false);
        self.gate("needs_impact_analysis", false);
        assert_eq!(self.phase(), Phase::Ready);
    }

    pub fn implement(&mut self, ids: &[&str]) {
        self.plan(ids);
        for id in ids {
            self.complete(id);
        }
        self.finish();
    }
}

pub fn auth_py() -> Vec<String> {
    ["class Auth:", "    def login(self, user):", "        return self.store.check(user)", ""]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

pub fn flags(f: impl FnOnce(&mut Flags)) -> Flags {
    let mut x = Flags::default();
    f(&mut x);
    x
}

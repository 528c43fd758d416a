//! The contract lint over the compiled-in contract: every tool it names is served, no text
//! carries comment lines, every placeholder is filled by the code, and every message the code
//! produces exists. (The lint's own unit tests show it failing on a fake tool name.)

use code_intel_workflow::contract::Contract;
use code_intel_workflow::contract::catalogue;
use code_intel_workflow::contract::lint::{self, Vocabulary};
use git_code_intel::mcp;

#[test]
fn the_compiled_in_contract_is_clean() {
    let issues = lint::lint(&Contract::builtin(), &mcp::vocabulary());
    let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert!(issues.is_empty(), "contract lint:\n{}", text.join("\n"));
}

#[test]
fn the_vocabulary_is_the_servers() {
    let v = mcp::vocabulary();
    for tool in ["submit_phase", "check_write_target", "semantic_search", "get_session_status"] {
        assert!(v.tools.contains(tool), "{tool}");
    }
    for word in ["task_id", "compaction_count", "phase_summaries", "expected_payload_schema", "discard_active"] {
        assert!(v.words.contains(word), "{word}");
    }
    assert!(!v.tools.contains("complete_task"));
}

#[test]
fn a_fake_tool_in_an_instruction_fails_the_lint() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
    std::fs::write(
        dir.path().join(".code-intel/phase_contract.yml"),
        "phases:\n  READY_IMPL:\n    instruction: |-\n      Implement task {task_id}.\n      Submit via complete_task(task_id, data={summary, checklist}).\n",
    )
    .unwrap();
    let (contract, warning) = code_intel_session::workspace::load_contract(dir.path());
    assert!(warning.is_none());
    let issues = lint::lint(&contract, &mcp::vocabulary());
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0].path, "phases.READY_IMPL.instruction");
    assert!(issues[0].problem.contains("complete_task"), "{issues:?}");
}

#[test]
fn comment_text_and_unfilled_placeholders_fail_the_lint() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
    std::fs::write(
        dir.path().join(".code-intel/phase_contract.yml"),
        "phases:\n  MERGE:\n    instruction: |-\n      Submit via submit_phase.\n      # v1.15: Externalized Message Definitions\nsession_messages:\n  checkpoint_conflict:\n    message: \"Conflict in {session_id}.\"\n",
    )
    .unwrap();
    let (contract, _) = code_intel_session::workspace::load_contract(dir.path());
    let issues = lint::lint(&contract, &Vocabulary { tools: ["submit_phase".to_owned()].into(), ..mcp::vocabulary() });
    let text: Vec<String> = issues.iter().map(ToString::to_string).collect();
    assert!(text.iter().any(|t| t.starts_with("phases.MERGE.instruction") && t.contains("comment")), "{text:?}");
    assert!(text.iter().any(|t| t.contains("checkpoint_conflict") && t.contains("{session_id}")), "{text:?}");
}

#[test]
fn every_message_the_code_produces_exists_with_its_placeholders() {
    let contract = Contract::builtin();
    for key in catalogue::ALL {
        assert!(contract.get(key.path).is_some(), "{} is missing", key.dotted());
    }
    // The seeds' messages no code produces are listed with a reason, and are not in the
    // catalogue.
    for (path, why) in catalogue::UNPRODUCED {
        let parts: Vec<&str> = path.split('.').collect();
        assert!(catalogue::find(&parts).is_none(), "{path} is produced after all");
        assert!(contract.get(&parts).is_some() && !why.is_empty(), "{path}");
    }
}

#[test]
fn payload_shapes_in_an_override_are_reported_as_having_no_effect() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
    std::fs::write(
        dir.path().join(".code-intel/phase_contract.yml"),
        "phases:\n  Q1:\n    expected_payload:\n      needs_more_information: bool\n    required_tools: [search_text]\n  Q9:\n    instruction: x\n",
    )
    .unwrap();
    let (contract, _) = code_intel_session::workspace::load_contract(dir.path());
    let paths: Vec<String> = lint::lint(&contract, &mcp::vocabulary()).into_iter().map(|i| i.path).collect();
    assert_eq!(paths, ["phases.Q1.expected_payload", "phases.Q1.required_tools", "phases.Q9"]);
}

//! Every message of the contract that the code produces, with the placeholders it fills.
//!
//! Code never names a contract path by hand: it names one of these keys, so a path that does
//! not exist, or a placeholder left unfilled, is caught by the contract lint
//! (`tests/it/contract_lint.rs`) and, at the call, by a debug assertion that the variables given
//! are exactly the ones declared here.

/// What kind of answer a message is. The property test over `expected_payload_schema` relies on
/// [`Kind::Shape`]: a payload the schema accepts never gets a shape refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The payload's shape is wrong in a way `expected_payload_schema` also rules out.
    Shape,
    /// The payload is well formed but says something the server can check and refute (a tool
    /// that was not called, evidence past the end of a file, a quote not in the query).
    Content,
    /// The session or the repository is not in a state where this can happen.
    State,
    /// Git work or the environment failed.
    Failure,
    /// A tool's arguments are missing or wrong.
    Argument,
    /// Text that is not a refusal: instructions, success messages, hints, warnings.
    Note,
}

/// One message of the contract: where it lives and what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    pub path: &'static [&'static str],
    /// The `{placeholders}` the message is filled with.
    pub vars: &'static [&'static str],
    pub kind: Kind,
}

impl Msg {
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }
}

macro_rules! catalogue {
    ($( $(#[$doc:meta])* $name:ident = [$($seg:literal),+] ($($var:literal),*) $kind:ident; )*) => {
        $( $(#[$doc])* pub const $name: Msg = Msg { path: &[$($seg),+], vars: &[$($var),*], kind: Kind::$kind }; )*
        /// Every key above, for the lint.
        pub const ALL: &[Msg] = &[$($name),*];
    };
}

catalogue! {
    // Shared by every phase.
    SUMMARY_REQUIRED = ["common_failures", "summary_required"] () Shape;
    TOOLS_USED_INVALID = ["common_failures", "tools_used_invalid"] () Shape;
    EXPLORATION_MIN_TOOLS = ["common_failures", "exploration_min_tools"] () Content;
    REQUIRED_TOOLS_NOT_USED = ["common_failures", "required_tools_not_used"] ("missing_list") Content;
    REQUIRED_TOOLS_NOT_REPORTED = ["common_failures", "required_tools_not_reported"] ("missing_reported") Shape;
    UNKNOWN_PHASE = ["common_failures", "unknown_phase"] ("phase") State;
    PAYLOAD_MISMATCH = ["common_failures", "payload_mismatch"] ("phase", "other_phase") Shape;
    TOOLS_NOT_CALLED = ["common_failures", "tools_not_called"] ("tools") Content;
    FIELD_REQUIRED = ["common_failures", "field_required"] ("field") Shape;
    PAYLOAD_INVALID = ["common_failures", "payload_invalid"] ("path", "error") Shape;
    CHECKPOINT_TOO_LARGE = ["common_failures", "checkpoint_too_large"] ("size", "limit") Content;

    INVALID_CHOICE = ["failures", "BRANCH_INTERVENTION", "invalid_choice"] () Shape;
    BRANCH_OPERATION_FAILED = ["failures", "BRANCH_INTERVENTION", "branch_operation_failed"] ("choice", "errors") Failure;
    EMPTY_DOCUMENTS = ["failures", "DOCUMENT_RESEARCH", "empty_documents"] () Content;
    DOCUMENTS_NOT_FOUND = ["failures", "DOCUMENT_RESEARCH", "documents_not_found"] ("files") Content;
    MUST_READ_NOT_REVIEWED = ["failures", "DOCUMENT_RESEARCH", "must_read_not_reviewed"] ("files") Content;
    EMPTY_RESULT = ["failures", "EXPLORATION", "empty_result"] () Shape;
    EXPLORED_NOT_SHOWN = ["failures", "EXPLORATION", "explored_not_shown"] ("files") Content;
    QUOTE_NOT_IN_QUERY = ["failures", "QUERY_FRAME", "quote_not_in_query"] ("slot", "quote") Content;
    EMPTY_SEARCH_RESULTS = ["failures", "SEMANTIC", "empty_search_results"] () Shape;
    EMPTY_HYPOTHESES = ["failures", "VERIFICATION", "empty_hypotheses"] () Shape;
    RESULT_FALSE_EXISTS = ["failures", "VERIFICATION", "result_false_exists"] () Content;
    HYPOTHESIS_RUN_UNKNOWN = ["failures", "VERIFICATION", "hypothesis_run_unknown"] ("index", "run", "runs") Content;
    HYPOTHESIS_EVIDENCE_INVALID = ["failures", "VERIFICATION", "hypothesis_evidence_invalid"] ("index", "evidence") Content;
    EMPTY_IMPACT_SUMMARY = ["failures", "IMPACT_ANALYSIS", "empty_impact_summary"] () Shape;

    BRANCH_CREATION_FAILED = ["failures", "READY", "branch_creation_failed"] () Failure;
    PHASE_MISMATCH_REGISTER = ["failures", "READY", "phase_mismatch_register"] () Shape;
    EMPTY_TASKS = ["failures", "READY", "empty_tasks"] () Shape;
    DUPLICATE_TASK_IDS = ["failures", "READY", "duplicate_task_ids"] () Content;
    NO_PENDING_TASKS = ["failures", "READY", "no_pending_tasks"] () Shape;
    PHASE_MISMATCH_COMPLETE = ["failures", "READY", "phase_mismatch_complete"] () Shape;
    NO_TASKS = ["failures", "READY", "no_tasks"] () State;
    UNKNOWN_TASK = ["failures", "READY", "unknown_task"] ("task_id") Shape;
    ALREADY_COMPLETED = ["failures", "READY", "already_completed"] ("task_id") Shape;
    WRONG_ORDER = ["failures", "READY", "wrong_order"] ("expected_task", "task_id") Shape;
    NO_TASKS_REGISTERED = ["failures", "READY", "no_tasks_registered"] () Shape;
    INCOMPLETE_TASKS = ["failures", "READY", "incomplete_tasks"] ("count") Shape;
    CHECKLIST_ITEMS_MISMATCH = ["failures", "READY", "checklist_items_mismatch"] () Shape;
    CHECKLIST_ITEM_PENDING = ["failures", "READY", "checklist_item_pending"] ("item") Shape;
    CHECKLIST_EVIDENCE_REQUIRED = ["failures", "READY", "checklist_evidence_required"] ("item") Shape;
    CHECKLIST_EVIDENCE_FORMAT_INVALID = ["failures", "READY", "checklist_evidence_format_invalid"] ("evidence") Shape;
    CHECKLIST_EVIDENCE_RANGE_REVERSED = ["failures", "READY", "checklist_evidence_range_reversed"] ("evidence") Content;
    CHECKLIST_EVIDENCE_FILE_NOT_FOUND = ["failures", "READY", "checklist_evidence_file_not_found"] ("file_path") Content;
    CHECKLIST_EVIDENCE_LINE_OUT_OF_RANGE = ["failures", "READY", "checklist_evidence_line_out_of_range"] ("line", "total") Content;
    CHECKLIST_EVIDENCE_EMPTY_IMPL = ["failures", "READY", "checklist_evidence_empty_impl"] ("evidence") Content;
    CHECKLIST_REASON_REQUIRED = ["failures", "READY", "checklist_reason_required"] ("item") Shape;
    CHECKLIST_EVIDENCE_OUTSIDE_REPO = ["failures", "READY", "checklist_evidence_outside_repo"] ("file_path") Content;
    CHECKLIST_REQUIRED = ["failures", "READY", "checklist_required"] ("task_id") Shape;
    TASK_FIELDS_REQUIRED = ["failures", "READY", "task_fields_required"] () Shape;
    COMPLETED_UNKNOWN_TASK = ["failures", "READY", "completed_unknown_task"] ("task_id") Shape;

    MISSING_COMMIT_MESSAGE = ["failures", "PRE_COMMIT", "missing_commit_message"] () Shape;
    PRE_COMMIT_NO_TASK_BRANCH = ["failures", "PRE_COMMIT", "branch_manager_not_found"] () State;
    REVIEW_FAILED = ["failures", "PRE_COMMIT", "review_failed"] () Shape;
    FIX_REASON_REQUIRED = ["failures", "PRE_COMMIT", "fix_reason_required"] ("files") Shape;
    REVIEW_INCOMPLETE = ["failures", "PRE_COMMIT", "review_incomplete"] ("files") Content;
    GARBAGE_IN_COMMIT = ["failures", "PRE_COMMIT", "garbage_in_commit"] ("findings") Content;
    PRE_COMMIT_HOOK_FAILED = ["failures", "PRE_COMMIT", "pre_commit_hook_failed"] ("hook") Content;
    FINALIZE_FAILED = ["failures", "PRE_COMMIT", "finalize_failed"] () Failure;
    COMMIT_EXECUTION_FAILED = ["failures", "QUALITY_REVIEW", "commit_execution_failed"] () Failure;
    QUALITY_FORCED_COMPLETION = ["failures", "QUALITY_REVIEW", "quality_forced_completion"] () Note;
    MERGE_NO_TASK_BRANCH = ["failures", "MERGE", "branch_manager_not_found"] () State;
    MERGE_FAILED = ["failures", "MERGE", "merge_failed"] () Failure;
    VERIFY_PASSED_CONTRADICTS_RUN = ["failures", "POST_IMPL_VERIFY", "passed_contradicts_run"] ("command", "run", "outcome") Content;
    VERIFY_PASSED_UNWITNESSED = ["failures", "POST_IMPL_VERIFY", "passed_unwitnessed"] ("commands") State;
    USER_ESCALATION = ["failures", "VERIFY_INTERVENTION", "user_escalation"] () Note;
    ESCALATION_COUNT = ["failures", "VERIFY_INTERVENTION", "escalation_count"] ("count") Note;

    INVESTIGATION_COMPLETE = ["success", "Q3", "investigation_complete"] () Note;
    INVESTIGATION_COMPLETE_AFTER_IMPACT = ["success", "IMPACT_ANALYSIS", "investigation_complete"] () Note;
    SESSION_COMPLETE_NO_VERIFY_QUICK = ["success", "READY", "session_complete_no_verify_quick"] () Note;
    SESSION_COMPLETE_QUICK = ["success", "POST_IMPL_VERIFY", "session_complete_quick"] () Note;
    MERGE_SUCCESS = ["success", "MERGE", "merge_success"] ("from_branch", "to_branch") Note;

    REVIEW_PHASE_BLOCKED = ["tool_errors", "review_changes", "phase_blocked"] ("phase") State;
    REVIEW_TASK_BRANCH_NOT_ENABLED = ["tool_errors", "review_changes", "task_branch_not_enabled"] () State;
    REVIEW_NO_TASK_BRANCH = ["tool_errors", "review_changes", "branch_manager_not_found"] () State;
    WRITE_BLOCKED = ["tool_errors", "check_write_target", "write_blocked"] () State;
    WRITE_PHASE_BLOCKED = ["tool_errors", "check_write_target", "write_phase_blocked"] ("phase") State;
    ADD_EXPLORED_PHASE_MISMATCH = ["tool_errors", "add_explored_files", "phase_mismatch"] ("phase") State;
    ADD_EXPLORED_NO_FILES = ["tool_errors", "add_explored_files", "no_files"] () Argument;
    ADD_EXPLORED_NOT_SHOWN = ["tool_errors", "add_explored_files", "not_shown"] ("files") State;
    RUN_CHECK_NOT_A_VERIFY_COMMAND = ["tool_errors", "run_check", "not_a_verify_command"] ("command", "commands") Argument;
    RUN_CHECK_NO_VERIFY_COMMANDS = ["tool_errors", "run_check", "no_verify_commands"] () State;
    RUN_CHECK_BAD_SELECTOR = ["tool_errors", "run_check", "bad_selector"] ("selector") Argument;
    RUN_CHECK_CANNOT_RUN = ["tool_errors", "run_check", "cannot_run"] ("command", "why") Failure;

    SEMANTIC_GATE_REQUIRED = ["tool_errors", "check_phase_necessity", "semantic_needs_more_information_required"] () Shape;
    SEMANTIC_GATE_REASON_REQUIRED = ["tool_errors", "check_phase_necessity", "semantic_reason_required"] () Shape;
    SEMANTIC_GATE_TYPE = ["tool_errors", "check_phase_necessity", "semantic_needs_more_information_type"] () Shape;
    SEMANTIC_GATE_REASON_LENGTH = ["tool_errors", "check_phase_necessity", "semantic_reason_length"] () Shape;
    VERIFICATION_GATE_REQUIRED = ["tool_errors", "check_phase_necessity", "verification_has_unverified_required"] () Shape;
    VERIFICATION_GATE_REASON_REQUIRED = ["tool_errors", "check_phase_necessity", "verification_reason_required"] () Shape;
    VERIFICATION_GATE_TYPE = ["tool_errors", "check_phase_necessity", "verification_has_unverified_type"] () Shape;
    VERIFICATION_GATE_REASON_LENGTH = ["tool_errors", "check_phase_necessity", "verification_reason_length"] () Shape;
    IMPACT_GATE_REQUIRED = ["tool_errors", "check_phase_necessity", "impact_needs_analysis_required"] () Shape;
    IMPACT_GATE_REASON_REQUIRED = ["tool_errors", "check_phase_necessity", "impact_reason_required"] () Shape;
    IMPACT_GATE_TYPE = ["tool_errors", "check_phase_necessity", "impact_needs_analysis_type"] () Shape;
    IMPACT_GATE_REASON_LENGTH = ["tool_errors", "check_phase_necessity", "impact_reason_length"] () Shape;

    NO_PATTERN = ["tool_errors", "query", "no_pattern"] () Argument;
    NO_SYMBOL = ["tool_errors", "query", "no_symbol"] () Argument;
    NO_FILE_PATH = ["tool_errors", "query", "no_file_path"] () Argument;
    SEMANTIC_UNAVAILABLE = ["tool_errors", "query", "chromadb_not_available"] ("error") Failure;
    UNKNOWN_TOOL = ["tool_errors", "query", "unknown_tool"] ("tool") Argument;
    SEMANTIC_SEARCH_FAILED = ["tool_errors", "query", "semantic_search_failed"] ("error") Failure;
    NO_QUESTION = ["tool_errors", "query", "no_question"] () Argument;
    TOO_MANY_PATTERNS = ["tool_errors", "query", "too_many_patterns"] ("max", "count") Argument;
    INVALID_REGEX = ["tool_errors", "query", "invalid_regex"] ("pattern", "error") Argument;
    INVALID_GLOB = ["tool_errors", "query", "invalid_glob"] ("pattern", "error") Argument;
    PATH_OUTSIDE_REPO = ["tool_errors", "query", "path_outside_repo"] ("path", "root") Argument;
    PATH_IN_GIT_DIR = ["tool_errors", "query", "path_in_git_dir"] ("path") Argument;
    PATH_NOT_FOUND = ["tool_errors", "query", "path_not_found"] ("path") Argument;
    NOT_A_FILE = ["tool_errors", "query", "not_a_file"] ("path") Argument;
    UNSUPPORTED_LANGUAGE = ["tool_errors", "query", "unsupported_language"] ("language", "supported") Argument;
    FILE_TOO_LARGE = ["tool_errors", "query", "file_too_large"] ("path", "size", "limit") Argument;
    BINARY_FILE = ["tool_errors", "query", "binary_file"] ("path") Argument;
    LINE_OUT_OF_RANGE = ["tool_errors", "query", "line_out_of_range"] ("line", "path", "total") Argument;
    NO_FUNCTION_AT_LINE = ["tool_errors", "query", "no_function_at_line"] ("path", "line") Argument;
    INVALID_ARGUMENT = ["tool_errors", "query", "invalid_argument"] ("name", "error") Argument;
    CONTEXT_UPDATE_FAILED = ["tool_errors", "query", "context_update_failed"] ("error") Failure;
    RESPONSE_TOO_LARGE = ["tool_errors", "query", "response_too_large"] ("tool", "size", "limit") Argument;
    INDEX_FAILED = ["tool_errors", "query", "index_failed"] ("error") Failure;
    INVALID_COLLECTION = ["tool_errors", "query", "invalid_collection"] ("collection") Argument;
    NO_CHUNK_ID = ["tool_errors", "query", "no_chunk_id"] () Argument;
    CHUNK_NOT_FOUND = ["tool_errors", "query", "chunk_not_found"] ("chunk_id") Argument;
    SYNC_FAILED = ["tool_errors", "query", "sync_failed"] ("error") Failure;
    INVALID_OUTCOME = ["tool_errors", "query", "invalid_outcome"] ("outcome") Argument;
    NO_SESSION_FOR_OUTCOME = ["tool_errors", "query", "no_session_for_outcome"] () State;
    OUTCOME_FAILED = ["tool_errors", "query", "outcome_failed"] ("error") Failure;
    BASH_WRITE_BLOCKED = ["tool_errors", "hooks", "bash_write_blocked"] ("phase", "why", "command") State;
    BASH_VERIFY_BLOCKED = ["tool_errors", "hooks", "bash_verify_blocked"] ("phase", "why", "command", "verify_commands") State;
    HOOK_INPUT_UNREADABLE = ["tool_errors", "hooks", "hook_input_unreadable"] ("why", "session_id") Failure;
    /// A session exists in the work tree but cannot be read: the hook fails closed.
    HOOK_SESSION_UNREADABLE = ["tool_errors", "hooks", "hook_session_unreadable"] ("why") Failure;
    /// A write into the guard's own configuration (.git, .claude, .codex, .code-intel, .agents, .mcp.json).
    WRITE_PROTECTED = ["tool_errors", "hooks", "write_protected"] ("path") State;
    /// The runner's one line after a confined command that failed (stderr).
    SANDBOX_NOTE = ["tool_errors", "hooks", "sandbox_note"] ("phase") State;
    /// The same in READY, where the explored files are writable too.
    SANDBOX_NOTE_READY = ["tool_errors", "hooks", "sandbox_note_ready"] () State;
    /// The runner refused to run a command (no kernel sandbox, or an unreadable session).
    SANDBOX_REFUSED = ["tool_errors", "hooks", "sandbox_refused"] ("why") Failure;
    /// SessionStart: shell commands run in the kernel sandbox.
    SANDBOX_ENFORCED = ["session_messages", "sandbox_enforced"] ("mechanism") State;
    /// SessionStart, init, doctor: no kernel sandbox here; the shell guard is advisory.
    SANDBOX_ADVISORY = ["session_messages", "sandbox_advisory"] ("why") State;
    /// The error code only: its message is made at run time, from what went wrong.
    BRANCH_SETUP_FAILED = ["tool_errors", "start_session", "branch_setup_failed"] () Failure;

    CHECKPOINT_RECOVERY = ["session_messages", "checkpoint_recovery"] () State;
    NO_ACTIVE_SESSION = ["session_messages", "no_active_session"] () State;
    NO_ACTIVE_SESSION_SHORT = ["session_messages", "no_active_session_short"] () Note;
    CHECKPOINT_RESTORE_FAILED = ["session_messages", "checkpoint_restore_failed"] () Failure;
    CHECKPOINT_NOT_OURS = ["session_messages", "checkpoint_not_ours"] ("ref") State;
    INVALID_DATA = ["session_messages", "invalid_data"] ("error") Shape;
    SESSION_COMPLETE = ["session_messages", "session_complete"] () Note;
    SESSION_ACTIVE = ["session_messages", "session_active"] ("session_id") State;
    CHECKPOINT_CONFLICT = ["session_messages", "checkpoint_conflict"] () Failure;
    LOCK_IN_THE_WAY = ["session_messages", "lock_in_the_way"] ("path") Failure;
    GIT_REQUIRED = ["session_messages", "git_required"] ("error") Failure;
    GIT_FAILED = ["session_messages", "git_failed"] ("error") Failure;
    RECOVERY_FAILED = ["session_messages", "recovery_failed"] ("error") Failure;
    TASK_BRANCHES_UNREADABLE = ["session_messages", "task_branches_unreadable"] ("error") Failure;
    STALE_BASE_UNKNOWN = ["session_messages", "stale_base_unknown"] ("branch") Failure;
    REVERT_TO_PLANNING = ["session_messages", "revert_to_planning"] ("reason", "tasks") Note;
    FIX_BEFORE_COMMIT = ["session_messages", "fix_before_commit"] ("fixes") Note;
    NO_VERIFY_COMMANDS = ["session_messages", "no_verify_commands"] () Note;
    BASELINE_INVITE = ["session_messages", "baseline_invite"] ("verify_commands") Note;
    VERIFICATION_FAILED_ONLY_VERIFY = ["session_messages", "verification_failed_only_verify"] () Note;
    PROJECT_RULES_STALE = ["session_messages", "project_rules_stale"] ("files") Note;
    PROJECT_RULES_HEADER = ["session_messages", "project_rules_header"] ("sources") Note;
    SUMMARIES_SHORTENED = ["session_messages", "summaries_shortened"] () Note;
    CONTEXT_UNREADABLE = ["session_messages", "context_unreadable"] ("path", "error") Note;
    DOC_RESEARCH_DISABLED = ["session_messages", "doc_research_disabled"] ("path") Note;
    BRANCHES_KEPT_UNMERGED = ["session_messages", "branches_kept_unmerged"] ("branches") Note;
    GIT_CREATES_TASK_BRANCH = ["session_messages", "git_creates_task_branch"] ("session_id") Note;
    GIT_ON_TASK_BRANCH = ["session_messages", "git_on_task_branch"] ("task_branch", "base_branch") Note;
    GIT_NO_TASK_BRANCH = ["session_messages", "git_no_task_branch"] () Note;
    GIT_COMMITS_TASK = ["session_messages", "git_commits_task"] ("task_branch") Note;
    GIT_COMMITS_REVIEW_FIXES = ["session_messages", "git_commits_review_fixes"] ("task_branch") Note;
    GIT_COMMITS_LAST_REVIEW_FIXES = ["session_messages", "git_commits_last_review_fixes"] ("task_branch") Note;
    GIT_MERGES = ["session_messages", "git_merges"] ("task_branch", "base_branch") Note;
    SYMBOLS_FAR_FROM_REQUEST = ["session_messages", "symbols_far_from_request"] ("symbols") Note;
    PAST_FAILURES = ["session_messages", "past_failures"] () Note;
    DEFAULT_PROCEDURES = ["session_messages", "default_procedures"] ("paths") Note;
    INVESTIGATION_READING = ["session_messages", "investigation_reading"] () Note;
    DEFAULT_PROCEDURES_IN_STATUS = ["session_messages", "default_procedures_in_status"] ("paths") Note;
    CHECKPOINT_SUMMARIES_SHORTENED = ["session_messages", "checkpoint_summaries_shortened"] () Note;
    REVERT_VERIFICATION_FAILED = ["session_messages", "revert_verification_failed"] ("details", "count", "next_step") Note;
    FAILURES_BEFORE_INTERVENTION = ["session_messages", "failures_before_intervention"] ("left", "limit") Note;
    FAILURES_NO_INTERVENTION = ["session_messages", "failures_no_intervention"] () Note;
    REVERT_AFTER_INTERVENTION = ["session_messages", "revert_after_intervention"] ("action") Note;
    REVERT_QUALITY_ISSUES = ["session_messages", "revert_quality_issues"] ("issues", "count", "limit") Note;
    EVIDENCE_REOPENED = ["session_messages", "evidence_reopened"] ("tasks") Note;
    EVIDENCE_LINES_CHANGED = ["session_messages", "evidence_lines_changed"] () Note;
    EVIDENCE_UNCHANGED = ["session_messages", "evidence_unchanged"] ("items") Note;
    SEMANTIC_UNAVAILABLE_SKIPPED = ["session_messages", "semantic_unavailable_skipped"] () Note;
    DOC_RESEARCH_NONE_REQUIRED = ["session_messages", "doc_research_none_required"] () Note;
    DOC_RESEARCH_NO_DOCUMENTS = ["session_messages", "doc_research_no_documents"] ("docs_path", "path") Note;

    PHASE_BLOCKED_HINT = ["hints", "phase_blocked_hint"] () Note;
    TARGET_FEATURE_MISSING = ["query_frame_hints", "target_feature_missing"] () Note;
    TRIGGER_CONDITION_MISSING = ["query_frame_hints", "trigger_condition_missing"] () Note;
    OBSERVED_ISSUE_MISSING = ["query_frame_hints", "observed_issue_missing"] () Note;
    DESIRED_ACTION_MISSING = ["query_frame_hints", "desired_action_missing"] () Note;
    TRUNCATION_WARNING = ["warnings", "truncation_warning"] () Note;
    INDEX_FAST_PATH = ["warnings", "index_fast_path"] ("parsed", "files", "by") Note;
    INDEX_FAST_PATH_CLI = ["warnings", "index_fast_path_cli"] ("parsed", "files", "by") Note;
    MAP_ANSWERS = ["warnings", "map_answers"] () Note;
    MAP_SHARED_HITS = ["warnings", "map_shared_hits"] ("remotes") Note;
    MAP_SHARED_NOT_TRUSTED = ["warnings", "map_shared_not_trusted"] ("score", "remote") Note;
    MAP_ENTRIES_SKIPPED = ["warnings", "map_entries_skipped"] ("count", "entries") Note;
    MAP_ENTRIES_NOT_SEARCHED = ["warnings", "map_entries_not_searched"] ("count", "limit") Note;
    MAP_ENTRIES_EMBEDDING = ["warnings", "map_entries_embedding"] ("pending", "searched") Note;
    MAP_NOT_LEARNED = ["warnings", "map_not_learned"] ("error") Note;
    FOREST_SYNCING = ["warnings", "forest_syncing"] ("done", "total") Note;
    FOREST_SYNCING_SCANNING = ["warnings", "forest_syncing_scanning"] () Note;
    FOREST_SYNC_FAILED = ["warnings", "forest_sync_failed"] ("error") Note;
    FOREST_REPLACED = ["warnings", "forest_replaced"] ("model") Note;
}

/// The catalogue's key at `path`, if the code produces a message there.
pub fn find(path: &[&str]) -> Option<Msg> {
    ALL.iter().copied().find(|m| m.path == path)
}

/// The instruction of each phase (by contract key) and the placeholders it is filled with.
pub const INSTRUCTIONS: &[(&str, &[&str])] = &[
    ("BRANCH_INTERVENTION", &[]),
    ("DOCUMENT_RESEARCH", &[]),
    ("QUERY_FRAME", &["query"]),
    ("EXPLORATION", &[]),
    ("Q1", &[]),
    ("SEMANTIC", &[]),
    ("Q2", &[]),
    ("VERIFICATION", &[]),
    ("Q3", &[]),
    ("IMPACT_ANALYSIS", &[]),
    ("READY_PLAN", &[]),
    ("READY_IMPL", &["task_id"]),
    ("READY_COMPLETE", &[]),
    ("POST_IMPL_VERIFY", &["verify_commands"]),
    ("VERIFY_INTERVENTION", &["verify_commands"]),
    ("PRE_COMMIT", &[]),
    ("QUALITY_REVIEW", &[]),
    ("MERGE", &[]),
];

/// Messages of the seeds that no code path produces, and why. The contract keeps them so that
/// a project's override file written for the seeds still loads, and the lint does not ask for
/// a caller.
pub const UNPRODUCED: &[(&str, &str)] = &[
    (
        "tool_errors.start_session.branch_setup_exception",
        "no exception path: a failure to read the branches is branch_setup_failed",
    ),
    (
        "success.MERGE.no_task_branch_complete",
        "unreachable: PRE_COMMIT refuses without a task branch, and every flow that reaches PRE_COMMIT has one",
    ),
    (
        "failures.MERGE.quality_review_required",
        "unreachable: MERGE follows only a passed or force-completed QUALITY_REVIEW, or a flow without one",
    ),
];

//! The phase contract: every instruction and message the agent sees.
//!
//! The default contract is compiled in from `crates/workflow/phase_contract.yml`. A project's
//! `.code-intel/phase_contract.yml` overrides it key by key: mappings merge recursively, and any
//! other value in the project file replaces the default one. Instructions and messages can be
//! reworded that way; what a payload must hold cannot (it is the payload types' schema, see
//! [`crate::engine::schema`]).
//!
//! - [`catalogue`]: every message the code produces, with its placeholders.
//! - [`lint`]: checks a contract's text against the tools and fields we really serve.

pub mod catalogue;
pub mod lint;

pub use catalogue::Msg;

use serde_yaml::{Mapping, Value};

const DEFAULT_CONTRACT: &str = include_str!("../../phase_contract.yml");

/// Where a project keeps its contract overrides, relative to the repository root.
pub const OVERRIDE_PATH: &str = ".code-intel/phase_contract.yml";

/// blake3 of `crates/workflow/phase_contract.yml` as earlier versions shipped it, when `init` copied
/// the whole contract into the project.
const SHIPPED_COPIES: &[&str] = &[
    "9d90320af0ec4c759370fb6cf35e8fe4e6a4d434dcfcd4cbdc80646b398b5876",
    "1e2a93609a78e0e5f266680354455eea93fabfff071f4617b104c8521e3413b3",
    "d2b8ed7cc053f93cfcc6fef1020b27a943cb0fc72261473cfbfa78d37e52405a",
    "450dfe0fbaa8a1468758d7da9cb768fd376e4136f0510fb4a782c888b10f1126",
    "70596358a4eb1ee77d226f21b2baba4c0e8a1f3560a5dd0b6b7ea676264ebba4",
];

#[derive(Debug, Clone, Default)]
pub struct Contract {
    /// The project's overrides, merged into the built-in contract when it is first read.
    overrides: Option<Value>,
    /// The contract as read: parsed on first use (a command that sends no message never
    /// parses it; it takes about 2 ms).
    root: std::sync::OnceLock<Value>,
}

/// An `{error, message}` pair taken from the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractMessage {
    pub error: String,
    pub message: String,
}

impl Contract {
    /// The compiled-in default contract.
    pub fn builtin() -> Contract {
        Contract::default()
    }

    /// The default contract with a project's overrides (the text of its `OVERRIDE_PATH` file,
    /// read by the adapter; `origin` names it in warnings). Overrides that do not parse are
    /// reported in the returned warning and ignored, so the tools keep working. So is a verbatim
    /// copy of a whole contract an earlier version's `init` wrote: it holds no edit of the
    /// user's, only that version's wording.
    pub fn with_overrides(text: &str, origin: &str) -> (Contract, Option<String>) {
        let contract = Contract::builtin();
        let fingerprint = blake3::hash(text.as_bytes()).to_hex().to_string();
        if SHIPPED_COPIES.contains(&fingerprint.as_str()) {
            let why = "an unedited copy of the contract an earlier git-code-intel wrote; it is ignored \
                       (run `git code-intel init` to replace it with an overrides file)";
            return (contract, Some(format!("{origin}: {why}")));
        }
        match serde_yaml::from_str::<Value>(text) {
            Ok(overrides @ Value::Mapping(_)) => (Contract { overrides: Some(overrides), ..contract }, None),
            Ok(Value::Null) => (contract, None),
            Ok(_) => (contract, Some(format!("{origin}: not a mapping; using the default contract"))),
            Err(e) => (contract, Some(format!("{origin}: {e}; using the default contract"))),
        }
    }

    /// The contract as read: the default, with the overrides merged in.
    pub(crate) fn root(&self) -> &Value {
        self.root.get_or_init(|| {
            // The default is part of the binary and covered by tests; failing to parse it is a
            // build defect.
            let mut root: Value =
                serde_yaml::from_str(DEFAULT_CONTRACT).expect("crates/workflow/phase_contract.yml is valid YAML");
            if let Some(overrides) = &self.overrides {
                merge(&mut root, overrides.clone());
            }
            root
        })
    }

    /// The raw node at `path`, if any.
    pub fn get(&self, path: &[&str]) -> Option<&Value> {
        let mut node = self.root();
        for key in path {
            node = node.as_mapping()?.get(*key)?;
        }
        Some(node)
    }

    /// The message `key` with its `{placeholders}` filled. A missing entry yields a message that
    /// names the missing key, so a broken override is visible rather than silent.
    pub fn message(&self, key: &Msg, vars: &[(&str, &str)]) -> String {
        check_vars(&key.dotted(), key.vars, vars);
        match self.get(key.path).and_then(|n| n.get("message")).and_then(Value::as_str) {
            Some(template) => fill(template, vars),
            None => format!("(missing contract message: {})", key.dotted()),
        }
    }

    /// The `{error, message}` pair of `key`. The error code defaults to the last path element.
    pub fn error(&self, key: &Msg, vars: &[(&str, &str)]) -> ContractMessage {
        ContractMessage { error: self.error_code(key), message: self.message(key, vars) }
    }

    /// The error code of `key` alone, for messages made at run time.
    pub fn error_code(&self, key: &Msg) -> String {
        self.get(key.path)
            .and_then(|n| n.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| key.path.last().copied().unwrap_or("error").to_owned())
    }

    /// Whether `key` asks for the user (`requires_user_intervention: true`).
    pub fn requires_user(&self, key: &Msg) -> bool {
        self.get(key.path).and_then(|n| n.get("requires_user_intervention")).and_then(Value::as_bool) == Some(true)
    }

    /// The extra `instruction` some failures carry for the agent to pass on to the user.
    pub fn user_instruction(&self, key: &Msg) -> Option<String> {
        self.get(key.path).and_then(|n| n.get("instruction")).and_then(Value::as_str).map(str::to_owned)
    }

    /// The instruction of a phase (`phases.<key>.instruction`), filled.
    pub fn instruction(&self, phase_key: &str, vars: &[(&str, &str)]) -> String {
        let declared = catalogue::INSTRUCTIONS.iter().find(|(k, _)| *k == phase_key).map_or(&[][..], |(_, v)| *v);
        check_vars(&format!("phases.{phase_key}.instruction"), declared, vars);
        match self.get(&["phases", phase_key, "instruction"]).and_then(Value::as_str) {
            Some(template) => fill(template, vars),
            None => format!("(missing contract instruction: phases.{phase_key})"),
        }
    }

    /// The whole contract, as YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self.root()).unwrap_or_default()
    }
}

fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Mapping(base), Value::Mapping(overlay)) => merge_mapping(base, overlay),
        (base, overlay) => *base = overlay,
    }
}

fn merge_mapping(base: &mut Mapping, overlay: Mapping) {
    for (k, v) in overlay {
        match base.get_mut(&k) {
            Some(existing) => merge(existing, v),
            None => {
                base.insert(k, v);
            }
        }
    }
}

/// The variables given for a message must be exactly the ones the catalogue declares for it:
/// one missing leaves a `{placeholder}` in front of the agent, one extra means the catalogue
/// and the call disagree. Checked in debug builds (every test), free in release builds.
fn check_vars(what: &str, declared: &[&str], given: &[(&str, &str)]) {
    if cfg!(debug_assertions) {
        let mut a: Vec<&str> = declared.to_vec();
        let mut b: Vec<&str> = given.iter().map(|(k, _)| *k).collect();
        a.sort_unstable();
        b.sort_unstable();
        debug_assert_eq!(a, b, "variables for {what}");
    }
}

/// The `{name}` placeholders of a template, in order of appearance.
pub fn placeholders(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) => {
                let name = &after[..end];
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    out.push(name.to_owned());
                }
                rest = &after[end + 1..];
            }
            None => break,
        }
    }
    out
}

/// Replaces each `{name}` in `template` with its value; unknown placeholders stay as they are.
pub fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_owned();
    for (name, value) in vars {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_has_the_query_tool_errors() {
        let c = Contract::builtin();
        let e = c.error(&catalogue::NO_PATTERN, &[]);
        assert_eq!(e.error, "no_pattern");
        assert_eq!(e.message, "No pattern specified");
        assert_eq!(
            c.message(&catalogue::TRUNCATION_WARNING, &[]),
            "Response exceeded 256KB and was truncated. Please narrow down the pattern."
        );
    }

    #[test]
    fn placeholders_are_filled() {
        let c = Contract::builtin();
        let m = c.message(&catalogue::UNKNOWN_TOOL, &[("tool", "frobnicate")]);
        assert_eq!(m, "Unknown tool: frobnicate");
    }

    #[test]
    fn project_file_overrides_key_by_key() {
        let (c, warning) = Contract::with_overrides(
            "tool_errors:\n  query:\n    no_pattern:\n      message: \"Give me a pattern\"\n",
            OVERRIDE_PATH,
        );
        assert!(warning.is_none());
        let e = c.error(&catalogue::NO_PATTERN, &[]);
        assert_eq!(e.message, "Give me a pattern");
        assert_eq!(e.error, "no_pattern", "keys the file does not set keep their default");
        assert_eq!(c.message(&catalogue::NO_SYMBOL, &[]), "No symbol specified");
    }

    #[test]
    fn broken_project_file_falls_back_with_a_warning() {
        let (c, warning) = Contract::with_overrides("tool_errors: [unclosed", OVERRIDE_PATH);
        assert!(warning.unwrap().contains("phase_contract.yml"));
        assert_eq!(c.message(&catalogue::NO_SYMBOL, &[]), "No symbol specified");
    }

    #[test]
    fn every_phase_of_the_seeds_has_an_instruction() {
        let c = Contract::builtin();
        for (phase, _) in catalogue::INSTRUCTIONS {
            assert!(c.get(&["phases", phase, "instruction"]).and_then(Value::as_str).is_some(), "{phase}");
        }
    }
}

//! The one list of the tools this server serves, and what each of them does to the world.
//!
//! Everything that needs to know about tools reads it from here: the MCP server (which tools
//! exist, their annotations), the engine (which names in `tools_used` can be checked,
//! EXPLORATION's "two distinct code-intelligence tools"), the session adapter (which outputs
//! put files into the explored set), and the tests.

/// What a tool is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reads the code: what EXPLORATION's two distinct tools are counted from.
    CodeIntelligence,
    /// Drives or records the workflow.
    Session,
}

/// What a tool changes besides caches. Caches are the git-ignored derived files under
/// `.code-intel/` (symbol index, Forest) that any read may refresh: a tool that only refreshes
/// them is read-only, because what it answers is the same as with a fresh cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    Nothing,
    /// Rebuilds a derived index on purpose (its whole job).
    DerivedIndex,
    /// Appends to or moves `refs/code-intel/*`.
    Refs,
    /// Moves refs and branches, commits, merges, and rewrites files of the work tree.
    RefsAndWorkTree,
    /// Rewrites one of git-code-intel's own project files (`.code-intel/context.yml`).
    ProjectFile,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub role: Role,
    pub writes: Writes,
    /// May remove or overwrite something that cannot be recovered from what it leaves.
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    /// Its output shows file contents or symbols, so the files it names count as explored (a
    /// file listing does not).
    pub reveals_content: bool,
}

impl ToolSpec {
    pub fn read_only(&self) -> bool {
        self.writes == Writes::Nothing
    }
}

const fn read(name: &'static str, reveals_content: bool) -> ToolSpec {
    ToolSpec {
        name,
        role: Role::CodeIntelligence,
        writes: Writes::Nothing,
        destructive: false,
        idempotent: true,
        reveals_content,
    }
}

const fn session(name: &'static str, writes: Writes, destructive: bool, idempotent: bool) -> ToolSpec {
    ToolSpec { name, role: Role::Session, writes, destructive, idempotent, reveals_content: false }
}

/// Every tool the MCP server serves, in the order it lists them.
pub const TOOLS: &[ToolSpec] = &[
    read("search_text", true),
    read("search_files", false),
    read("find_definitions", true),
    read("find_references", true),
    read("get_symbols", true),
    read("analyze_structure", true),
    read("get_function_at_line", true),
    read("analyze_impact", true),
    // query appends its plan to the DecisionLog (refs/code-intel/logs/decisions).
    ToolSpec {
        name: "query",
        role: Role::CodeIntelligence,
        writes: Writes::Refs,
        destructive: false,
        idempotent: false,
        reveals_content: true,
    },
    read("semantic_search", true),
    read("fetch_chunk_detail", true),
    session("sync_index", Writes::DerivedIndex, false, true),
    session("record_outcome", Writes::Refs, false, false),
    session("update_context", Writes::ProjectFile, false, true),
    session("start_session", Writes::Refs, false, false),
    session("submit_phase", Writes::RefsAndWorkTree, true, false),
    session("get_session_status", Writes::Nothing, false, true),
    session("check_write_target", Writes::Nothing, false, true),
    session("add_explored_files", Writes::Refs, false, true),
    // run_check records its run in the session; the command it runs writes only what the
    // phase's sandbox lets it (ignored and temporary files).
    session("run_check", Writes::Refs, false, false),
    session("review_changes", Writes::Nothing, false, true),
    session("cleanup_stale_branches", Writes::RefsAndWorkTree, true, true),
];

/// The tool called `name`, if this server serves one.
pub fn get(name: &str) -> Option<&'static ToolSpec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Whether this server serves `name`, so that its use can be checked.
pub fn is_served(name: &str) -> bool {
    get(name).is_some()
}

/// Whether `name` is one of the code-intelligence tools.
pub fn is_code_intelligence(name: &str) -> bool {
    get(name).is_some_and(|t| t.role == Role::CodeIntelligence)
}

/// The code-intelligence tools, in listing order.
pub fn code_intelligence() -> impl Iterator<Item = &'static str> {
    TOOLS.iter().filter(|t| t.role == Role::CodeIntelligence).map(|t| t.name)
}

/// Whether the files named by `name`'s output join the explored set.
pub fn reveals_content(name: &str) -> bool {
    get(name).is_some_and(|t| t.reveals_content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len());
    }

    #[test]
    fn writers_are_not_read_only_and_listings_do_not_explore() {
        for name in ["query", "record_outcome", "start_session", "submit_phase", "sync_index"] {
            assert!(!get(name).is_some_and(ToolSpec::read_only), "{name} writes");
        }
        assert!(!reveals_content("search_files"), "a file listing is not exploring");
        assert!(reveals_content("search_text"));
        assert!(is_code_intelligence("search_files"));
        assert!(!is_code_intelligence("check_write_target"));
        assert!(get("submit_phase").is_some_and(|t| t.destructive));
    }
}

//! Every supported language: definitions, syntax-aware references and structure on a fixture.

mod common;

use git_code_intel::tools::definitions::{FindDefinitionsParams, find_definitions};
use git_code_intel::tools::references::{FindReferencesParams, find_references};
use git_code_intel::tools::structure::{AnalyzeStructureParams, analyze_structure};
use git_code_intel::workspace::Workspace;

struct Case {
    file: &'static str,
    language: &'static str,
    class: &'static str,
    method: &'static str,
    /// How `helper` is defined: a free function, or a method where the language has no free functions.
    helper_kind: &'static str,
    helper_def: &'static str,
    helper_call: &'static str,
    caller: &'static str,
}

const CASES: &[Case] = &[
    Case {
        file: "sample.rs",
        language: "rust",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "fn helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.py",
        language: "python",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "def helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.js",
        language: "javascript",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "function helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.ts",
        language: "typescript",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "function helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.tsx",
        language: "tsx",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "function helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.go",
        language: "go",
        class: "Greeter",
        method: "Greet",
        helper_kind: "function",
        helper_def: "func helper",
        helper_call: "helper(2)",
        caller: "Caller",
    },
    Case {
        file: "Sample.java",
        language: "java",
        class: "Sample",
        method: "greet",
        helper_kind: "method",
        helper_def: "static int helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.c",
        language: "c",
        class: "Greeter",
        method: "",
        helper_kind: "function",
        helper_def: "static int helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.cpp",
        language: "cpp",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "static int helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "Sample.cs",
        language: "csharp",
        class: "Greeter",
        method: "Greet",
        helper_kind: "method",
        helper_def: "static int helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.rb",
        language: "ruby",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "def helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
    Case {
        file: "sample.php",
        language: "php",
        class: "Greeter",
        method: "greet",
        helper_kind: "function",
        helper_def: "function helper",
        helper_call: "helper(2)",
        caller: "caller",
    },
];

#[test]
fn definitions_references_and_structure_in_every_language() {
    let repo = common::fixture_repo("langs");
    let ws = Workspace::open(repo.path(), false).unwrap();
    let mut failures = Vec::new();
    for case in CASES {
        if let Err(e) = check(&ws, repo.path(), case) {
            failures.push(format!("{}: {e}", case.language));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn check(ws: &Workspace, root: &std::path::Path, case: &Case) -> Result<(), String> {
    let path = root.join(case.file);
    let def_line = common::line_of(&path, case.helper_def);
    let call_line = common::line_of(&path, case.helper_call);

    // Definitions: exactly one `helper`, with its kind, range, signature and language.
    let defs = find_definitions(
        ws,
        FindDefinitionsParams { symbol: Some("helper".into()), path: Some(case.file.into()), ..Default::default() },
    )
    .map_err(|e| e.to_string())?;
    let [def] = defs.definitions.as_slice() else {
        return Err(format!("expected one definition of helper, got {:?}", defs.definitions));
    };
    if def.kind != case.helper_kind || def.line != def_line || def.file != case.file || def.language != case.language {
        return Err(format!("wrong definition {def:?}"));
    }
    if def.end_line <= def.line || !def.signature.contains("helper") {
        return Err(format!("range or signature wrong: {def:?}"));
    }

    // References: the call only — not the definition, the comment or the string — inside `caller`.
    let refs = find_references(
        ws,
        FindReferencesParams { symbol: Some("helper".into()), path: Some(case.file.into()), ..Default::default() },
    )
    .map_err(|e| e.to_string())?;
    let lines: Vec<u32> = refs.references.iter().map(|r| r.line).collect();
    if lines != vec![call_line] {
        return Err(format!("references of helper at {lines:?}, expected [{call_line}]"));
    }
    let enclosing = refs.references[0].enclosing.as_ref().map(|e| e.name.as_str());
    if enclosing != Some(case.caller) {
        return Err(format!("enclosing {enclosing:?}, expected {}", case.caller));
    }

    // Structure: the class, its method, the functions and the import.
    let s = analyze_structure(ws, AnalyzeStructureParams { file_path: Some(case.file.into()), ..Default::default() })
        .map_err(|e| e.to_string())?;
    let class = s
        .classes
        .iter()
        .find(|c| c.item.name == case.class)
        .ok_or(format!("no class {} in {:?}", case.class, s.classes))?;
    if !case.method.is_empty() && !class.methods.iter().any(|m| m == case.method) {
        return Err(format!("class {} lacks method {}: {:?}", case.class, case.method, class.methods));
    }
    for f in ["helper", case.caller] {
        if !s.functions.iter().any(|x| x.name == f) {
            return Err(format!("function {f} missing from {:?}", s.functions));
        }
    }
    if s.imports.is_empty() {
        return Err("no imports found".into());
    }
    if s.summary.functions != s.functions.len() || s.summary.ranges.is_empty() || s.language != case.language {
        return Err(format!("summary inconsistent: {:?}", s.summary));
    }
    Ok(())
}

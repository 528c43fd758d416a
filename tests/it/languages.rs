//! Every supported language: definitions, syntax-aware references and structure on a fixture.

use code_intel_session::tools::definitions::{FindDefinitionsParams, find_definitions};
use code_intel_session::tools::references::{FindReferencesParams, find_references};
use code_intel_session::tools::structure::{AnalyzeStructureParams, analyze_structure};
use code_intel_session::workspace::Workspace;

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
    let repo = crate::common::fixture_repo("langs");
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
    let def_line = crate::common::line_of(&path, case.helper_def);
    let call_line = crate::common::line_of(&path, case.helper_call);

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

/// Every lookup that names what it needs answers before the index exists from the files that
/// can matter (the fast path), and that answer is the one the full index gives.
#[test]
fn the_fast_path_answers_what_the_full_index_answers() {
    use serde_json::Value;

    let repo = crate::common::fixture_repo("langs");
    let root = repo.path();
    // Something the fast path must pass over as the index does: a binary "source" file.
    std::fs::write(root.join("blob.rs"), b"fn helper() {}\0\x01\x02").unwrap();
    crate::common::copy_dir(&crate::common::fixtures().join("project"), &root.join("project"));

    // A one-shot workspace with no index: every answer comes from the fast path, and nothing
    // is written.
    let before = Workspace::open(root, false).unwrap();
    let (fast, notes) = answers(&before, root);
    assert!(!root.join(".code-intel/index").exists(), "the one-shot fast path builds no index");
    // (An impact analysis of a file that defines nothing looks nothing up: no note there.)
    let notes: Vec<&Value> = notes.iter().filter(|n| !n.is_null()).collect();
    assert!(notes.len() > fast.len() / 2, "{notes:?}");
    assert!(notes.iter().all(|n| n["note"].as_str().is_some_and(|s| s.contains("git code-intel index"))), "{notes:?}");
    let some = notes.iter().find(|n| n["parsed_files"].as_u64() < n["source_files"].as_u64());
    assert!(some.is_some(), "the fast path parses fewer files than there are: {notes:?}");

    // The same lookups on the full index.
    let after = Workspace::open(root, false).unwrap();
    after.index_now(false);
    let (full, notes) = answers(&after, root);
    assert!(notes.iter().all(Value::is_null), "answers from the index carry no fast-path note: {notes:?}");
    assert_eq!(fast.len(), full.len());
    for (f, i) in fast.iter().zip(&full) {
        assert_eq!(f, i, "the fast path and the index disagree");
    }
}

/// Every lookup's JSON, with the `fast_path` field taken out (and returned on its own).
fn answers(ws: &Workspace, root: &std::path::Path) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    use code_intel_session::tools::impact::{AnalyzeImpactParams, TargetFiles, analyze_impact};
    use code_intel_session::tools::symbols::{GetSymbolsParams, get_symbols};
    let mut out = Vec::new();
    let mut words: Vec<String> = vec!["helper".into(), "help".into(), "GREET".into()];
    for case in CASES {
        words.extend([case.class, case.method, case.caller].iter().filter(|w| !w.is_empty()).map(|w| w.to_string()));
    }
    words.sort();
    words.dedup();
    for w in &words {
        for exact in [true, false] {
            let p = FindDefinitionsParams { symbol: Some(w.clone()), exact_match: Some(exact), ..Default::default() };
            out.push(serde_json::to_value(find_definitions(ws, p).unwrap()).unwrap());
        }
        let p = FindReferencesParams { symbol: Some(w.clone()), ..Default::default() };
        out.push(serde_json::to_value(find_references(ws, p).unwrap()).unwrap());
    }
    let mut files: Vec<String> = CASES.iter().map(|c| c.file.to_owned()).collect();
    for entry in walkdir(root.join("project")) {
        files.push(entry.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
    }
    for file in files.iter().map(String::as_str).chain(["project", "blob.rs"]).filter(|f| root.join(f).exists()) {
        let p = GetSymbolsParams { path: Some(file.into()), ..Default::default() };
        out.push(serde_json::to_value(get_symbols(ws, p).unwrap()).unwrap());
    }
    for file in files.iter().filter(|f| root.join(f).is_file()) {
        let p = AnalyzeImpactParams { target_files: Some(TargetFiles::One(file.clone())), ..Default::default() };
        out.push(serde_json::to_value(analyze_impact(ws, p).unwrap()).unwrap());
    }
    let fast = out.iter_mut().filter_map(|v| v.as_object_mut()?.remove("fast_path")).collect();
    (out, fast)
}
fn walkdir(dir: std::path::PathBuf) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walkdir(p)) } else { out.push(p) }
    }
    out.sort();
    out
}

/// After edits, an incremental refresh (kept files' posting lists and blobs copied, changed
/// ones parsed) answers exactly what an index rebuilt from nothing answers.
#[test]
fn an_incremental_refresh_answers_what_a_rebuild_answers() {
    let repo = crate::common::fixture_repo("langs");
    let root = repo.path();
    crate::common::copy_dir(&crate::common::fixtures().join("project"), &root.join("project"));
    Workspace::open(root, false).unwrap().index_now(false);
    let rs = root.join("sample.rs");
    let text = std::fs::read_to_string(&rs).unwrap();
    std::fs::write(&rs, format!("{text}\nfn helper_two() {{ helper(3); }}\n")).unwrap();
    std::fs::remove_file(root.join("sample.py")).unwrap();
    std::fs::write(
        root.join("project/src/extra.py"),
        "from auth import login\n\ndef helper():\n    return login(1, 2)\n",
    )
    .unwrap();

    let incremental = Workspace::open(root, false).unwrap();
    let (after_edit, _) = answers(&incremental, root);
    let rebuilt = Workspace::open(root, false).unwrap();
    rebuilt.index_now(true);
    let (from_scratch, _) = answers(&rebuilt, root);
    assert_eq!(after_edit.len(), from_scratch.len());
    for (a, b) in after_edit.iter().zip(&from_scratch) {
        assert_eq!(a, b, "the incremental index and the rebuilt one disagree");
    }
    let defs =
        find_definitions(&rebuilt, FindDefinitionsParams { symbol: Some("helper".into()), ..Default::default() })
            .unwrap();
    let files: Vec<&str> = defs.definitions.iter().map(|d| d.file.as_str()).collect();
    assert!(files.contains(&"project/src/extra.py") && !files.contains(&"sample.py"), "{files:?}");
}

/// A one-shot command trusts the stored index while its walk stamp holds (no walk), and sees
/// every kind of change: a new file, an edited one, a changed .gitignore, a changed config.
#[test]
fn a_one_shot_lookup_skips_the_walk_while_nothing_changed_and_sees_every_change() {
    let repo = crate::common::fixture_repo("langs");
    let root = repo.path();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/a.rs"), "fn in_sub() {}\n").unwrap();
    Workspace::open(root, false).unwrap().index_now(false);
    let stamp = root.join(".code-intel/index/walk.stamp");
    let defs = |name: &str| -> Vec<String> {
        let ws = Workspace::open(root, false).unwrap();
        let out =
            find_definitions(&ws, FindDefinitionsParams { symbol: Some(name.into()), ..Default::default() }).unwrap();
        assert!(out.fast_path.is_none());
        out.definitions.iter().map(|d| d.file.clone()).collect()
    };
    // Directories changed within a second of a walk (here: the root, by `.code-intel/` and the
    // files just written) are not trusted by its stamp: the next lookup walks again once.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(defs("in_sub"), ["sub/a.rs"]);
    let stamped = std::fs::metadata(&stamp).unwrap().modified().unwrap();
    assert_eq!(defs("in_sub"), ["sub/a.rs"]);
    assert_eq!(std::fs::metadata(&stamp).unwrap().modified().unwrap(), stamped, "fresh: no walk, no new stamp");

    // A new file in a directory.
    std::fs::write(root.join("sub/b.rs"), "fn in_sub() {}\n").unwrap();
    assert_eq!(defs("in_sub"), ["sub/a.rs", "sub/b.rs"]);
    // A file edited in place.
    std::fs::write(root.join("sub/a.rs"), "fn renamed() {}\n").unwrap();
    assert_eq!(defs("in_sub"), ["sub/b.rs"]);
    // An ignore rule.
    std::fs::write(root.join("sub/.gitignore"), "b.rs\n").unwrap();
    assert_eq!(defs("in_sub"), Vec::<String>::new());
    // The project's config.
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(root.join(".code-intel/config.json"), r#"{"exclude_patterns": ["sub/**"]}"#).unwrap();
    assert_eq!(defs("renamed"), Vec::<String>::new());
    std::fs::remove_file(root.join(".code-intel/config.json")).unwrap();
    assert_eq!(defs("renamed"), ["sub/a.rs"]);
}

/// analyze_impact finds the files that import a target's module through the index's import
/// words (without decoding every file), the same with and without the index.
#[test]
fn impact_finds_importers_through_the_index() {
    use code_intel_session::tools::impact::{AnalyzeImpactParams, TargetFiles, analyze_impact};
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    // A file that imports the module but uses none of its names.
    std::fs::write(root.join("src/only_imports.py"), "import auth\n\nVALUE = 1\n").unwrap();
    let run = |ws: &Workspace| {
        let p =
            AnalyzeImpactParams { target_files: Some(TargetFiles::One("src/auth.py".into())), ..Default::default() };
        let out = analyze_impact(ws, p).unwrap();
        out.must_verify.iter().map(|e| (e.file.clone(), e.reason.clone())).collect::<Vec<_>>()
    };
    let before = run(&Workspace::open(root, false).unwrap());
    let ws = Workspace::open(root, false).unwrap();
    ws.index_now(false);
    let after = run(&ws);
    assert_eq!(before, after);
    let only = after.iter().find(|(f, _)| f == "src/only_imports.py").expect("the importer is listed");
    assert!(only.1.contains("imports auth"), "{only:?}");
}

/// analyze_impact with `symbols` follows those symbols only: a file that uses another function
/// of the same target, or only imports its module, is not in must_verify.
#[test]
fn impact_follows_the_named_symbols() {
    use code_intel_session::tools::impact::{AnalyzeImpactParams, TargetFiles, analyze_impact};
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::write(root.join("src/only_imports.py"), "import auth\n\nVALUE = 1\n").unwrap();
    std::fs::write(
        root.join("src/checks.py"),
        "from auth import validate_token\n\n\ndef ok(u):\n    return validate_token(u)\n",
    )
    .unwrap();
    let ws = Workspace::open(root, false).unwrap();
    let run = |symbols: Option<Vec<&str>>| {
        let p = AnalyzeImpactParams {
            target_files: Some(TargetFiles::One("src/auth.py".into())),
            symbols: symbols.map(|v| v.into_iter().map(str::to_owned).collect()),
            ..Default::default()
        };
        analyze_impact(&ws, p).unwrap()
    };
    let files = |out: &code_intel_session::tools::impact::AnalyzeImpactOutput| {
        out.must_verify.iter().map(|e| e.file.clone()).collect::<Vec<_>>()
    };
    let whole = run(None);
    assert_eq!(files(&whole), ["src/app.py", "src/checks.py", "src/only_imports.py"], "{whole:?}");
    let login = run(Some(vec!["login()"]));
    assert_eq!(files(&login), ["src/app.py"], "{login:?}");
    assert_eq!(login.targets[0].symbols, ["login"]);
    // Nothing in auth.py calls login; refresh calls validate_token there.
    assert!(login.within_targets.is_empty(), "{login:?}");
    let other = run(Some(vec!["auth::validate_token", "Auth.no_such_name()"]));
    assert_eq!(files(&other), ["src/checks.py"], "{other:?}");
    let within = &other.within_targets;
    assert_eq!(within.len(), 1, "{within:?}");
    assert_eq!((within[0].file.as_str(), within[0].lines.as_slice()), ("src/auth.py", &[9u32][..]), "{within:?}");
    assert_eq!(within[0].reason, "uses validate_token in refresh (a target itself)");
    assert_eq!(other.summary.within_targets, 1);
    // Two targets: a use of one's symbol in the other is inside the targets too, not lost.
    let p = AnalyzeImpactParams {
        target_files: Some(TargetFiles::Many(vec!["src/auth.py".into(), "src/checks.py".into()])),
        symbols: Some(vec!["validate_token".into()]),
        ..Default::default()
    };
    let both = analyze_impact(&ws, p).unwrap();
    let files_within: Vec<&str> = both.within_targets.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(files_within, ["src/auth.py", "src/checks.py"], "{both:?}");
    assert_eq!(
        both.within_targets[1].reason, "uses validate_token in ok, top-level code (a target itself)",
        "the import is top-level code"
    );
    assert_eq!(other.symbols_not_defined, ["Auth.no_such_name()"], "named as given");
}

/// Re-exports are exports: `pub use` in Rust and `export … from` in TypeScript are listed by
/// analyze_structure as `re-export`, and a barrel file that re-exports a module is one of its
/// importers for analyze_impact.
#[test]
fn re_exports_are_exports_and_barrels_import_their_modules() {
    use code_intel_session::tools::impact::{AnalyzeImpactParams, TargetFiles, analyze_impact};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::common::git(root, &["init", "-q"]);
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "mod kebab;\npub use kebab::ToKebabCase;\npub(crate) use kebab::Helper;\n\npub fn a() {}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/index.ts"),
        "export { login } from './auth';\nexport * from './session';\nimport { x } from './x';\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/session.ts"),
        "export function refresh(token: string): string {\n  return token;\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("src/barrel.js"), "export * from './session';\n").unwrap();
    let ws = Workspace::open(root, false).unwrap();
    let outline = |file: &str| {
        analyze_structure(&ws, AnalyzeStructureParams { file_path: Some(file.into()), ..Default::default() }).unwrap()
    };
    let rust = outline("src/lib.rs");
    let names: Vec<(&str, &str)> = rust.exports.iter().map(|e| (e.kind.as_str(), e.name.as_str())).collect();
    assert_eq!(names, [("re-export", "pub use kebab::ToKebabCase;"), ("function", "a")], "pub(crate) is not an export");
    assert_eq!(rust.summary.exports, 2);
    let ts = outline("src/index.ts");
    let lines: Vec<(u32, &str)> = ts.exports.iter().map(|e| (e.line, e.kind.as_str())).collect();
    assert_eq!(lines, [(1, "re-export"), (2, "re-export")], "{:?}", ts.exports);
    ws.index_now(false);
    // `export *` names nothing of session.ts: only the re-export, as an import, reaches it.
    let p = AnalyzeImpactParams { target_files: Some(TargetFiles::One("src/session.ts".into())), ..Default::default() };
    let impact = analyze_impact(&ws, p).unwrap();
    for barrel in ["src/barrel.js", "src/index.ts"] {
        let entry =
            impact.must_verify.iter().find(|e| e.file == barrel).unwrap_or_else(|| panic!("{barrel}: {impact:?}"));
        assert_eq!(entry.reason, "imports session", "{entry:?}");
    }
}

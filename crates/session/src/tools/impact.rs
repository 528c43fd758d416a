//! `analyze_impact`: what else must be checked when the target files change.
//!
//! - `must_verify`: source files (not tests) that reference the targets' symbols or import the
//!   targets' modules, from the symbol index.
//! - `should_verify`: tests that use those symbols, and configs and docs that mention the symbols
//!   or the targets' file names, from a text search.
//! - `within_targets`: uses of those symbols inside the target files themselves, with the
//!   definitions that hold them (a same-file caller breaks as surely as one elsewhere).

use code_intel_workflow::contract::catalogue as msg;
use std::collections::{BTreeMap, BTreeSet};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::UTF8};
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::category::category;
use super::{FastPathNote, ToolResult, Workspace};
use code_intel_codebase::index::SymbolIndex;
use code_intel_codebase::index::refresh::Lookup;
use code_intel_codebase::syntax::SymbolKind;
use code_intel_codebase::walk::{self, WalkOptions};

/// Names too common to say anything about impact; they are not followed.
const COMMON_NAMES: &[&str] = &[
    "new",
    "main",
    "init",
    "__init__",
    "default",
    "from",
    "into",
    "clone",
    "fmt",
    "run",
    "get",
    "set",
    "len",
    "drop",
    "to_string",
    "toString",
    "equals",
    "hashCode",
    "test",
    "setUp",
    "tearDown",
    "constructor",
    "String",
    "Error",
];
const MAX_SYMBOLS_PER_TARGET: usize = 60;

/// One file or several.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TargetFiles {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct AnalyzeImpactParams {
    /// The files about to change, relative to the repository root.
    #[arg(skip)]
    pub target_files: Option<TargetFiles>,
    /// What the change is (echoed back).
    #[arg(long)]
    pub change_description: Option<String>,
    /// The symbols you will change (`name`, `Class.name`): only their uses are followed.
    /// Default: every name the files define for others, and imports of the files.
    #[arg(long = "symbol")]
    pub symbols: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Target {
    pub file: String,
    /// The symbols whose uses were followed.
    pub symbols: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImpactEntry {
    pub file: String,
    /// Why the file is listed.
    pub reason: String,
    /// test, config, doc or source.
    pub category: String,
    pub symbols: Vec<String>,
    /// Lines where the file touches the targets (first 20).
    pub lines: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImpactSummary {
    pub targets: usize,
    pub must_verify: usize,
    pub should_verify: usize,
    pub within_targets: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AnalyzeImpactOutput {
    pub change_description: Option<String>,
    pub targets: Vec<Target>,
    pub must_verify: Vec<ImpactEntry>,
    pub should_verify: Vec<ImpactEntry>,
    /// Uses of the followed symbols inside the target files themselves (a caller in the same
    /// file breaks as surely as one elsewhere): each target file with the definitions that hold
    /// them (`symbols`: the names used; `lines`: where).
    pub within_targets: Vec<ImpactEntry>,
    pub summary: ImpactSummary,
    /// Names given in `symbols` that no target file defines.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub symbols_not_defined: Vec<String>,
    /// Set when the answer came before the symbol index existed.
    pub fast_path: Option<FastPathNote>,
}

#[derive(Default)]
struct Acc {
    symbols: BTreeSet<String>,
    lines: BTreeSet<u32>,
    imports: BTreeSet<String>,
    /// The definitions holding the uses (within target files), or `top-level code`.
    holders: BTreeSet<String>,
}

/// The names a target file defines that other files may use: top-level callables, classes,
/// constants, types, macros and modules, not common words, at most
/// [`MAX_SYMBOLS_PER_TARGET`].
fn followed_names(index: &SymbolIndex, rel: &str) -> Vec<String> {
    let mut names: BTreeSet<String> = BTreeSet::new();
    if let Some(file) = index.file(rel) {
        let symbols = &file.outline.symbols;
        for s in symbols {
            let followed = s.kind.is_callable()
                || s.kind.is_class_like()
                || matches!(s.kind, SymbolKind::Constant | SymbolKind::Type | SymbolKind::Macro | SymbolKind::Module);
            let nested_in_callable =
                s.parent.is_some_and(|p| symbols.get(p as usize).is_some_and(|p| p.kind.is_callable()));
            if followed && !nested_in_callable && s.name.len() >= 3 && !COMMON_NAMES.contains(&s.name.as_str()) {
                names.insert(s.name.clone());
            }
        }
    }
    names.into_iter().take(MAX_SYMBOLS_PER_TARGET).collect()
}

pub fn analyze_impact(ws: &Workspace, params: AnalyzeImpactParams) -> ToolResult<AnalyzeImpactOutput> {
    let raw: Vec<String> = match params.target_files {
        Some(TargetFiles::One(f)) => vec![f],
        Some(TargetFiles::Many(v)) => v,
        None => Vec::new(),
    };
    let raw: Vec<String> = raw.into_iter().filter(|f| !f.trim().is_empty()).collect();
    if raw.is_empty() {
        return Err(ws.tool_error(&msg::NO_FILE_PATH, &[]).into());
    }
    let mut target_rels = Vec::new();
    for f in &raw {
        let abs = ws.repo.resolve(f).map_err(|e| ws.path_error(e))?;
        let rel = ws.repo.relative(&abs).unwrap_or_default();
        if !abs.is_file() {
            return Err(ws.tool_error(&msg::NOT_A_FILE, &[("path", &rel)]).into());
        }
        target_rels.push(rel);
    }

    // The symbols the agent names, by their last segment (`Auth.login()` is `login`), each with
    // the form it was given in.
    let given: Vec<(String, String)> = params
        .symbols
        .iter()
        .flatten()
        .map(|s| (short_name(s), s.trim().to_owned()))
        .filter(|(short, _)| !short.is_empty())
        .collect();
    let named: Option<BTreeSet<String>> =
        (!given.is_empty()).then(|| given.iter().map(|(short, _)| short.clone()).collect());
    // What each target defines that others may use (or, with `symbols`, those of them it
    // defines): only the targets need parsing for this.
    let targets: Vec<Target> = ws.with_index_for(&Lookup::Paths(target_rels.clone()), |index, _| {
        target_rels
            .iter()
            .map(|rel| {
                let symbols = match &named {
                    None => followed_names(index, rel),
                    Some(named) => defined_names(index, rel, named),
                };
                Target { file: rel.clone(), symbols }
            })
            .collect()
    });
    let symbols_not_defined: Vec<String> = given
        .iter()
        .filter(|(short, _)| !targets.iter().any(|t| t.symbols.contains(short)))
        .map(|(_, typed)| typed.clone())
        .collect();
    // Who uses those names, or imports the targets' modules: only files containing one of
    // them can, so before the index exists only those are parsed. Named symbols are followed
    // alone: an import of the module says nothing about them.
    let stems: Vec<String> = if named.is_some() {
        Vec::new()
    } else {
        target_rels.iter().map(|rel| module_stem(rel)).filter(|s| s.len() >= 3).collect()
    };
    let mut words: Vec<String> = targets.iter().flat_map(|t| t.symbols.iter().cloned()).chain(stems).collect();
    words.sort();
    words.dedup();
    let mut code_hits: BTreeMap<String, Acc> = BTreeMap::new();
    let mut within: BTreeMap<String, Acc> = BTreeMap::new();
    let mut fast_path = None;
    if !words.is_empty() {
        ws.with_index_for(&Lookup::Words { words, ignore_case: false }, |index, report| {
            fast_path = ws.fast_path_note(report);
            for target in &targets {
                for name in &target.symbols {
                    for u in super::references::uses(index, name, |_, _| true) {
                        let Some(meta) = index.meta(u.file) else { continue };
                        let in_target = target_rels.iter().any(|t| t == meta.rel);
                        let acc = if in_target { &mut within } else { &mut code_hits }
                            .entry(meta.rel.to_owned())
                            .or_default();
                        acc.symbols.insert(name.clone());
                        acc.lines.insert(u.line);
                        if in_target {
                            let holder = super::references::enclosing(index, u.file, u.enclosing);
                            acc.holders.insert(holder.map_or_else(|| "top-level code".to_owned(), |e| e.name));
                        }
                    }
                }
                // Imports that name the target's module (file stem), e.g. `use crate::auth`,
                // `from auth import`, `#include "auth.h"`, `require './auth'`.
                let stem = module_stem(&target.file);
                if stem.len() >= 3 && named.is_none() {
                    // The index lists, for each word, the files whose imports contain it; a stem
                    // that is not one word is looked for in every file's imports.
                    let candidates: Vec<u32> =
                        if code_intel_codebase::index::format::import_words(&stem).eq([stem.as_str()]) {
                            index.files_importing(&stem)
                        } else {
                            (0..index.file_count() as u32).collect()
                        };
                    for file in candidates.into_iter().map(|fi| index.file_at(fi)) {
                        if target_rels.iter().any(|t| t == &file.rel) {
                            continue;
                        }
                        for imp in &file.outline.imports {
                            if mentions_word(&imp.text, &stem) {
                                let acc = code_hits.entry(file.rel.clone()).or_default();
                                acc.imports.insert(stem.clone());
                                acc.lines.insert(imp.line);
                            }
                        }
                    }
                }
            }
        });
    }

    // Configs and docs are not in the symbol index: search them as text.
    let mut words: BTreeSet<String> = targets.iter().flat_map(|t| t.symbols.iter().cloned()).collect();
    for rel in target_rels.iter().filter(|_| named.is_none()) {
        if let Some(name) = rel.rsplit('/').next() {
            words.insert(name.to_owned());
        }
    }
    let text_hits = mention_search(ws, &words);
    for (rel, (found, lines)) in text_hits {
        let cat = category(&rel);
        if cat == "doc" || cat == "config" || (cat == "test" && !code_hits.contains_key(&rel)) {
            let acc = code_hits.entry(rel).or_default();
            acc.symbols.extend(found);
            acc.lines.extend(lines);
        }
    }

    let mut must_verify = Vec::new();
    let mut should_verify = Vec::new();
    for (rel, acc) in code_hits {
        if target_rels.contains(&rel) {
            continue;
        }
        let cat = category(&rel);
        let symbols: Vec<String> = acc.symbols.iter().cloned().collect();
        let mut reasons = Vec::new();
        if !symbols.is_empty() {
            let verb = if cat == "doc" || cat == "config" { "mentions" } else { "references" };
            reasons.push(format!("{verb} {}", list(&symbols)));
        }
        if !acc.imports.is_empty() {
            reasons.push(format!("imports {}", list(&acc.imports.iter().cloned().collect::<Vec<_>>())));
        }
        let entry = ImpactEntry {
            file: rel.clone(),
            reason: reasons.join("; "),
            category: cat.to_owned(),
            symbols,
            lines: acc.lines.into_iter().take(20).collect(),
        };
        if cat == "source" { must_verify.push(entry) } else { should_verify.push(entry) }
    }
    let within_targets: Vec<ImpactEntry> = within
        .into_iter()
        .map(|(rel, acc)| {
            let symbols: Vec<String> = acc.symbols.into_iter().collect();
            let holders: Vec<String> = acc.holders.into_iter().collect();
            ImpactEntry {
                reason: format!("uses {} in {} (a target itself)", list(&symbols), list(&holders)),
                category: category(&rel).to_owned(),
                file: rel,
                symbols,
                lines: acc.lines.into_iter().take(20).collect(),
            }
        })
        .collect();
    Ok(AnalyzeImpactOutput {
        change_description: params.change_description,
        summary: ImpactSummary {
            targets: targets.len(),
            must_verify: must_verify.len(),
            should_verify: should_verify.len(),
            within_targets: within_targets.len(),
        },
        targets,
        must_verify,
        should_verify,
        within_targets,
        symbols_not_defined,
        fast_path,
    })
}

/// A symbol as the agent may write it, reduced to its name: `Auth.login()`, `auth::login` and
/// `login` are `login`.
fn short_name(symbol: &str) -> String {
    let s = symbol.trim();
    let s = s.split('(').next().unwrap_or(s);
    s.rsplit(['.', ':']).next().unwrap_or("").trim().to_owned()
}

/// The names of `named` that the target file defines, at any depth.
fn defined_names(index: &SymbolIndex, rel: &str, named: &BTreeSet<String>) -> Vec<String> {
    let mut names: BTreeSet<String> = BTreeSet::new();
    if let Some(file) = index.file(rel) {
        names.extend(file.outline.symbols.iter().filter(|s| named.contains(&s.name)).map(|s| s.name.clone()));
    }
    names.into_iter().collect()
}

fn list(items: &[String]) -> String {
    const SHOWN: usize = 5;
    if items.len() <= SHOWN {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..SHOWN].join(", "), items.len() - SHOWN)
    }
}

fn module_stem(rel: &str) -> String {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let stem = name.split('.').next().unwrap_or(name);
    if matches!(stem, "mod" | "index" | "__init__" | "lib") {
        // The module is named by its directory.
        rel.rsplit('/').nth(1).unwrap_or(stem).to_owned()
    } else {
        stem.to_owned()
    }
}

fn mentions_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !is_ident(before) && !is_ident(after)
    })
}

/// Files of the test, config or doc categories that mention any of `words` as whole words:
/// file -> (words found, lines).
fn mention_search(ws: &Workspace, words: &BTreeSet<String>) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<u32>)> {
    let mut out = BTreeMap::new();
    if words.is_empty() {
        return out;
    }
    let alternation: Vec<String> = words.iter().map(|w| regex_escape(w)).collect();
    let pattern = format!(r"(?:^|[^\w])({})(?:[^\w]|$)", alternation.join("|"));
    let Ok(matcher) = RegexMatcherBuilder::new().build(&pattern) else { return out };
    let Ok(walked) = walk::walk(&ws.repo, &ws.config, ws.repo.root(), &WalkOptions::default()) else { return out };
    let found: Vec<(String, BTreeSet<String>, BTreeSet<u32>)> = walked
        .files
        .par_iter()
        .filter(|f| category(&f.rel) != "source")
        .filter_map(|f| {
            let mut searcher = SearcherBuilder::new().binary_detection(BinaryDetection::quit(b'\x00')).build();
            let mut names = BTreeSet::new();
            let mut lines = BTreeSet::new();
            // A file that cannot be read mentions nothing this lookup can show.
            let searched = searcher.search_path(
                &matcher,
                &f.abs,
                UTF8(|line, text| {
                    for w in words {
                        if mentions_word(text, w) {
                            names.insert(w.clone());
                        }
                    }
                    lines.insert(line as u32);
                    Ok(true)
                }),
            );
            if let Err(e) = searched {
                tracing::debug!("impact: cannot search {}: {e}", f.rel);
            }
            (!names.is_empty()).then(|| (f.rel.clone(), names, lines))
        })
        .collect();
    for (rel, names, lines) in found {
        out.insert(rel, (names, lines));
    }
    out
}

fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

//! The overlay answers as a rebuild would: random edits, additions, removals, touches and
//! restores, each followed by a refresh into the overlay, compared lookup by lookup with an
//! index built from nothing on the same files; now and then the overlay is compacted, or the
//! index is read back from disk, and compared again.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::refresh::refresh;
use super::{IndexedFile, SymbolIndex, compact, store};
use crate::config::Config;
use crate::lang::Lang;
use crate::repo::Repo;

const NAMES: &[&str] = &["alpha", "beta", "gamma", "delta", "omega", "parse", "render", "Widget", "Store"];

/// A small source file of random definitions calling random names.
fn random_source(rng: &mut fastrand::Rng, python: bool) -> String {
    let mut out = String::new();
    if rng.bool() {
        let word = NAMES[rng.usize(..NAMES.len())];
        out.push_str(&if python { format!("from lib import {word}\n") } else { format!("use crate::{word};\n") });
    }
    for _ in 0..rng.usize(1..5) {
        let name = NAMES[rng.usize(..NAMES.len())];
        let calls: Vec<String> =
            (0..rng.usize(0..4)).map(|_| format!("{}()", NAMES[rng.usize(..NAMES.len())])).collect();
        if python {
            out.push_str(&format!("def {name}():\n    return [{}]\n\n", calls.join(", ")));
        } else {
            out.push_str(&format!("fn {name}() {{ {}; }}\n", calls.join("; ")));
        }
    }
    out
}

/// Each write gets its own modification time, a second apart: a refresh tells files apart by
/// size and time, and two writes in one clock tick would look the same.
fn write(root: &Path, rel: &str, text: &str, clock: &mut u64) {
    let path = root.join(rel);
    std::fs::write(&path, text).unwrap();
    *clock += 1;
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000 + *clock)).unwrap();
}

/// An index of the tree built from nothing, in memory, from a walk of it.
fn rebuilt(root: &Path) -> SymbolIndex {
    let repo = Repo::at(root).unwrap();
    let walked = crate::walk::walk(&repo, &Config::default(), root, &crate::walk::WalkOptions::default()).unwrap();
    let mut files = Vec::new();
    for f in walked.files {
        let Some(lang) = Lang::detect(f.rel.as_ref()) else { continue };
        let bytes = std::fs::read(&f.abs).unwrap();
        files.push(IndexedFile {
            size: bytes.len() as u64,
            mtime_ns: f.mtime_ns,
            hash: *blake3::hash(&bytes).as_bytes(),
            lang,
            syntax: crate::syntax::extract(lang, &bytes),
            rel: f.rel,
        });
    }
    SymbolIndex::from_files(files)
}

/// Every lookup of `index` against the rebuild's; the differences, or empty.
fn differences(index: &SymbolIndex, expected: &SymbolIndex) -> Vec<String> {
    let mut out = Vec::new();
    let metas = |i: &SymbolIndex| -> Vec<(String, u64, i64, [u8; 32])> {
        i.metas().map(|m| (m.rel.to_owned(), m.size, m.mtime_ns, m.hash)).collect()
    };
    if metas(index) != metas(expected) {
        out.push(format!("files: {:?} vs {:?}", metas(index), metas(expected)));
    }
    if index.symbol_count() != expected.symbol_count() {
        out.push(format!("symbol count {} vs {}", index.symbol_count(), expected.symbol_count()));
    }
    for name in NAMES.iter().chain(&["lib", "crate", "a", "E"]) {
        if index.definitions_named(name) != expected.definitions_named(name) {
            out.push(format!("definitions of {name}"));
        }
        if index.uses(name) != expected.uses(name) {
            out.push(format!("uses of {name}: {:?} vs {:?}", index.uses(name), expected.uses(name)));
        }
        if index.files_importing(name) != expected.files_importing(name) {
            out.push(format!("importers of {name}"));
        }
        let part = &name[..name.len().min(2)];
        if index.definitions_containing(part) != expected.definitions_containing(part) {
            out.push(format!("definitions containing {part}"));
        }
    }
    for (i, m) in expected.metas().enumerate() {
        let (a, b) = (index.file(m.rel), expected.file_at(i as u32));
        if a.map(|f| (&f.outline.symbols, &f.outline.imports)) != Some((&b.outline.symbols, &b.outline.imports)) {
            out.push(format!("outline of {}", m.rel));
        }
        for s in 0..b.outline.symbols.len() as u32 {
            if index.symbol((i as u32, s)).map(|(_, s)| s) != expected.symbol((i as u32, s)).map(|(_, s)| s) {
                out.push(format!("symbol {s} of {}", m.rel));
            }
        }
    }
    if index.is_corrupt() {
        out.push("marked corrupt".into());
    }
    out
}

#[test]
fn overlay_reads_equal_a_rebuild_through_random_edits() {
    for seed in [1u64, 2, 3, 4, 5] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = Repo::at(root).unwrap();
        let config = Config::default();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut clock = 0;
        let mut present: Vec<String> = Vec::new();
        for i in 0..12 {
            let rel = format!("d{}/f{i:02}.{}", i % 3, if i % 3 == 0 { "py" } else { "rs" });
            std::fs::create_dir_all(root.join(format!("d{}", i % 3))).unwrap();
            write(root, &rel, &random_source(&mut rng, rel.ends_with(".py")), &mut clock);
            present.push(rel);
        }
        let (mut index, _) = refresh(&repo, &config, SymbolIndex::default(), true);
        // The base's text of each file, to restore it.
        let base_text: std::collections::HashMap<String, String> =
            present.iter().map(|rel| (rel.clone(), std::fs::read_to_string(root.join(rel)).unwrap())).collect();
        let mut next = 12;
        for step in 0..60 {
            match rng.usize(..7) {
                0 | 1 if !present.is_empty() => {
                    let rel = present[rng.usize(..present.len())].clone();
                    write(root, &rel, &random_source(&mut rng, rel.ends_with(".py")), &mut clock);
                }
                2 => {
                    // Sometimes in a directory of its own, new or nested.
                    let dir = match rng.usize(..4) {
                        0 => format!("n{next}"),
                        1 => format!("d{}/sub{}", rng.usize(..3), rng.usize(..2)),
                        _ => format!("d{}", rng.usize(..3)),
                    };
                    std::fs::create_dir_all(root.join(&dir)).unwrap();
                    let rel = format!("{dir}/f{next:02}.{}", if rng.bool() { "py" } else { "rs" });
                    next += 1;
                    write(root, &rel, &random_source(&mut rng, rel.ends_with(".py")), &mut clock);
                    present.push(rel);
                }
                3 if present.len() > 2 => {
                    let rel = present.swap_remove(rng.usize(..present.len()));
                    std::fs::remove_file(root.join(rel)).unwrap();
                }
                3 => {
                    // A whole directory goes.
                    let dir = format!("d{}", rng.usize(..3));
                    let _ = std::fs::remove_dir_all(root.join(&dir));
                    present.retain(|rel| !rel.starts_with(&format!("{dir}/")));
                }
                6 => {
                    // An ignore file hides one of them (or, rewritten, shows it again).
                    let hidden = present.get(rng.usize(..present.len().max(1))).cloned().unwrap_or_default();
                    write(root, ".ignore", &format!("{hidden}\n"), &mut clock);
                }
                4 if !present.is_empty() => {
                    // Touched: same content, new time.
                    let rel = present[rng.usize(..present.len())].clone();
                    let text = std::fs::read_to_string(root.join(&rel)).unwrap();
                    write(root, &rel, &text, &mut clock);
                }
                _ => {
                    // Restored to the base's content (an edit undone, a file brought back).
                    let mut rels: Vec<&String> = base_text.keys().collect();
                    rels.sort();
                    let rel = rels[rng.usize(..rels.len())].clone();
                    if let Some(parent) = root.join(&rel).parent() {
                        std::fs::create_dir_all(parent).unwrap();
                    }
                    write(root, &rel, &base_text[&rel], &mut clock);
                    if !present.contains(&rel) {
                        present.push(rel);
                    }
                }
            }
            let (refreshed, report) = refresh(&repo, &config, index, false);
            index = refreshed;
            let expected = rebuilt(root);
            let diff = differences(&index, &expected);
            assert!(diff.is_empty(), "seed {seed} step {step} ({report:?}):\n{}", diff.join("\n"));
            // Read back from disk: the same view.
            let loaded = store::load(root).unwrap();
            assert_eq!(loaded.checksum(), index.checksum());
            let diff = differences(&loaded, &expected);
            assert!(diff.is_empty(), "seed {seed} step {step}, loaded:\n{}", diff.join("\n"));
            if step % 17 == 16 {
                index = compact::compact(root, &index).unwrap();
                assert_eq!(index.overlay_size(), (0, 0));
                assert!(!store::overlay_path(root).exists());
                let diff = differences(&index, &expected);
                assert!(diff.is_empty(), "seed {seed} step {step}, compacted:\n{}", diff.join("\n"));
            }
        }
        // Everything back to the base: the overlay says nothing but removals and touches.
        assert!(index.overlay_size().0 > 0 || !store::overlay_path(root).exists());
    }
}

#[test]
fn an_edit_writes_only_the_overlay_and_undoing_it_costs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let repo = Repo::at(root).unwrap();
    let config = Config::default();
    let mut clock = 0;
    for i in 0..5 {
        write(root, &format!("m{i}.rs"), &format!("fn f{i}() {{ g(); }}\n"), &mut clock);
    }
    let (index, report) = refresh(&repo, &config, SymbolIndex::default(), true);
    // Built from two segments (four files each here), merged into the base, then removed.
    assert_eq!(report.parsed, 5);
    let mut left: Vec<String> = std::fs::read_dir(store::index_dir(root))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, [".gitignore", "symbols.idx", "walk.stamp"]);
    assert!(differences(&index, &rebuilt(root)).is_empty());
    let base = std::fs::read(store::index_path(root)).unwrap();
    let original = std::fs::read_to_string(root.join("m2.rs")).unwrap();
    write(root, "m2.rs", "fn f2() { h(); }\n", &mut clock);
    let (index, report) = refresh(&repo, &config, index, false);
    assert_eq!((report.parsed, report.changed), (1, true));
    assert_eq!(std::fs::read(store::index_path(root)).unwrap(), base, "the base is not rewritten");
    assert_eq!(index.overlay_size().0, 1);
    assert_eq!(index.uses("h").len(), 1);
    assert_eq!(index.uses("g").len(), 4);
    // Undone: the base's file again, nothing parsed, only its new time remembered.
    write(root, "m2.rs", &original, &mut clock);
    let (index, report) = refresh(&repo, &config, index, false);
    assert_eq!(report.parsed, 0);
    assert_eq!(index.uses("g").len(), 5);
    assert!(index.uses("h").is_empty());
    assert_eq!(index.parts().1.map(|o| (o.opened.records.len(), o.meta.touched.len())), Some((0, 1)));
    // `index` (whole) folds it in: one base, no overlay.
    let (index, _) = refresh(&repo, &config, index, true);
    assert_eq!(index.overlay_size(), (0, 0));
    assert!(!store::overlay_path(root).exists());
    assert!(differences(&index, &rebuilt(root)).is_empty());
}

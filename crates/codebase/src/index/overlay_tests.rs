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
    rebuilt_with(root, &Config::default())
}

fn rebuilt_with(root: &Path, config: &Config) -> SymbolIndex {
    let repo = Repo::at(root).unwrap();
    let walked = crate::walk::walk(&repo, config, root, &crate::walk::WalkOptions::default()).unwrap();
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
        // Small enough for a file to grow past it.
        let config = Config { max_file_size: 4096, ..Config::default() };
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
            match rng.usize(..8) {
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
                    // The directory may be gone already (removed by an earlier step).
                    std::fs::remove_dir_all(root.join(&dir))
                        .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
                        .unwrap();
                    present.retain(|rel| !rel.starts_with(&format!("{dir}/")));
                }
                6 => {
                    // An ignore file hides one of them (or, rewritten, shows it again).
                    let hidden = present.get(rng.usize(..present.len().max(1))).cloned().unwrap_or_default();
                    write(root, ".ignore", &format!("{hidden}\n"), &mut clock);
                }
                7 if !present.is_empty() => {
                    // Grown past the size limit (or, written again later, back under it).
                    let rel = present[rng.usize(..present.len())].clone();
                    let text = format!("{}{}", random_source(&mut rng, rel.ends_with(".py")), "#".repeat(5000));
                    write(root, &rel, &text, &mut clock);
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
            let expected = rebuilt_with(root, &config);
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

/// Sets every directory's time (the root's included) ten seconds back, so the next stamp
/// trusts them all and a refresh lists only the directories changed after.
fn age_dirs(root: &Path) {
    let old = SystemTime::now() - Duration::from_secs(10);
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            }
        }
        std::fs::File::open(&dir).unwrap().set_modified(old).unwrap();
    }
}

/// A refresh that looks only at what changed keeps the full walk's rules: a directory that
/// becomes another repository leaves the index (and comes back when it stops being one),
/// symbolic links are not followed, an ignore file in a directory that was removed and made
/// again is followed and its edits seen, and `.git/info/exclude` rules.
#[test]
fn a_refresh_of_what_changed_keeps_the_walks_rules() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let repo = Repo::at(root).unwrap();
    let config = Config::default();
    let mut clock = 0;
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    for (rel, text) in [
        ("src/a.rs", "fn alpha() { beta(); }\n"),
        ("lib/b.rs", "fn beta() { gamma(); }\n"),
        ("vendor/c.rs", "fn gamma() {}\n"),
        ("other.rs", "fn delta() { alpha(); }\n"),
        ("deep/sub/d.rs", "fn omega() {}\n"),
    ] {
        std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
        write(root, rel, text, &mut clock);
    }
    let (mut index, _) = refresh(&repo, &config, SymbolIndex::default(), true);
    age_dirs(root);
    // `trusted`: the directories are aged before the refresh (every one of them is listed, and
    // the new ones are stamped as trusted), not after.
    let step_with = |what: &str, index: SymbolIndex, trusted: bool| -> SymbolIndex {
        if trusted {
            age_dirs(root);
        }
        let (index, report) = refresh(&repo, &config, index, false);
        let expected = rebuilt(root);
        let diff = differences(&index, &expected);
        assert!(diff.is_empty(), "{what} ({report:?}):\n{}", diff.join("\n"));
        let diff = differences(&store::load(root).unwrap(), &expected);
        assert!(diff.is_empty(), "{what}, read back:\n{}", diff.join("\n"));
        // The stamp taken now trusts the directories: the next step lists only what it changes.
        if !trusted {
            age_dirs(root);
        }
        index
    };
    let step = |what: &str, index: SymbolIndex| step_with(what, index, false);
    index = step("restamped", index);
    assert_eq!(index.file_count(), 5);

    std::fs::create_dir(root.join("vendor/.git")).unwrap();
    index = step("vendor became another repository", index);
    assert!(index.file("vendor/c.rs").is_none());
    std::fs::remove_dir(root.join("vendor/.git")).unwrap();
    index = step("vendor is ours again", index);
    assert!(index.file("vendor/c.rs").is_some());

    std::fs::remove_file(root.join("lib/b.rs")).unwrap();
    std::os::unix::fs::symlink(root.join("src/a.rs"), root.join("lib/b.rs")).unwrap();
    index = step("a file replaced by a link", index);
    assert!(index.file("lib/b.rs").is_none());

    std::fs::rename(root.join("vendor"), root.join("vendor2")).unwrap();
    std::os::unix::fs::symlink(root.join("vendor2"), root.join("vendor")).unwrap();
    index = step("a directory replaced by a link", index);
    assert!(index.file("vendor/c.rs").is_none());
    assert!(index.file("vendor2/c.rs").is_some());

    std::fs::remove_dir_all(root.join("src")).unwrap();
    index = step("a directory removed", index);
    std::fs::create_dir(root.join("src")).unwrap();
    write(root, "src/.gitignore", "x.rs\n", &mut clock);
    write(root, "src/x.rs", "fn hidden() {}\n", &mut clock);
    write(root, "src/a.rs", "fn alpha() {}\n", &mut clock);
    index = step_with("the directory made again, with an ignore file", index, true);
    assert!(index.file("src/x.rs").is_none());
    write(root, "src/.gitignore", "", &mut clock);
    index = step("its ignore file edited", index);
    assert!(index.file("src/x.rs").is_some());

    write(root, ".git/info/exclude", "other.rs\n", &mut clock);
    index = step("info/exclude edited", index);
    assert!(index.file("other.rs").is_none());

    // A directory removed and made again as another repository, with a subdirectory it had:
    // nothing under it is this repository's, the subdirectory included.
    std::fs::remove_dir_all(root.join("deep")).unwrap();
    std::fs::create_dir_all(root.join("deep/.git")).unwrap();
    std::fs::create_dir_all(root.join("deep/sub")).unwrap();
    write(root, "deep/sub/new.rs", "fn fresh() {}\n", &mut clock);
    index = step("a directory made again as another repository", index);
    assert!(index.file("deep/sub/new.rs").is_none() && index.file("deep/sub/d.rs").is_none());
}

/// A base replaced by another process (a compaction, `git code-intel index`) under a holder of
/// the old one: the holder's next refresh takes the stored index, so the overlay it writes
/// applies to the base on disk (a reader of the disk sees the edit, and the overlay stays
/// small) instead of naming a base that no longer exists.
#[test]
fn a_refresh_follows_a_base_another_process_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let repo = Repo::at(root).unwrap();
    let config = Config::default();
    let mut clock = 0;
    for i in 0..6 {
        write(root, &format!("m{i}.rs"), &format!("fn f{i}() {{ g(); }}\n"), &mut clock);
    }
    let (held, _) = refresh(&repo, &config, SymbolIndex::default(), true);
    write(root, "m1.rs", "fn f1() { h(); }\n", &mut clock);
    let (held, _) = refresh(&repo, &config, held, false);
    assert_eq!(held.overlay_size().0, 1);
    // Another process folds the overlay in (and writes its own stamp).
    let other = store::load(root).unwrap();
    let (replaced, _) = refresh(&repo, &config, other, true);
    assert_ne!(replaced.checksum(), held.checksum());
    write(root, "m2.rs", "fn f2() { k(); }\n", &mut clock);
    let (held, report) = refresh(&repo, &config, held, false);
    assert_eq!(report.parsed, 1);
    let loaded = store::load(root).unwrap();
    assert_eq!(loaded.checksum(), held.checksum(), "the overlay applies to the stored base");
    assert_eq!(held.overlay_size().0, 1, "only the new edit is in the overlay");
    assert!(differences(&loaded, &rebuilt(root)).is_empty());
    assert_eq!(loaded.uses("k").len(), 1);
}

/// The compaction lock is held by one holder at a time, threads of one process included, and
/// freed when its holder lets go.
#[test]
fn the_compaction_lock_has_one_holder() {
    let dir = tempfile::tempdir().unwrap();
    let first = compact::Lock::take(dir.path()).expect("free");
    assert!(compact::Lock::take(dir.path()).is_none());
    let other = std::thread::scope(|s| s.spawn(|| compact::Lock::take(dir.path()).is_some()).join().unwrap());
    assert!(!other);
    drop(first);
    assert!(compact::Lock::take(dir.path()).is_some());
}

//! Retrieval quality of the Forest on a real codebase no one here wrote: the `similar` crate
//! (a dependency, so its source is in the cargo registry after any build), copied into a
//! temporary git repository and indexed with the real model.
//!
//! A small labelled set of queries → the symbols that answer them, half in plain language and
//! half as identifiers. The test reports recall@5 for the dense ranking alone, the lexical
//! (BM25) ranking alone and the hybrid fusion, and requires hybrid to beat both.
//!
//! The second test is the floor of the retrieval benchmark (benches/retrieval.rs, issue 26):
//! its CodeSearchNet-style protocol on a small part of CPython's standard library, where the
//! shipped ranking's MRR@10 must stay within 0.03 of what it measured when it shipped.
//!
//! Run with `--nocapture` to see the table.

use std::path::{Path, PathBuf};

use code_intel_codebase::config::Config;
use code_intel_codebase::repo::Repo;
use code_intel_semantic::embed::{DEFAULT_MODEL, FP32_MODEL};
use code_intel_semantic::forest::{DEFAULT_FUSION, ForestHit};
use code_intel_semantic::service::Semantic;

/// (query, file, symbols that answer it: the last segment of the chunk's symbol path)
const LABELLED: &[(&str, &str, &[&str])] = &[
    // Plain language.
    ("what fraction of two sequences matches, as a number from zero to one", "", &["ratio", "diff_ratio"]),
    ("how many unchanged lines to keep around each change in the unified output", "src/udiff.rs", &["context_radius"]),
    (
        "dynamic programming table for the longest common subsequence",
        "src/algorithms/lcs.rs",
        &["make_table", "make_table_incremental"],
    ),
    ("binary search for the first position whose value is not smaller", "src/algorithms/hunt.rs", &["lower_bound"]),
    ("combine our edits and their edits against the common ancestor", "src/merge.rs", &["merge_lines", "from_lines"]),
    ("how many unresolved regions remain after merging", "src/merge.rs", &["conflict_count"]),
    ("split the operations into groups separated by long equal stretches", "src/common.rs", &["group_diff_ops"]),
    ("stop computing the difference after a time limit", "src/text/mod.rs", &["deadline", "timeout"]),
    ("does the merge result contain any conflict", "src/merge.rs", &["is_conflicted", "is_conflict"]),
    ("compare two strings character by character", "", &["diff_chars", "from_chars"]),
    // Identifiers.
    ("lower_bound", "src/algorithms/hunt.rs", &["lower_bound"]),
    ("capture_diff_slices_by_key", "src/common.rs", &["capture_diff_slices_by_key"]),
    ("upper_seq_ratio", "src/text/utils.rs", &["upper_seq_ratio"]),
    ("append_zeroed_row", "src/algorithms/lcs.rs", &["append_zeroed_row"]),
    ("missing_newline_hint", "src/udiff.rs", &["missing_newline_hint"]),
    ("emit_anchored_script", "src/algorithms/hunt.rs", &["emit_anchored_script"]),
    ("find_anchor_indexed", "src/algorithms/histogram.rs", &["find_anchor_indexed"]),
    ("discard_confusing_record", "src/algorithms/preflight.rs", &["discard_confusing_record"]),
];

/// The `similar` source the lock file names, in the cargo registry.
fn similar_source() -> PathBuf {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock")).unwrap();
    let mut lines = lock.lines();
    let mut version = None;
    while let Some(line) = lines.next() {
        if line == "name = \"similar\"" {
            version = lines.next().and_then(|v| v.strip_prefix("version = \"")).map(|v| v.trim_end_matches('"'));
            break;
        }
    }
    let version = version.expect("similar in Cargo.lock");
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    for registry in std::fs::read_dir(cargo_home.join("registry/src")).expect("cargo registry sources") {
        let dir = registry.unwrap().path().join(format!("similar-{version}"));
        if dir.is_dir() {
            return dir;
        }
    }
    panic!("similar-{version} is not in {}/registry/src (run cargo build first)", cargo_home.display());
}

fn answers(hit: &ForestHit, file: &str, symbols: &[&str]) -> bool {
    let last = hit.symbol.rsplit([':', '.']).next().unwrap_or("");
    (file.is_empty() || hit.file == file) && symbols.contains(&last)
}

/// recall@5 of the dense, lexical and hybrid rankings with the model called `model`.
fn recall_at_5(model: &str) -> [f64; 3] {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::common::copy_dir(&similar_source().join("src"), &root.join("src"));
    crate::common::git(root, &["init", "-q"]);
    let config = Config { embedding_model: model.into(), ..Config::default() };
    let repo = Repo::at(root).unwrap();
    let semantic = Semantic::new(root, &config);
    let report = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).expect("sync (is the model installed?)");
    assert!(report.chunks > 300, "{report:?}");
    let loaded = semantic.loaded().unwrap();
    let forest = loaded.forest.read().unwrap();

    let k = 5;
    let mut found = [0usize; 3]; // dense, lexical, hybrid
    eprintln!("{model}:\n{:<72} dense lexical hybrid", "query");
    for (query, file, symbols) in LABELLED {
        let vector = semantic.embed_one(query).unwrap();
        let rankings = [
            forest.search_dense(&vector, k).unwrap(),
            forest.search_lexical(query, k),
            forest.search(&vector, query, k, DEFAULT_FUSION).unwrap(),
        ];
        let hit: Vec<bool> = rankings.iter().map(|r| r.iter().any(|h| answers(h, file, symbols))).collect();
        for (n, h) in found.iter_mut().zip(&hit) {
            *n += usize::from(*h);
        }
        let mark = |b: bool| if b { "yes" } else { "-" };
        eprintln!("{query:<72} {:<5} {:<7} {}", mark(hit[0]), mark(hit[1]), mark(hit[2]));
    }
    let n = LABELLED.len() as f64;
    let recall = found.map(|f| f as f64 / n);
    eprintln!(
        "{model}: recall@{k} over {} queries, {} chunks: dense {:.2}, lexical {:.2}, hybrid {:.2}",
        LABELLED.len(),
        report.chunks,
        recall[0],
        recall[1],
        recall[2]
    );
    recall
}

#[test]
fn hybrid_beats_dense_and_lexical_on_the_similar_crate() {
    if std::env::var_os("CODE_INTEL_MODEL_DIR").is_some_and(|d| !d.is_empty()) {
        panic!("unset CODE_INTEL_MODEL_DIR: this test picks the models by name");
    }
    let int8 = recall_at_5(DEFAULT_MODEL);
    let fp32 = recall_at_5(FP32_MODEL);
    // The default beats both halves; with 18 queries one query is 0.056, and the fp32 model's
    // dense ranking alone ties the fusion here, so it must only not fall below either.
    assert!(int8[2] > int8[0] && int8[2] > int8[1], "hybrid must beat both: {int8:?}");
    assert!(fp32[2] >= fp32[0] && fp32[2] >= fp32[1], "hybrid must not fall below either: {fp32:?}");
    // int8 against fp32 is held on the 120 queries of the small benchmark set (below): here
    // one query is 0.056, more than the 0.02 allowed.
}

#[path = "../../benches/retrieval_eval.rs"]
#[allow(dead_code)]
mod retrieval_eval;

/// The small set: seed and size.
const SMALL_SEED: u32 = 26;
const SMALL_QUERIES: usize = 120;
/// MRR@10 of the shipped ranking (the default model, weighted fusion) on the small set when it
/// shipped, measured by this test; the test fails 0.03 below it.
const SHIPPED_MRR: f64 = 0.608;
/// The Python whose standard library it was measured on: the queries are drawn by file and line,
/// so another release's sources draw another set, and the floor holds only for this one.
const MEASURED_ON_PYTHON: &str = "3.11.7";

/// MRR@10 and recall@5 of the shipped, dense and lexical rankings with `model` on the small set
/// in `dir` (its `src` copied into a fresh repository).
fn small_set_measures(dir: &Path, queries: &[retrieval_eval::Query], model: &str) -> [retrieval_eval::Measures; 3] {
    let root = dir.join(format!("repo-{}", model.to_lowercase()));
    crate::common::copy_dir(&dir.join("src"), &root.join("src"));
    crate::common::git(&root, &["init", "-q"]);
    let config = Config { embedding_model: model.into(), ..Config::default() };
    let repo = Repo::at(&root).unwrap();
    let semantic = Semantic::new(&root, &config);
    let report = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).expect("sync (is the model installed?)");
    let loaded = semantic.loaded().unwrap();
    let forest = loaded.forest.read().unwrap();
    let mut ranks = [Vec::new(), Vec::new(), Vec::new()]; // shipped, dense, lexical
    for q in queries {
        let vector = semantic.embed_one(&q.query).unwrap();
        ranks[0].push(retrieval_eval::rank_of(&forest.search(&vector, &q.query, 10, DEFAULT_FUSION).unwrap(), q, 10));
        ranks[1].push(retrieval_eval::rank_of(&forest.search_dense(&vector, 10).unwrap(), q, 10));
        ranks[2].push(retrieval_eval::rank_of(&forest.search_lexical(&q.query, 10), q, 10));
    }
    let measures = ranks.map(|r| retrieval_eval::measures(&r));
    eprintln!(
        "{model}, small set: {} queries, {} chunks; MRR@10 (recall@5) shipped {:.3} ({:.3}), dense {:.3} ({:.3}), BM25 {:.3} ({:.3})",
        queries.len(),
        report.chunks,
        measures[0].mrr10,
        measures[0].r5,
        measures[1].mrr10,
        measures[1].r5,
        measures[2].mrr10,
        measures[2].r5
    );
    measures
}

#[test]
fn the_shipped_ranking_keeps_its_mrr_on_the_small_benchmark_set_and_int8_its_recall() {
    if std::env::var_os("CODE_INTEL_MODEL_DIR").is_some_and(|d| !d.is_empty()) {
        panic!("unset CODE_INTEL_MODEL_DIR: this test picks the models by name");
    }
    let dir = tempfile::tempdir().unwrap();
    let queries =
        retrieval_eval::build_set(dir.path(), SMALL_SEED, SMALL_QUERIES, retrieval_eval::SMALL_MODULES).unwrap();
    assert!(queries.len() >= 100, "the small set has {} queries", queries.len());
    let int8 = small_set_measures(dir.path(), &queries, DEFAULT_MODEL);
    let [shipped, _, lexical] = int8;
    let python = retrieval_eval::python_version();
    if python == MEASURED_ON_PYTHON {
        assert!(
            shipped.mrr10 + 0.03 >= SHIPPED_MRR,
            "MRR@10 {:.3} is more than 0.03 below the shipped {SHIPPED_MRR:.3}",
            shipped.mrr10
        );
    } else {
        eprintln!("python {python}: not the {MEASURED_ON_PYTHON} the floor was measured on, so it is not applied");
    }
    // On 120 queries the fusion and the model alone are within a query or two of each other
    // (0.608 and 0.610 when this shipped; on the benchmark's 400, 0.468 and 0.434); BM25 is
    // far below both.
    assert!(shipped.mrr10 > lexical.mrr10 + 0.1, "the fusion must stay well above BM25 alone");
    // The rule that made int8 the default (issue 13), on 120 queries: the served ranking's
    // recall@5 no more than 0.02 below fp32's. (The dense half alone can lose a few queries
    // here, 0.767 against 0.808 when this shipped; on the benchmark's 400 queries int8 holds it
    // too: 0.600 against 0.593, and the served ranking 0.625 against 0.630.)
    let fp32 = small_set_measures(dir.path(), &queries, FP32_MODEL);
    assert!(int8[0].r5 + 0.02 >= fp32[0].r5, "int8 recall@5 {:.3} against fp32 {:.3}", int8[0].r5, fp32[0].r5);
}

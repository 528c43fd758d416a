//! Layer 2: the design documents DOCUMENT_RESEARCH must read. Candidates are the files under
//! `doc_research.docs_path` that match `document_search.include_patterns` and none of its
//! `exclude_patterns` (the walk's own rules apply too: `.gitignore`, hidden files, size limit).
//! Each is cut into sections at its Markdown headings; BM25 ranks the sections against the
//! session's request (a heading counts twice, the file name once), and a document scores as its
//! best section. `must_read` holds the best documents: at most [`MAX_MUST_READ`], each scoring
//! at least half the best, with their matching sections. With a model, the sections are also
//! embedded and a document scores as its closest section too; see [`research`].

use globset::{Glob, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Serialize;

use super::ProjectContext;
use code_intel_codebase::config::Config;
use code_intel_codebase::repo::Repo;
use code_intel_semantic::Bm25;

/// Documents named in `must_read` at most.
pub const MAX_MUST_READ: usize = 3;
/// Other candidates named by path at most (the count is always given).
pub const MAX_OTHERS: usize = 20;
/// Where the procedure files for the reading live.
pub const PROMPTS_DIR: &str = ".code-intel/doc_research";
/// Sections shown per document at most.
const MAX_SECTIONS: usize = 3;
/// A document is named when it scores at least this share of the best one.
const SHARE_OF_BEST: f32 = 0.5;

/// Words too common to tell documents apart.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "if", "in",
    "into", "is", "it", "its", "make", "of", "on", "or", "so", "that", "the", "their", "then", "there", "this", "to",
    "we", "what", "when", "where", "which", "why", "with", "you", "should", "would", "could", "please", "add", "use",
    "new", "all", "not", "no",
];

/// One section of a document: its heading and line range (1-based, inclusive).
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Section {
    pub heading: String,
    pub start_line: u32,
    pub end_line: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MustRead {
    /// Repository-relative path.
    pub path: String,
    /// The sections that match the request, in file order.
    pub sections: Vec<Section>,
    /// BM25 score of its best section.
    pub score: f32,
}

/// What DOCUMENT_RESEARCH is given to read.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct DocumentResearch {
    /// The documents to read first, best first.
    pub must_read: Vec<MustRead>,
    /// Documents found under `doc_research.docs_path` that match `document_search`.
    pub candidates: usize,
    /// The other candidates by path (at most 20), for reading beyond must_read.
    pub others: Vec<String>,
    /// Where they were looked for.
    pub docs_path: Vec<String>,
    /// The procedure files (`doc_research.default_prompts`) that exist, for whoever reads.
    pub prompts: Vec<String>,
    /// What to do when must_read is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The candidate documents' repository-relative paths, sorted.
pub fn candidates(repo: &Repo, config: &Config, cx: &ProjectContext) -> Vec<String> {
    let include = globs(&cx.include_patterns);
    let exclude = globs(&cx.exclude_patterns);
    let mut out = Vec::new();
    for dir in &cx.docs_path {
        let dir = dir.trim().trim_start_matches("./").trim_end_matches('/');
        let start = if dir.is_empty() || dir == "." { repo.root().to_path_buf() } else { repo.root().join(dir) };
        // A docs_path that leaves the repository, or does not exist, names no document.
        let Ok(abs) = repo.resolve(&start.to_string_lossy()) else { continue };
        let Ok(walked) =
            code_intel_codebase::walk::walk(repo, config, &abs, &code_intel_codebase::walk::WalkOptions::default())
        else {
            continue;
        };
        for f in walked.files {
            let named = abs.is_file();
            if (named || include.as_ref().is_none_or(|g| g.is_match(&f.rel)))
                && !exclude.as_ref().is_some_and(|g| g.is_match(&f.rel))
            {
                out.push(f.rel);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn globs(patterns: &[String]) -> Option<GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // A pattern that does not compile matches nothing rather than stopping the session.
        if let Ok(g) = Glob::new(p.trim()) {
            b.add(g);
        }
    }
    b.build().ok()
}

/// A document's sections: split at ATX headings (`#` … `######`) outside fenced code blocks;
/// the text before the first heading is a section named after the file.
pub fn sections(rel: &str, text: &str) -> Vec<(Section, String)> {
    let name = rel.rsplit('/').next().unwrap_or(rel).to_owned();
    let mut out: Vec<(Section, String)> = Vec::new();
    let mut current = (Section { heading: name, start_line: 1, end_line: 0 }, String::new());
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i as u32 + 1;
        let trimmed = line.trim_start();
        let heading = fence.is_none()
            && trimmed.starts_with('#')
            && trimmed.trim_start_matches('#').starts_with([' ', '\t'])
            && trimmed.len() - trimmed.trim_start_matches('#').len() <= 6;
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
        } else if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = Some(&trimmed[..3]);
        }
        if heading {
            if current.0.end_line > 0 || !current.1.trim().is_empty() {
                out.push(current);
            }
            let title = trimmed.trim_start_matches('#').trim().trim_end_matches('#').trim().to_owned();
            current = (Section { heading: title, start_line: n, end_line: n }, String::new());
        } else {
            current.0.end_line = n;
            current.1.push_str(line);
            current.1.push('\n');
        }
    }
    if current.0.end_line > 0 || !current.1.trim().is_empty() {
        out.push(current);
    }
    out
}

/// The request's words that tell documents apart.
fn query_text(query: &str) -> String {
    code_intel_semantic::terms(query)
        .into_iter()
        .filter(|t| !STOPWORDS.contains(&t.as_str()) && t.len() > 1)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Vectors for texts (the query first, then sections), from the embedding model; None when
/// there is no model.
pub type Embed<'a> = &'a dyn Fn(&[String]) -> Option<Vec<Vec<f32>>>;

/// Sections embedded at most per research (the first ones of the lexically best documents):
/// a first research over many documents must stay quick.
pub const MAX_EMBEDDED_SECTIONS: usize = 128;
/// A document is named on meaning alone when its best section is at least this similar to the
/// request (cosine), and at least [`DENSE_SHARE`] of the best document's similarity.
const DENSE_FLOOR: f32 = 0.25;
const DENSE_SHARE: f32 = 0.6;
/// Reciprocal-rank fusion constant.
const RRF_K: f32 = 60.0;

/// Ranks the candidates against `query`: BM25 over their sections, fused with the sections'
/// similarity to the request when `embed` gives vectors.
pub fn research(
    repo: &Repo,
    config: &Config,
    cx: &ProjectContext,
    query: &str,
    embed: Option<Embed>,
) -> DocumentResearch {
    let found = candidates(repo, config, cx);
    let mut bm = Bm25::default();
    let mut index: Vec<(usize, Section, String)> = Vec::new(); // (document, section, text) by BM25 id
    for (d, rel) in found.iter().enumerate() {
        let Ok(text) = std::fs::read_to_string(repo.root().join(rel)) else { continue };
        let stem = rel.rsplit('/').next().unwrap_or(rel).rsplit_once('.').map_or(rel.as_str(), |(s, _)| s);
        for (section, body) in sections(rel, &text) {
            let id = index.len() as u64;
            bm.add(id, "", &format!("{stem}\n{h}\n{h}\n{body}", h = section.heading));
            // What a section is embedded as: the document, its heading and its text.
            let embedded = format!("{rel}: {}\n{body}", section.heading);
            index.push((d, section, embedded));
        }
    }
    let q = query_text(query);
    let ranked = if q.is_empty() { Vec::new() } else { bm.search(&q, index.len()) };
    // Per document: best lexical score, best dense score, and the sections that matched.
    let mut lexical: Vec<(usize, f32)> = Vec::new();
    let mut matched: Vec<Vec<usize>> = vec![Vec::new(); found.len()];
    for &(id, score) in ranked.iter().filter(|(_, s)| *s > 0.0) {
        let d = index[id as usize].0;
        if !lexical.iter().any(|(doc, _)| *doc == d) {
            lexical.push((d, score));
        }
        if matched[d].len() < MAX_SECTIONS {
            matched[d].push(id as usize);
        }
    }
    let dense = embed.and_then(|embed| dense_ranking(&index, &lexical, query, embed)).unwrap_or_default();
    let best_lexical = lexical.first().map_or(0.0, |d| d.1);
    let best_dense = dense.first().map_or(0.0, |d| d.1);
    let mut chosen: Vec<(usize, f32)> = Vec::new(); // (document, fused score)
    let rank_in = |list: &[(usize, f32)], d: usize| list.iter().position(|(doc, _)| *doc == d);
    for d in 0..found.len() {
        let by_words = lexical.iter().any(|&(doc, s)| doc == d && s >= best_lexical * SHARE_OF_BEST);
        let by_meaning = dense.iter().any(|&(doc, s, _)| doc == d && s >= DENSE_FLOOR.max(best_dense * DENSE_SHARE));
        if !(by_words || by_meaning) {
            continue;
        }
        let fused: f32 = [rank_in(&lexical, d), dense.iter().position(|(doc, _, _)| *doc == d)]
            .into_iter()
            .flatten()
            .map(|r| 1.0 / (RRF_K + r as f32 + 1.0))
            .sum();
        chosen.push((d, fused));
    }
    chosen.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let must_read: Vec<MustRead> = chosen
        .into_iter()
        .take(MAX_MUST_READ)
        .map(|(d, fused)| {
            let mut ids = matched[d].clone();
            if let Some(&(_, _, best)) = dense.iter().find(|(doc, _, _)| *doc == d)
                && !ids.contains(&best)
                && ids.len() < MAX_SECTIONS
            {
                ids.push(best);
            }
            let mut secs: Vec<Section> = ids.iter().map(|&i| index[i].1.clone()).collect();
            secs.sort_by_key(|s| s.start_line);
            MustRead { path: found[d].clone(), sections: secs, score: fused }
        })
        .collect();
    let others: Vec<String> = found
        .iter()
        .filter(|d| !must_read.iter().any(|m: &MustRead| &m.path == *d))
        .take(MAX_OTHERS)
        .cloned()
        .collect();
    let prompts = cx
        .default_prompts
        .iter()
        .map(|p| format!("{PROMPTS_DIR}/{}", p.trim_start_matches("./")))
        .filter(|p| repo.resolve(p).is_ok_and(|abs| abs.is_file()))
        .collect();
    DocumentResearch {
        must_read,
        candidates: found.len(),
        others,
        docs_path: cx.docs_path.clone(),
        prompts,
        note: None,
    }
}

/// Documents by their best section's similarity to `query`, best first: (document, cosine,
/// that section). Sections of the lexically best documents are embedded first, up to
/// [`MAX_EMBEDDED_SECTIONS`].
fn dense_ranking(
    index: &[(usize, Section, String)],
    lexical: &[(usize, f32)],
    query: &str,
    embed: Embed,
) -> Option<Vec<(usize, f32, usize)>> {
    let mut order: Vec<usize> = (0..index.len()).collect();
    let doc_rank = |d: usize| lexical.iter().position(|(doc, _)| *doc == d).unwrap_or(usize::MAX);
    order.sort_by_key(|&i| (doc_rank(index[i].0), i));
    order.truncate(MAX_EMBEDDED_SECTIONS);
    let mut texts = vec![query.to_owned()];
    texts.extend(order.iter().map(|&i| index[i].2.clone()));
    let vectors = embed(&texts)?;
    let (q, rest) = vectors.split_first()?;
    let mut best: Vec<(usize, f32, usize)> = Vec::new();
    for (&i, v) in order.iter().zip(rest) {
        let score = code_intel_semantic::embed::cosine(q, v);
        let d = index[i].0;
        match best.iter_mut().find(|(doc, _, _)| *doc == d) {
            Some(entry) if score > entry.1 => *entry = (d, score, i),
            Some(_) => {}
            None => best.push((d, score, i)),
        }
    }
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_headings_outside_code_fences() {
        let text = "intro line\n# Title\nbody\n```sh\n# not a heading\n```\n## Sub #\nmore\n#hashtag is text\n";
        let s = sections("docs/a.md", text);
        let heads: Vec<(&str, u32, u32)> =
            s.iter().map(|(s, _)| (s.heading.as_str(), s.start_line, s.end_line)).collect();
        assert_eq!(heads, vec![("a.md", 1, 1), ("Title", 2, 6), ("Sub", 7, 9)]);
    }

    #[test]
    fn common_words_do_not_count() {
        assert_eq!(query_text("Add a logout() method to the Auth class"), "logout method auth class");
    }
}

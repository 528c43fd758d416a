//! The report as Markdown: for a pull request's description or a terminal.

use super::{Ended, Provenance, Report};

/// The report in Markdown.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    putln!(o, "# Session report: {}\n", one_line(&r.query, 100));
    table_header(&mut o);
    putln!(o, "| Session | `{}` ({}) |", r.session_id, r.intent);
    putln!(o, "| Outcome | {} |", cell(&r.outcome));
    putln!(o, "| Time | {} → {} ({}) |", when(&r.created_at), when(&r.ended_at), duration(r.total_ms));
    putln!(o, "| Recorded by | {} |", provenance(r.recorded_by));
    putln!(o, "| Calls | {} |", calls_line(r));
    let c = &r.counters;
    putln!(
        o,
        "| Counters | verification failures {}, quality reverts {}, interventions {}, compactions {}{} |",
        c.verification_failure_count,
        c.quality_revert_count,
        c.intervention_count,
        r.compaction_count,
        if r.forced_completion { ", **forced completion**" } else { "" }
    );
    for u in &r.user_outcomes {
        putln!(o, "| User's verdict | **{}** {} ({}) |", cell(&u.outcome), cell(&u.note), when(&u.recorded_at));
    }
    if r.ended != Ended::Completed {
        putln!(o, "\n> **{}**", r.outcome);
    }

    putln!(o, "\n## Request\n");
    for line in r.query.lines() {
        putln!(o, "> {line}");
    }
    if let Some(frame) = &r.query_frame {
        putln!(o, "\n### QueryFrame\n\n| Slot | Value | Quote from the request |\n|---|---|---|");
        for (name, slot) in frame["slots"].as_object().into_iter().flatten() {
            let (value, quote) = match slot {
                serde_json::Value::String(s) => (s.clone(), String::new()),
                other => (text(&other["value"]), text(&other["quote"])),
            };
            let quote = if quote.is_empty() { String::new() } else { format!("“{}”", cell(&quote)) };
            putln!(o, "| {name} | {} | {quote} |", cell(&value));
        }
        for key in ["action_type", "target_symbols", "scope", "constraints"] {
            if !frame[key].is_null() {
                putln!(o, "| {key} | {} | |", cell(&text(&frame[key])));
            }
        }
    }

    putln!(o, "\n## Exploration\n");
    putln!(o, "| Phase | Time | Tool calls |\n|---|---|---|");
    for p in &r.time {
        putln!(o, "| {} | {} | {} |", p.phase, duration(p.ms), tool_counts(r, &p.phase));
    }
    if !r.explored_files.is_empty() {
        let shown: Vec<String> = r.explored_files.iter().take(40).map(|f| format!("`{f}`")).collect();
        let more = r.explored_files.len().saturating_sub(shown.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        putln!(o, "\n{} ({}): {}{more}", EXPLORED, r.explored_files.len(), shown.join(", "));
    }
    for s in r.steps.iter().filter(|s| s.phase == "EXPLORATION") {
        for f in s.payload["findings"].as_array().into_iter().flatten() {
            putln!(o, "- {}", one_line(&text(f), 400));
        }
    }
    for s in r.steps.iter().filter(|s| s.phase == "SEMANTIC") {
        putln!(o, "\nSemantic search `{}`:", one_line(&text(&s.payload["search_query"]), 200));
        for f in s.payload["search_results"].as_array().into_iter().flatten() {
            putln!(o, "- {}", one_line(&text(f), 300));
        }
    }

    if !r.hypotheses.is_empty() {
        putln!(o, "\n## Hypotheses\n");
        for h in &r.hypotheses {
            let mark = if h["result"].as_bool() == Some(true) { "confirmed" } else { "not confirmed" };
            putln!(o, "- **{mark}**: {}", one_line(&text(&h["hypothesis"]), 300));
            if !h["evidence"].is_null() {
                putln!(o, "  - evidence: {}", one_line(&text(&h["evidence"]), 400));
            }
        }
    }
    if let Some(impact) = &r.impact {
        putln!(o, "\n## Impact\n");
        nested(&mut o, impact, 0);
    }

    if !r.tasks.is_empty() {
        putln!(o, "\n## Plan and tasks\n");
        for t in &r.tasks {
            putln!(o, "### {}: {} ({})\n", t.id, one_line(&t.description, 200), t.status);
            if t.failure_count > 0 {
                putln!(o, "Failed verification {} time(s).\n", t.failure_count);
            }
            for i in &t.items {
                let done = if i.status == "done" { "x" } else { " " };
                let tail = match (&i.evidence, &i.reason) {
                    (Some(e), _) => format!(" — `{e}`"),
                    (None, Some(reason)) => format!(" — {} ({})", i.status, one_line(reason, 200)),
                    _ => format!(" — {}", i.status),
                };
                putln!(o, "- [{done}] {}{tail}", one_line(&i.item, 200));
                if let Some(q) = &i.quote {
                    if let Some(p) = &q.problem {
                        putln!(o, "  - **{}**", p);
                    }
                    let cited: Vec<&super::code::QuotedLine> = q.lines.iter().filter(|l| l.cited).collect();
                    if !cited.is_empty() {
                        putln!(o, "\n  ```{}", fence_lang(&q.path));
                        for l in cited {
                            putln!(o, "  {:>5}  {}", l.number, l.text);
                        }
                        putln!(o, "  ```\n");
                    }
                }
            }
            o.push('\n');
        }
    }

    if !r.verification.is_empty() || !r.verify_commands.is_empty() {
        putln!(o, "\n## Verification\n");
        if !r.verify_commands.is_empty() {
            putln!(
                o,
                "Commands the instructions named: {}\n",
                r.verify_commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            );
        }
        for v in &r.verification {
            let passed = if v["passed"].as_bool() == Some(true) { "passed" } else { "failed" };
            putln!(
                o,
                "- **{passed}**, as the agent reported (verifier: {}): {}",
                text(&v["verifier_used"]),
                one_line(&text(&v["details"]), 600)
            );
        }
    }

    if !r.reviews.is_empty() || !r.quality_reviews.is_empty() {
        putln!(o, "\n## Review\n");
        for (n, rv) in r.reviews.iter().enumerate() {
            putln!(o, "Review {}, the commit message:\n", n + 1);
            for line in text(&rv["commit_message"]).lines() {
                putln!(o, "> {line}");
            }
            o.push('\n');
            putln!(o, "| File | Decision | Reason |\n|---|---|---|");
            for f in rv["reviewed_files"].as_array().into_iter().flatten() {
                let (file, decision, reason) = match f {
                    serde_json::Value::String(p) => (p.clone(), "keep".to_owned(), String::new()),
                    _ => (text(&f["file"]), text(&f["decision"]), text(&f["reason"])),
                };
                putln!(
                    o,
                    "| `{file}` | {}{} | {} |",
                    cell(&decision),
                    not_committed(r, &file, &decision),
                    cell(&reason)
                );
            }
            o.push('\n');
        }
        for q in &r.quality_reviews {
            let issues: Vec<String> = q["issues"].as_array().into_iter().flatten().map(text).collect();
            let verdict = if issues.is_empty() { "passed".to_owned() } else { format!("{} issue(s)", issues.len()) };
            putln!(o, "- Quality review: score {}, {verdict}", text(&q["quality_score"]));
            for i in issues {
                putln!(o, "  - {}", one_line(&i, 300));
            }
        }
    }

    let g = &r.git;
    if g.task_branch.is_some() || g.merge_commit.is_some() {
        putln!(o, "\n## Commit and merge\n");
        table_header(&mut o);
        let row = |o: &mut String, k: &str, v: &Option<String>| {
            if let Some(v) = v {
                putln!(o, "| {k} | `{v}` |");
            }
        };
        row(&mut o, "Task branch", &g.task_branch);
        row(&mut o, "Base branch", &g.base_branch);
        row(&mut o, "Base commit", &g.base_commit);
        row(&mut o, "Task commit", &g.task_commit);
        row(&mut o, merge_label(r), &g.merge_commit);
        if !r.diff.is_empty() {
            let (a, d): (usize, usize) = r.diff.iter().fold((0, 0), |(a, d), f| (a + f.additions, d + f.deletions));
            putln!(o, "\n{} file(s), +{a} −{d}:\n", r.diff.len());
            for f in &r.diff {
                let bin = if f.binary { " (binary)" } else { "" };
                putln!(o, "- `{}` {} +{} −{}{bin}", f.path, f.change, f.additions, f.deletions);
            }
        }
        if let Some(note) = &g.note {
            putln!(
                o,
                "\n<details><summary>The merge note (refs/notes/code-intel)</summary>\n\n```json\n{}\n```\n</details>",
                note.trim()
            );
        }
    }

    putln!(o, "\n## Steps\n");
    for (n, s) in r.steps.iter().enumerate() {
        let task = s.task.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
        putln!(
            o,
            "{}. **{}**{task} — {}, {} call(s): {}",
            n + 1,
            s.phase,
            duration(s.ms),
            s.calls.len(),
            one_line(&s.summary, 300)
        );
        for c in &s.calls {
            let err = match (&c.error, &c.detail) {
                (Some(e), Some(d)) => format!(" → **{e}**: {}", one_line(d, 300)),
                (Some(e), None) => format!(" → **{e}**"),
                _ => String::new(),
            };
            putln!(o, "   - `{}` {} ({} ms){err}", c.tool, one_line(&c.args, 160), c.ms);
        }
    }
    if !r.notes.is_empty() {
        putln!(o, "\n## Not shown\n");
        for n in &r.notes {
            putln!(o, "- {n}");
        }
    }
    putln!(o, "\n---\nMade by `git code-intel report {}` (report version {}).", r.session_id, r.report_version);
    o
}

fn table_header(o: &mut String) {
    o.push_str("| | |\n|---|---|\n");
}

/// What the explored set is, as the report lists it.
pub(super) const EXPLORED: &str = "Explored files (named in a payload, or shown by a tool's answer)";

/// A note for a file kept in a review that the session's commit does not change (the user's own
/// change from before the task, left uncommitted, or a file the commit did not touch after all).
pub(super) fn not_committed(r: &Report, file: &str, decision: &str) -> &'static str {
    let in_commit = r.diff.iter().any(|f| f.path == file);
    if decision == "keep" && !in_commit && (r.git.task_commit.is_some() || r.git.merge_commit.is_some()) {
        " (not in the commit)"
    } else {
        ""
    }
}

/// How many tools were called, and submissions made (and refused).
pub(super) fn calls_line(r: &Report) -> String {
    format!(
        "{} tool call(s) besides start_session and submit_phase; {} submission(s) accepted, {} refused",
        r.tool_calls, r.submissions, r.refused_submissions
    )
}

/// The merge row's label and what it says.
pub(super) fn merge_label(r: &Report) -> &'static str {
    if r.git.fast_forward { "Merged (fast-forward to the task commit)" } else { "Merge commit" }
}

pub(super) fn provenance(p: Provenance) -> &'static str {
    match p {
        Provenance::ThisWorkTree => "this work tree (in progress)",
        Provenance::ThisClone => "this clone",
        Provenance::AnotherClone => "another clone (fetched with the shared history)",
    }
}

/// The tools called in a phase, each with how often.
pub(super) fn tool_counts(r: &Report, phase: &str) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for c in r.steps.iter().filter(|s| s.phase == phase).flat_map(|s| &s.calls) {
        let name = if c.tool == "submit_phase" { "submit_phase refused".to_owned() } else { c.tool.clone() };
        match counts.iter_mut().find(|(t, _)| *t == name) {
            Some((_, n)) => *n += 1,
            None => counts.push((name, 1)),
        }
    }
    if counts.is_empty() {
        return "—".into();
    }
    counts.iter().map(|(t, n)| if *n > 1 { format!("{t} ×{n}") } else { t.clone() }).collect::<Vec<_>>().join(", ")
}

/// A JSON value as text: strings as they are, anything else as compact JSON.
pub(super) fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line of at most `max` characters.
pub(super) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// Text fit for a Markdown table cell.
fn cell(s: &str) -> String {
    one_line(s, 300).replace('|', "\\|")
}

/// An RFC 3339 time as a reader wants it: to the second, in UTC.
pub(super) fn when(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339).map_or_else(
        |_| rfc3339.to_owned(),
        |t| t.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

pub(super) fn duration(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

fn fence_lang(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "ts" | "tsx" => "typescript",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" => "cpp",
        "rb" => "ruby",
        "sh" => "sh",
        _ => "",
    }
}

/// An object or list as nested bullets.
fn nested(o: &mut String, v: &serde_json::Value, depth: usize) {
    let pad = "  ".repeat(depth);
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if v.is_object() || v.is_array() {
                    putln!(o, "{pad}- **{k}**");
                    nested(o, v, depth + 1);
                } else {
                    putln!(o, "{pad}- **{k}**: {}", one_line(&text(v), 300));
                }
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                if v.is_object() || v.is_array() {
                    nested(o, v, depth);
                } else {
                    putln!(o, "{pad}- {}", one_line(&text(v), 300));
                }
            }
        }
        other => {
            putln!(o, "{pad}- {}", one_line(&text(other), 300));
        }
    }
}

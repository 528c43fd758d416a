//! What one source file contains, extracted with a single tree-sitter parse: definitions (from
//! the tag queries in `lang/queries`), imports, and every identifier occurrence that is code —
//! not a comment, not a string, not the name of the definition itself.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

type FoldHashMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tree_sitter::{Node, Parser, QueryCursor, StreamingIterator, Tree};

use crate::lang::Lang;

/// The kind of a definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SymbolKind {
    Function,
    Method,
    Constructor,
    Prototype,
    Class,
    Struct,
    Enum,
    Variant,
    Trait,
    Interface,
    Impl,
    Type,
    Module,
    Macro,
    Constant,
    Variable,
    Field,
    Property,
}

impl SymbolKind {
    pub const ALL: &'static [SymbolKind] = &[
        SymbolKind::Function,
        SymbolKind::Method,
        SymbolKind::Constructor,
        SymbolKind::Prototype,
        SymbolKind::Class,
        SymbolKind::Struct,
        SymbolKind::Enum,
        SymbolKind::Variant,
        SymbolKind::Trait,
        SymbolKind::Interface,
        SymbolKind::Impl,
        SymbolKind::Type,
        SymbolKind::Module,
        SymbolKind::Macro,
        SymbolKind::Constant,
        SymbolKind::Variable,
        SymbolKind::Field,
        SymbolKind::Property,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SymbolKind::Function => "function",
            SymbolKind::Method => "method",
            SymbolKind::Constructor => "constructor",
            SymbolKind::Prototype => "prototype",
            SymbolKind::Class => "class",
            SymbolKind::Struct => "struct",
            SymbolKind::Enum => "enum",
            SymbolKind::Variant => "variant",
            SymbolKind::Trait => "trait",
            SymbolKind::Interface => "interface",
            SymbolKind::Impl => "impl",
            SymbolKind::Type => "type",
            SymbolKind::Module => "module",
            SymbolKind::Macro => "macro",
            SymbolKind::Constant => "constant",
            SymbolKind::Variable => "variable",
            SymbolKind::Field => "field",
            SymbolKind::Property => "property",
        }
    }

    pub fn from_name(name: &str) -> Option<SymbolKind> {
        let lower = name.trim().to_ascii_lowercase();
        SymbolKind::ALL.iter().copied().find(|k| k.name() == lower)
    }

    /// Functions, methods and constructors: what `get_function_at_line` looks for.
    pub fn is_callable(self) -> bool {
        matches!(self, SymbolKind::Function | SymbolKind::Method | SymbolKind::Constructor)
    }

    /// What `analyze_structure` reports as a class: classes, structs, traits, interfaces, enums.
    pub fn is_class_like(self) -> bool {
        matches!(
            self,
            SymbolKind::Class | SymbolKind::Struct | SymbolKind::Enum | SymbolKind::Trait | SymbolKind::Interface
        )
    }

    /// Definitions that give a name to what they contain.
    fn is_scope(self) -> bool {
        self.is_callable() || self.is_class_like() || matches!(self, SymbolKind::Impl | SymbolKind::Module)
    }

    /// A kind filter from a user, matching related kinds too ("class" finds structs and traits).
    pub fn matches_filter(self, filter: &str) -> bool {
        let f = filter.trim().to_ascii_lowercase();
        match f.as_str() {
            "class" | "classes" => self.is_class_like(),
            "function" | "functions" | "func" | "fn" => self.is_callable(),
            other => self.name() == other.trim_end_matches('s') || self.name() == other,
        }
    }
}

/// A definition in a file. Lines and columns are 1-based.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    pub line: u32,
    pub end_line: u32,
    pub column: u32,
    /// The enclosing definitions' names, outermost first, joined with the language's separator.
    pub scope: Option<String>,
    pub signature: String,
    /// Index of the innermost enclosing definition in the same file.
    pub parent: Option<u32>,
    /// Visible outside its file or module by the language's rules.
    pub exported: bool,
}

/// The innermost of `symbols` whose range holds `line` and that `keep` accepts (the one with
/// the shortest range), with its index.
pub fn innermost_at(symbols: &[Symbol], line: u32, keep: impl Fn(&Symbol) -> bool) -> Option<(usize, &Symbol)> {
    symbols
        .iter()
        .enumerate()
        .filter(|(_, s)| s.line <= line && line <= s.end_line && keep(s))
        .min_by_key(|(_, s)| s.end_line - s.line)
}

/// One identifier occurrence. `name` indexes [`FileSyntax::names`]; `enclosing` indexes
/// [`FileSyntax::symbols`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occurrence {
    pub name: u32,
    pub line: u32,
    pub column: u32,
    pub enclosing: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Import {
    pub line: u32,
    pub text: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSyntax {
    /// In source order.
    pub symbols: Vec<Symbol>,
    /// Distinct identifier names, sorted.
    pub names: Vec<String>,
    /// Sorted by name, then position, so each name's occurrences are contiguous.
    pub refs: Vec<Occurrence>,
    pub imports: Vec<Import>,
    pub line_count: u32,
    /// The parser had to recover from syntax errors.
    pub has_errors: bool,
    /// Definitions left out: nested deeper than [`MAX_NESTING`], or past [`MAX_SYMBOLS`].
    pub symbols_left_out: u32,
    /// The parse went over [`PARSE_BUDGET`] and was stopped: nothing was extracted.
    pub parse_stopped: bool,
}

/// Definitions nested deeper than this are left out (their identifiers still count as
/// references): a scope string grows with the depth, so unbounded nesting would make the
/// index and the outline grow with the square of the file.
pub const MAX_NESTING: usize = 64;
/// At most this many definitions are kept per file.
pub const MAX_SYMBOLS: usize = 20_000;
/// Names and scopes longer than these are cut (with `…`).
const MAX_NAME_CHARS: usize = 200;
const MAX_SCOPE_CHARS: usize = 400;
/// A signature is read from at most this many bytes of its definition.
const MAX_SIGNATURE_BYTES: usize = 4096;

impl FileSyntax {
    /// What [`FileSyntax::symbols_left_out`] means, for the outputs that list symbols.
    pub fn left_out_note(&self) -> Option<String> {
        if self.parse_stopped {
            return Some(format!(
                "parsing stopped after {} s (the grammar's error recovery is slow on this source): no definitions or references were extracted; search_text still searches it",
                PARSE_BUDGET.as_secs()
            ));
        }
        (self.symbols_left_out > 0).then(|| {
            format!(
                "{} definition(s) left out: nested deeper than {MAX_NESTING} levels, or past the first {MAX_SYMBOLS} of the file",
                self.symbols_left_out
            )
        })
    }
}

/// How a node kind is treated by the reference walk.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NodeClass {
    Other,
    Identifier,
    /// Comments and string literals: not descended into.
    Opaque,
}

/// Per language, built on first use of that language (one-shot commands pay only for the
/// languages they parse).
fn node_classes(lang: Lang) -> &'static [NodeClass] {
    static TABLES: [OnceLock<Vec<NodeClass>>; Lang::ALL.len()] = [const { OnceLock::new() }; Lang::ALL.len()];
    TABLES[lang as usize].get_or_init(|| {
        let grammar = lang.grammar();
        (0..grammar.node_kind_count() as u16)
            .map(|id| {
                let kind = grammar.node_kind_for_id(id).unwrap_or("");
                if !grammar.node_kind_is_named(id) {
                    NodeClass::Other
                } else if kind.contains("comment")
                    || kind.contains("string")
                    || matches!(kind, "char_literal" | "character_literal" | "heredoc_body" | "regex")
                {
                    NodeClass::Opaque
                } else if matches!(
                    kind,
                    "identifier"
                        | "type_identifier"
                        | "field_identifier"
                        | "property_identifier"
                        | "shorthand_property_identifier"
                        | "shorthand_property_identifier_pattern"
                        | "private_property_identifier"
                        | "namespace_identifier"
                        | "package_identifier"
                        | "constant"
                        | "name"
                ) {
                    NodeClass::Identifier
                } else {
                    NodeClass::Other
                }
            })
            .collect()
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Name,
    Scope,
    Import,
    Definition(SymbolKind),
    Ignored,
}

fn capture_roles(lang: Lang) -> &'static [Role] {
    static ROLES: [OnceLock<Vec<Role>>; Lang::ALL.len()] = [const { OnceLock::new() }; Lang::ALL.len()];
    ROLES[lang as usize].get_or_init(|| {
        lang.query()
            .capture_names()
            .iter()
            .map(|name| match *name {
                "name" => Role::Name,
                "scope" => Role::Scope,
                "import" => Role::Import,
                other => other
                    .strip_prefix("definition.")
                    .and_then(SymbolKind::from_name)
                    .map(Role::Definition)
                    .unwrap_or(Role::Ignored),
            })
            .collect()
    })
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
}

/// How long one parse may take. tree-sitter's error recovery can take time growing with the
/// square of the input on some broken sources (187 KB of `class A { m() {` as Python: 14 s);
/// a normal 1 MB file parses in well under a tenth of this.
pub const PARSE_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// Parses `source` as `lang`. Returns None if the grammar cannot be loaded or the parse went
/// over [`PARSE_BUDGET`].
pub fn parse(lang: Lang, source: &[u8]) -> Option<Tree> {
    PARSER.with(|p| {
        let mut parser = p.borrow_mut();
        parser.set_language(&lang.grammar()).ok()?;
        let started = std::time::Instant::now();
        let mut progress = |_: &tree_sitter::ParseState| started.elapsed() > PARSE_BUDGET;
        let options = tree_sitter::ParseOptions::new().progress_callback(&mut progress);
        let mut read = |i: usize, _: tree_sitter::Point| source.get(i..).unwrap_or_default();
        let tree = parser.parse_with_options(&mut read, None, Some(options));
        // A stopped parse leaves the parser mid-way; the next one must start afresh.
        parser.reset();
        tree
    })
}

struct RawDef<'t> {
    node: Node<'t>,
    name: Node<'t>,
    scope: Option<Node<'t>>,
    kind: SymbolKind,
    pattern: usize,
}

/// An identifier leaf met by the walk, before it is known whether it names a definition.
struct Ident {
    start: usize,
    end: usize,
    line: u32,
    column: u32,
}

/// What the single walk over a tree collects.
struct Scan<'t> {
    /// Sorted by start, outer before inner.
    defs: Vec<RawDef<'t>>,
    imports: Vec<Import>,
    /// In source order.
    idents: Vec<Ident>,
}

/// Extracts everything the index keeps about one file.
pub fn extract(lang: Lang, source: &[u8]) -> FileSyntax {
    extract_with(lang, source, true)
}

/// Extracts the definitions and imports only (no identifier occurrences): what a definition
/// lookup needs, for less work. The definitions are exactly [`extract`]'s.
pub fn extract_definitions(lang: Lang, source: &[u8]) -> FileSyntax {
    extract_with(lang, source, false)
}

fn extract_with(lang: Lang, source: &[u8], references: bool) -> FileSyntax {
    let line_count = count_lines(source);
    let Some(tree) = parse(lang, source) else {
        return FileSyntax { line_count, parse_stopped: true, has_errors: true, ..FileSyntax::default() };
    };
    let root = tree.root_node();
    let mut scan = scan(lang, root, source, references);
    let symbols_left_out = bound_definitions(&mut scan.defs);
    let symbols = build_symbols(lang, &scan.defs, source);
    let (names, refs) = if references { resolve_references(&scan, &symbols, source) } else { Default::default() };
    FileSyntax {
        symbols,
        names,
        refs,
        imports: scan.imports,
        line_count,
        has_errors: root.has_error(),
        symbols_left_out,
        parse_stopped: false,
    }
}

/// Drops definitions nested deeper than [`MAX_NESTING`] and those past [`MAX_SYMBOLS`];
/// returns how many were dropped. `defs` is sorted by start, outer before inner.
fn bound_definitions(defs: &mut Vec<RawDef>) -> u32 {
    let before = defs.len();
    let mut ends: Vec<usize> = Vec::new();
    defs.retain(|d| {
        let start = d.node.start_byte();
        while ends.last().is_some_and(|&end| end <= start) {
            ends.pop();
        }
        if ends.len() >= MAX_NESTING {
            return false;
        }
        ends.push(d.node.end_byte());
        true
    });
    defs.truncate(MAX_SYMBOLS);
    (before - defs.len()) as u32
}

/// Walks the tree once. Identifier leaves are collected everywhere except inside comments and
/// strings; the definition query runs only at nodes where one of its patterns can start, so the
/// tree is traversed once rather than once for the query and once for the references.
fn scan<'t>(lang: Lang, root: Node<'t>, source: &[u8], references: bool) -> Scan<'t> {
    let classes = node_classes(lang);
    let roots = lang.pattern_roots();
    let mut matcher = DefMatcher::new(lang);
    let mut idents = Vec::new();
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        let kind = node.kind_id() as usize;
        if roots.get(kind).copied().unwrap_or(false) {
            matcher.run_at(node, source);
        }
        let class = classes.get(kind).copied().unwrap_or(NodeClass::Other);
        if references && class == NodeClass::Identifier && node.child_count() == 0 {
            let pos = node.start_position();
            idents.push(Ident {
                start: node.start_byte(),
                end: node.end_byte(),
                line: pos.row as u32 + 1,
                column: pos.column as u32 + 1,
            });
        }
        if class != NodeClass::Opaque && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
    let (defs, imports) = matcher.finish();
    Scan { defs, imports, idents }
}

/// Runs the definition query at single nodes and merges what the patterns report.
struct DefMatcher<'t> {
    query: &'static tree_sitter::Query,
    roles: &'static [Role],
    cursor: QueryCursor,
    by_node: HashMap<(usize, usize), usize>,
    defs: Vec<RawDef<'t>>,
    imports: Vec<Import>,
}

impl<'t> DefMatcher<'t> {
    fn new(lang: Lang) -> Self {
        let mut cursor = QueryCursor::new();
        // Only patterns rooted at the node itself: the walk visits every node anyway.
        cursor.set_max_start_depth(Some(0));
        DefMatcher {
            query: lang.query(),
            roles: capture_roles(lang),
            cursor,
            by_node: HashMap::new(),
            defs: Vec::new(),
            imports: Vec::new(),
        }
    }

    fn run_at(&mut self, node: Node<'t>, source: &[u8]) {
        let mut matches = self.cursor.matches(self.query, node, source);
        while let Some(m) = matches.next() {
            let (mut def, mut name, mut scope) = (None, None, None);
            for cap in m.captures {
                match self.roles[cap.index as usize] {
                    Role::Name => name = Some(cap.node),
                    Role::Scope => scope = Some(cap.node),
                    Role::Definition(kind) => def = Some((cap.node, kind)),
                    Role::Import => self.imports.push(Import {
                        line: cap.node.start_position().row as u32 + 1,
                        text: first_line(node_text(cap.node, source), 200),
                    }),
                    Role::Ignored => {}
                }
            }
            let (Some((node, kind)), Some(name)) = (def, name) else { continue };
            let candidate = RawDef { node, name, scope, kind, pattern: m.pattern_index };
            // Several patterns may describe one definition (a Go struct is also a type spec):
            // the earliest pattern in the file is the most specific and wins.
            match self.by_node.get(&(node.start_byte(), name.start_byte())) {
                Some(&i) => {
                    if candidate.pattern < self.defs[i].pattern {
                        self.defs[i] = candidate;
                    }
                }
                None => {
                    self.by_node.insert((node.start_byte(), name.start_byte()), self.defs.len());
                    self.defs.push(candidate);
                }
            }
        }
    }

    fn finish(mut self) -> (Vec<RawDef<'t>>, Vec<Import>) {
        self.defs.sort_by(|a, b| {
            a.node.start_byte().cmp(&b.node.start_byte()).then(b.node.end_byte().cmp(&a.node.end_byte()))
        });
        self.imports.sort_by_key(|i| i.line);
        self.imports.dedup();
        (self.defs, self.imports)
    }
}

fn scope_separator(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust | Lang::Cpp | Lang::Php | Lang::Ruby => "::",
        _ => ".",
    }
}

fn build_symbols(lang: Lang, defs: &[RawDef], source: &[u8]) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(defs.len());
    // Stack of enclosing scope definitions: (end byte, symbol index).
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for def in defs {
        let start = def.node.start_byte();
        while stack.last().is_some_and(|&(end, _)| end <= start) {
            stack.pop();
        }
        let parent = stack.last().map(|&(_, i)| i);
        let mut name = truncate_chars(node_text(def.name, source).trim().to_owned(), MAX_NAME_CHARS);
        if def.kind == SymbolKind::Impl
            && let Some(i) = name.find('<')
        {
            name.truncate(i);
        }
        let mut scope_parts: Vec<String> = Vec::new();
        if let Some(p) = parent {
            if let Some(s) = &symbols[p].scope {
                scope_parts.push(s.clone());
            }
            scope_parts.push(symbols[p].name.clone());
        }
        if let Some(explicit) = def.scope {
            scope_parts.push(truncate_chars(node_text(explicit, source).trim().to_owned(), MAX_NAME_CHARS));
        }
        let scope =
            (!scope_parts.is_empty()).then(|| truncate_chars(scope_parts.join(scope_separator(lang)), MAX_SCOPE_CHARS));
        let class_parent = parent.is_some_and(|p| {
            let k = symbols[p].kind;
            k.is_class_like() || k == SymbolKind::Impl || (lang == Lang::Ruby && k == SymbolKind::Module)
        });
        let kind = match def.kind {
            SymbolKind::Function if class_parent || def.scope.is_some() => SymbolKind::Method,
            SymbolKind::Method if !class_parent && def.scope.is_none() && matches!(lang, Lang::Ruby | Lang::Python) => {
                SymbolKind::Function
            }
            k => k,
        };
        let signature = signature(def.node, source);
        let exported = is_exported(lang, def.node, &name, &signature, parent.is_none());
        let index = symbols.len();
        symbols.push(Symbol {
            name,
            kind,
            line: def.node.start_position().row as u32 + 1,
            end_line: def.node.end_position().row as u32 + 1,
            column: def.name.start_position().column as u32 + 1,
            scope,
            signature,
            parent: parent.map(|p| p as u32),
            exported,
        });
        if kind.is_scope() {
            stack.push((def.node.end_byte(), index));
        }
    }
    symbols
}

fn is_exported(lang: Lang, node: Node, name: &str, signature: &str, top_level: bool) -> bool {
    match lang {
        Lang::Rust => signature.starts_with("pub") && !signature.starts_with("pub(self)"),
        Lang::Go => name.chars().next().is_some_and(char::is_uppercase),
        Lang::Python => top_level && !name.starts_with('_'),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => {
            let mut n = node.parent();
            while let Some(p) = n {
                if p.kind() == "export_statement" {
                    return true;
                }
                if p.kind() == "program" {
                    break;
                }
                n = p.parent();
            }
            false
        }
        Lang::Java | Lang::CSharp => signature.split_whitespace().any(|w| w == "public"),
        Lang::C | Lang::Cpp => top_level && !signature.split_whitespace().any(|w| w == "static"),
        Lang::Ruby | Lang::Php => top_level,
    }
}

/// Turns the walk's identifiers into occurrences: drops the names of definitions themselves,
/// finds each one's innermost enclosing definition, and interns the names.
fn resolve_references(scan: &Scan, symbols: &[Symbol], source: &[u8]) -> (Vec<String>, Vec<Occurrence>) {
    let defs = &scan.defs;
    let mut name_starts: Vec<usize> = defs.iter().map(|d| d.name.start_byte()).collect();
    name_starts.sort_unstable();
    let mut interned: FoldHashMap<&[u8], u32> = FoldHashMap::default();
    let mut raw: Vec<Occurrence> = Vec::with_capacity(scan.idents.len());
    let mut stack: Vec<usize> = Vec::new();
    let mut next_def = 0;
    for ident in &scan.idents {
        let start = ident.start;
        if name_starts.binary_search(&start).is_ok() {
            continue;
        }
        while next_def < defs.len() && defs[next_def].node.start_byte() <= start {
            let d_start = defs[next_def].node.start_byte();
            while stack.last().is_some_and(|&t| defs[t].node.end_byte() <= d_start) {
                stack.pop();
            }
            if symbols[next_def].kind.is_scope() {
                stack.push(next_def);
            }
            next_def += 1;
        }
        while stack.last().is_some_and(|&t| defs[t].node.end_byte() <= start) {
            stack.pop();
        }
        let next_id = interned.len() as u32;
        let id = *interned.entry(&source[start..ident.end]).or_insert(next_id);
        raw.push(Occurrence {
            name: id,
            line: ident.line,
            column: ident.column,
            enclosing: stack.last().map(|&i| i as u32),
        });
    }
    finish_names(interned, raw)
}

/// Sorts the interned names and renumbers the occurrences to match.
fn finish_names(interned: FoldHashMap<&[u8], u32>, mut raw: Vec<Occurrence>) -> (Vec<String>, Vec<Occurrence>) {
    let mut entries: Vec<(String, u32)> =
        interned.into_iter().map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v)).collect();
    entries.sort_unstable();
    let mut remap = vec![0u32; entries.len()];
    for (new_id, (_, old_id)) in entries.iter().enumerate() {
        remap[*old_id as usize] = new_id as u32;
    }
    for o in &mut raw {
        o.name = remap[o.name as usize];
    }
    raw.sort_unstable_by_key(|o| (o.name, o.line, o.column));
    (entries.into_iter().map(|(n, _)| n).collect(), raw)
}

fn node_text<'s>(node: Node, source: &'s [u8]) -> std::borrow::Cow<'s, str> {
    String::from_utf8_lossy(&source[node.start_byte()..node.end_byte()])
}

/// The declaration part of a definition: its text up to the body, whitespace collapsed.
fn signature(node: Node, source: &[u8]) -> String {
    let end = node
        .child_by_field_name("body")
        .map(|b| b.start_byte())
        .filter(|&e| e > node.start_byte())
        .unwrap_or_else(|| node.end_byte())
        .min(node.start_byte() + MAX_SIGNATURE_BYTES);
    let text = String::from_utf8_lossy(&source[node.start_byte()..end]);
    let first =
        if node.child_by_field_name("body").is_some() { text.as_ref() } else { text.lines().next().unwrap_or("") };
    let collapsed = first.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = collapsed.trim_end_matches(['{', ':', ' ']).to_owned();
    truncate_chars(trimmed, 240)
}

fn first_line(text: std::borrow::Cow<str>, max: usize) -> String {
    truncate_chars(text.lines().next().unwrap_or("").trim().to_owned(), max)
}

fn truncate_chars(mut s: String, max: usize) -> String {
    if let Some((i, _)) = s.char_indices().nth(max) {
        s.truncate(i);
        s.push('…');
    }
    s
}

pub fn count_lines(source: &[u8]) -> u32 {
    let newlines = source.iter().filter(|&&b| b == b'\n').count() as u32;
    if source.is_empty() || source.ends_with(b"\n") { newlines } else { newlines + 1 }
}

//! `get_function_at_line`: the innermost function or method enclosing a line.

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::structure::{Item, item, read_source};
use super::{ToolResult, Workspace, given};
use code_intel_codebase::syntax;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct GetFunctionAtLineParams {
    /// The file, relative to the repository root.
    #[arg(long)]
    pub file_path: Option<String>,
    /// A 1-based line number.
    #[arg(long, allow_hyphen_values = true)]
    pub line_number: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GetFunctionAtLineOutput {
    pub file: String,
    pub line_number: u32,
    pub language: String,
    pub function: Item,
    /// The class, struct, trait, impl or module around the function, if any.
    pub container: Option<Item>,
}

pub fn get_function_at_line(ws: &Workspace, params: GetFunctionAtLineParams) -> ToolResult<GetFunctionAtLineOutput> {
    let Some(path) = given(&params.file_path) else {
        return Err(ws.tool_error(&msg::NO_FILE_PATH, &[]).into());
    };
    let Some(line) = params.line_number else {
        return Err(ws.invalid_argument("line_number", "required (a 1-based line number)"));
    };
    let src = read_source(ws, path, None)?;
    let syntax = syntax::extract(src.lang, &src.bytes);
    let total = syntax.line_count.max(1);
    if line < 1 || line > i64::from(total) {
        let (l, t) = (line.to_string(), total.to_string());
        return Err(ws.tool_error(&msg::LINE_OUT_OF_RANGE, &[("line", &l), ("path", &src.rel), ("total", &t)]).into());
    }
    let line = line as u32;
    let innermost = syntax::innermost_at(&syntax.symbols, line, |s| s.kind.is_callable());
    let Some((index, function)) = innermost else {
        let l = line.to_string();
        return Err(ws.tool_error(&msg::NO_FUNCTION_AT_LINE, &[("path", &src.rel), ("line", &l)]).into());
    };
    let mut container = None;
    let mut parent = syntax.symbols[index].parent;
    while let Some(p) = parent {
        let s = &syntax.symbols[p as usize];
        if !s.kind.is_callable() {
            container = Some(item(s));
            break;
        }
        parent = s.parent;
    }
    Ok(GetFunctionAtLineOutput {
        file: src.rel,
        line_number: line,
        language: src.lang.name().to_owned(),
        function: item(function),
        container,
    })
}

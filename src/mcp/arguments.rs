//! Tool arguments that do not fit the tool's input schema.
//!
//! rmcp answers such a call with serde's text, which names no argument and quotes the offending
//! value whole (a 400 KB string comes back as 400 KB). Each route is wrapped so that arguments are
//! checked against the schema the tool lists first, and a misfit gets the contract's
//! `invalid_argument` error naming the argument and the type it takes. Whatever the check does
//! not catch and serde still refuses is answered the same way, with serde's text cut short.

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResult, ErrorCode, JsonObject};
use serde_json::Value;

use super::CodeIntelServer;

/// How much of a refused value's description an error quotes.
const QUOTE_CHARS: usize = 200;

/// Wraps every route of `router` with the argument check.
pub fn check_arguments(router: &mut ToolRouter<CodeIntelServer>) {
    for route in router.map.values_mut() {
        let inner = Arc::clone(&route.call);
        let schema = Arc::clone(&route.attr.input_schema);
        route.call = Arc::new(move |ctx: ToolCallContext<'_, CodeIntelServer>| {
            let inner = Arc::clone(&inner);
            let schema = Arc::clone(&schema);
            Box::pin(async move {
                let server = ctx.service;
                if let Some((name, error)) = misfit(&schema, ctx.arguments.as_ref()) {
                    return Ok(refusal(server, &name, &error).into());
                }
                match inner(ctx).await {
                    Err(e) if e.code == ErrorCode::INVALID_PARAMS && e.message.starts_with("failed to deserialize") => {
                        Ok(refusal(server, "arguments", &quote(&e.message)).into())
                    }
                    other => other,
                }
            })
        });
    }
}

fn refusal(server: &CodeIntelServer, name: &str, error: &str) -> CallToolResult {
    let error = server.ws.invalid_argument(name, error);
    CallToolResult::structured_error(serde_json::to_value(error).unwrap_or(Value::Null))
}

/// `text` cut to `QUOTE_CHARS` characters.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &text[..i], text.len()),
        None => text.to_owned(),
    }
}

/// The first argument that does not fit `schema`, with what it should be: a required one that
/// is missing, or one whose type or range is wrong.
pub fn misfit(schema: &JsonObject, args: Option<&JsonObject>) -> Option<(String, String)> {
    let empty = JsonObject::new();
    let args = args.unwrap_or(&empty);
    let root = Value::Object(schema.clone());
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if args.get(name).is_none_or(Value::is_null) {
            return Some((name.to_owned(), "required".to_owned()));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object)?;
    for (name, value) in args {
        let Some(prop) = props.get(name) else { continue };
        if !fits(&root, prop, value, 0) {
            return Some((name.clone(), format!("expected {}, got {}", expected(&root, prop, 0), kind(value))));
        }
    }
    None
}

/// `#/$defs/X` in `root`.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/")) {
        Some(path) => root.pointer(&format!("/{path}")).unwrap_or(schema),
        None => schema,
    }
}

fn branches(schema: &Value) -> Option<&Vec<Value>> {
    schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array)
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Whether `value` is an instance of `schema`, as far as types, integer ranges and array items
/// go (what serde would refuse). Unknown shapes fit.
fn fits(root: &Value, schema: &Value, value: &Value, depth: u32) -> bool {
    if depth > 8 {
        return true;
    }
    let schema = resolve(root, schema);
    if let Some(options) = branches(schema) {
        return options.iter().any(|s| fits(root, s, value, depth + 1));
    }
    let types = types(schema);
    if types.is_empty() {
        return true;
    }
    types.iter().any(|t| match (*t, value) {
        ("null", Value::Null) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => true,
        ("object", Value::Object(_)) | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => integer_in_range(schema, n),
        ("array", Value::Array(items)) => match schema.get("items") {
            Some(item) => items.iter().all(|v| fits(root, item, v, depth + 1)),
            None => true,
        },
        _ => false,
    })
}

fn integer_in_range(schema: &Value, n: &serde_json::Number) -> bool {
    let (min, max): (i128, i128) = match schema.get("format").and_then(Value::as_str).unwrap_or("int64") {
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint" | "uint64" => (0, u64::MAX.into()),
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    };
    let value = n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    value.is_some_and(|v| (min..=max).contains(&v))
}

/// What `schema` takes, in words: "a string or a list of strings or null".
fn expected(root: &Value, schema: &Value, depth: u32) -> String {
    let schema = resolve(root, schema);
    if depth > 8 {
        return "a value".into();
    }
    if let Some(options) = branches(schema) {
        return options.iter().map(|s| expected(root, s, depth + 1)).collect::<Vec<_>>().join(" or ");
    }
    types(schema)
        .iter()
        .map(|t| match *t {
            "array" => match schema.get("items") {
                Some(item) => format!("a list of ({})", expected(root, item, depth + 1)),
                None => "a list".into(),
            },
            "integer" => match schema.get("format").and_then(Value::as_str) {
                Some(f) if f.starts_with('u') => "a non-negative integer".into(),
                _ => "an integer".into(),
            },
            "object" => "an object".into(),
            "null" => "null".into(),
            other => format!("a {other}"),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) if n.is_f64() => format!("the number {}", quote(&n.to_string())),
        Value::Number(n) => format!("the integer {n}"),
        Value::String(s) => format!("a string of {} bytes", s.len()),
        Value::Array(a) => format!("a list of {} items", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> JsonObject {
        match v {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    fn schema() -> JsonObject {
        object(json!({
            "$defs": {"Many": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}},
            "type": "object",
            "required": ["files"],
            "properties": {
                "files": {"type": "array", "items": {"type": "string"}},
                "pattern": {"anyOf": [{"$ref": "#/$defs/Many"}, {"type": "null"}]},
                "offset": {"type": ["integer", "null"], "format": "uint", "minimum": 0},
                "line": {"type": ["integer", "null"], "format": "int64"},
                "flag": {"type": ["boolean", "null"]}
            }
        }))
    }

    fn check(args: Value) -> Option<(String, String)> {
        misfit(&schema(), Some(&object(args)))
    }

    #[test]
    fn arguments_that_fit_pass() {
        assert_eq!(check(json!({"files": []})), None);
        assert_eq!(check(json!({"files": ["a"], "pattern": ["x", "y"], "offset": 3, "line": -2, "flag": null})), None);
        assert_eq!(check(json!({"files": ["a"], "pattern": "x", "unknown": {"any": 1}})), None);
    }

    #[test]
    fn misfits_are_named_with_what_they_should_be() {
        assert_eq!(check(json!({})), Some(("files".into(), "required".into())));
        assert_eq!(check(json!({"files": null})), Some(("files".into(), "required".into())));
        let (name, error) = check(json!({"files": ["a", 3]})).unwrap();
        assert_eq!((name.as_str(), error.as_str()), ("files", "expected a list of (a string), got a list of 2 items"));
        let (name, error) = check(json!({"files": [], "offset": -1})).unwrap();
        assert_eq!(
            (name.as_str(), error.as_str()),
            ("offset", "expected a non-negative integer or null, got the integer -1")
        );
        assert_eq!(check(json!({"files": [], "offset": 1.5})).unwrap().0, "offset");
        assert_eq!(check(json!({"files": [], "line": u64::MAX})).unwrap().0, "line");
        let (name, error) = check(json!({"files": [], "pattern": {"a": 1}})).unwrap();
        assert_eq!(name, "pattern");
        assert_eq!(error, "expected a string or a list of (a string) or null, got an object");
        let (_, error) = check(json!({"files": [], "flag": "x".repeat(100_000)})).unwrap();
        assert_eq!(error, "expected a boolean or null, got a string of 100000 bytes");
    }

    #[test]
    fn quotes_are_cut_short() {
        let long = format!("failed to deserialize parameters: {}", "x".repeat(10_000));
        let q = quote(&long);
        assert!(q.len() < 300, "{q}");
        assert!(q.ends_with("(10034 bytes in all)"), "{q}");
    }
}

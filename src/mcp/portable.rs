//! Tool schemas as every client can read them. schemars writes an `Option<T>` as
//! `"type": [T, "null"]`, which clients that map schemas onto a single-`type` dialect (the
//! OpenAPI subset some model providers use for function declarations) may reject. What
//! tools/list shows is rewritten here:
//!
//! - an input property that is not required loses its `null`: leaving it out is how a caller
//!   says "not given" (the server still accepts an explicit `null`; arguments are checked
//!   against the schema before this rewrite);
//! - an output field that may be `null` becomes `anyOf` of its type and `null`, each branch
//!   with a single `type`.

use code_intel_workflow::engine::schema::is_standard_format;
use serde_json::{Map, Value};

/// Keywords that belong to a value's type; they move into the non-null branch.
const TYPED_KEYWORDS: &[&str] = &[
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "enum",
];

/// Rewrites an input schema: optional properties drop `null`. What tells a model nothing is
/// left out, since every byte of an input schema is read by the model on every turn: the
/// `$schema` dialect (MCP's default, 2020-12). Both sides lose formats JSON Schema does not
/// define (`"format": "uint32"`; the `minimum` stays).
pub fn input(schema: &mut Map<String, Value>) {
    schema.remove("$schema");
    visit(schema, Side::Input);
}

/// Rewrites an output schema: nullable fields become `anyOf` of their type and `null`. The root
/// says `"type": "object"` even when it is a choice of objects (an untagged enum): MCP's
/// structured content is an object, and clients drop a tool whose outputSchema root is not.
pub fn output(schema: &mut Map<String, Value>) {
    visit(schema, Side::Output);
    schema.entry("type").or_insert_with(|| Value::String("object".into()));
}

#[derive(Clone, Copy)]
enum Side {
    Input,
    Output,
}

fn visit(schema: &mut Map<String, Value>, side: Side) {
    split_type(schema, side);
    if let Side::Input = side {
        drop_null_branch(schema);
    }
    // schemars names integer widths and floats as formats (`uint8`, `double`); JSON Schema
    // defines no such format, and clients warn about each one. The range stays in `minimum`.
    if schema.get("format").and_then(Value::as_str).is_some_and(|f| !is_standard_format(f)) {
        schema.shift_remove("format");
    }
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = schema.get_mut(key) {
            for child in children.values_mut() {
                visit_value(child, side);
            }
        }
    }
    for key in ["items", "additionalProperties", "not", "contains"] {
        if let Some(child) = schema.get_mut(key) {
            visit_value(child, side);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(Value::Array(children)) = schema.get_mut(key) {
            for child in children {
                visit_value(child, side);
            }
        }
    }
}

fn visit_value(value: &mut Value, side: Side) {
    if let Value::Object(schema) = value {
        visit(schema, side);
    }
}

/// An optional input written `anyOf: [S, {"type": "null"}]` becomes S (with the description
/// kept): leaving it out says "not given".
fn drop_null_branch(schema: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = schema.get("anyOf") else { return };
    let is_null = |b: &Value| {
        b.get("type").and_then(Value::as_str) == Some("null") && b.as_object().is_some_and(|o| o.len() == 1)
    };
    if branches.len() != 2 || !branches.iter().any(is_null) {
        return;
    }
    let Some(Value::Object(kept)) = branches.iter().find(|b| !is_null(b)).cloned() else { return };
    if kept.keys().any(|k| schema.contains_key(k) && k != "anyOf") {
        return;
    }
    schema.remove("anyOf");
    schema.extend(kept);
}

/// `"type": [T, "null"]` (or more types) becomes one `type` (input) or `anyOf` branches of one
/// type each (output).
fn split_type(schema: &mut Map<String, Value>, side: Side) {
    let Some(Value::Array(types)) = schema.get("type") else { return };
    let types: Vec<Value> = types.clone();
    let non_null: Vec<Value> = types.iter().filter(|t| t.as_str() != Some("null")).cloned().collect();
    match (side, non_null.as_slice()) {
        (Side::Input, [only]) => {
            schema.insert("type".into(), only.clone());
            // `null` may also be listed among the values.
            if let Some(Value::Array(values)) = schema.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
        }
        _ => {
            schema.remove("type");
            let mut typed = Map::new();
            for key in TYPED_KEYWORDS {
                if let Some(v) = schema.remove(*key) {
                    typed.insert((*key).into(), v);
                }
            }
            if let Some(Value::Array(values)) = typed.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            let branches: Vec<Value> = types
                .iter()
                .map(|t| {
                    let mut branch = Map::new();
                    branch.insert("type".into(), t.clone());
                    if t.as_str() != Some("null") {
                        branch.extend(typed.clone());
                    }
                    Value::Object(branch)
                })
                .collect();
            schema.insert("anyOf".into(), Value::Array(branches));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every problem the Inspector's --strict check reports, found by the same rules: a `type`
    /// that is an array, a bare `true`, a schema with no type-giving keyword; and a `format`
    /// JSON Schema does not define, which a strict validator warns about.
    fn problems(value: &Value, path: &str, out: &mut Vec<String>) {
        let schema = match value {
            Value::Object(schema) => schema,
            other => return out.push(format!("{path}: a bare {other} where a schema belongs")),
        };
        if schema.get("type").is_some_and(Value::is_array) {
            out.push(format!("{path}: `type` is an array"));
        }
        if !["type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const"].iter().any(|k| schema.contains_key(*k)) {
            out.push(format!("{path}: no validation keyword"));
        }
        // What a strict validator (Claude Code's) reports: a format JSON Schema does not define.
        if let Some(f) = schema.get("format").and_then(Value::as_str)
            && !is_standard_format(f)
        {
            out.push(format!("{path}: unknown format \"{f}\""));
        }
        for key in ["properties", "$defs", "definitions"] {
            if let Some(Value::Object(children)) = schema.get(key) {
                for (name, child) in children {
                    problems(child, &format!("{path}.{key}.{name}"), out);
                }
            }
        }
        if let Some(items) = schema.get("items") {
            problems(items, &format!("{path}.items"), out);
        }
        if let Some(extra @ Value::Object(_)) = schema.get("additionalProperties") {
            problems(extra, &format!("{path}.additionalProperties"), out);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(children)) = schema.get(key) {
                for (i, child) in children.iter().enumerate() {
                    problems(child, &format!("{path}.{key}[{i}]"), out);
                }
            }
        }
    }

    #[test]
    fn every_served_schema_is_portable() {
        let mut found = Vec::new();
        for tool in crate::mcp::served_tools() {
            let out = tool.output_schema.as_ref().and_then(|o| o.get("type").cloned());
            if out != Some(Value::String("object".into())) {
                found.push(format!("{}.outputSchema: the root is not `\"type\": \"object\"`", tool.name));
            }
            problems(&Value::Object((*tool.input_schema).clone()), &format!("{}.inputSchema", tool.name), &mut found);
            if let Some(out) = &tool.output_schema {
                problems(&Value::Object((**out).clone()), &format!("{}.outputSchema", tool.name), &mut found);
            }
        }
        assert!(found.is_empty(), "{} unportable schemas:\n{}", found.len(), found.join("\n"));
    }

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_optional_input_loses_its_null_and_keeps_its_constraints() {
        let mut s = object(json!({
            "type": "object",
            "properties": {
                "path": {"type": ["string", "null"], "description": "a path"},
                "limit": {"type": ["integer", "null"], "minimum": 0, "format": "uint"},
                "tools": {"type": ["array", "null"], "items": {"type": "string"}}
            }
        }));
        input(&mut s);
        assert_eq!(s["properties"]["path"], json!({"type": "string", "description": "a path"}));
        assert_eq!(s["properties"]["limit"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(s["properties"]["tools"], json!({"type": "array", "items": {"type": "string"}}));
    }

    #[test]
    fn an_optional_reference_loses_its_null_branch_and_the_dialect_goes() {
        let mut s = object(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"pattern": {"description": "p", "anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]}}
        }));
        input(&mut s);
        assert_eq!(
            s,
            object(json!({"type": "object", "properties": {"pattern": {"description": "p", "$ref": "#/$defs/P"}}}))
        );
    }

    #[test]
    fn a_nullable_output_becomes_branches_of_one_type_each() {
        let mut s = object(json!({
            "type": "object",
            "properties": {"next_offset": {"type": ["integer", "null"], "minimum": 0, "description": "d"}},
            "$defs": {"X": {"type": "object", "properties": {"note": {"type": ["string", "null"]}}}}
        }));
        output(&mut s);
        assert_eq!(
            s["properties"]["next_offset"],
            json!({"description": "d", "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]})
        );
        assert_eq!(s["$defs"]["X"]["properties"]["note"], json!({"anyOf": [{"type": "string"}, {"type": "null"}]}));
    }
}

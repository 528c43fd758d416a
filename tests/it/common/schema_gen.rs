//! A random instance generator for the JSON Schemas the server sends as
//! `expected_payload_schema`: objects, arrays (`prefixItems`, `contains`/`minContains`,
//! `uniqueItems`), strings (`minLength`, the `\S` pattern, `examples` for other patterns),
//! booleans, integers, `const`, `enum`, `anyOf`, `allOf`. It knows JSON Schema, not the server.
#![allow(dead_code)]

use serde_json::{Map, Value, json};

pub struct Gen {
    pub rng: fastrand::Rng,
    /// Text the generator may quote from (a `quote` field gets a piece of it half the time).
    pub quotable: String,
}

const ALPHABET: &[char] = &['a', 'b', 'x', 'y', 'z', 'Q', '0', '7', '_', '-', '.', ' ', ' ', 'é', '字', ':', '/'];

impl Gen {
    pub fn new(seed: u64, quotable: &str) -> Gen {
        Gen { rng: fastrand::Rng::with_seed(seed), quotable: quotable.to_owned() }
    }

    /// An instance of `schema`.
    pub fn value(&mut self, schema: &Value) -> Value {
        self.value_named(schema, "")
    }

    fn value_named(&mut self, schema: &Value, name: &str) -> Value {
        let Some(s) = schema.as_object() else { return self.any(2) };
        if let Some(c) = s.get("const") {
            return c.clone();
        }
        if let Some(Value::Array(options)) = s.get("enum") {
            return options[self.rng.usize(..options.len())].clone();
        }
        if let Some(Value::Array(all)) = s.get("allOf") {
            let mut merged = without(schema, "allOf");
            for part in all {
                merged = merge(&merged, part);
            }
            return self.value_named(&merged, name);
        }
        if let Some(Value::Array(any)) = s.get("anyOf") {
            let branch = &any[self.rng.usize(..any.len())];
            return self.value_named(&merge(&without(schema, "anyOf"), branch), name);
        }
        match s.get("type").and_then(Value::as_str) {
            Some("object") => self.object(s),
            Some("array") => self.array(s),
            Some("string") => self.string(s, name),
            Some("boolean") => json!(self.rng.bool()),
            Some("integer") => {
                if let Some(d) = s.get("default").filter(|_| self.rng.bool()) {
                    return d.clone();
                }
                let min = s.get("minimum").and_then(Value::as_u64).unwrap_or(0);
                json!(min + self.rng.u64(0..100))
            }
            _ => self.any(2),
        }
    }

    fn object(&mut self, s: &Map<String, Value>) -> Value {
        let required: Vec<&str> =
            s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
        let mut out = Map::new();
        for (name, prop) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
            if required.contains(&name.as_str()) || self.rng.bool() {
                out.insert(name.clone(), self.value_named(prop, name));
            }
        }
        if s.get("properties").is_none() {
            // A free-form object: a few entries.
            let min = s.get("minProperties").and_then(Value::as_u64).unwrap_or(0) as usize;
            for i in 0..min + self.rng.usize(0..3) {
                out.insert(format!("key{i}"), self.any(1));
            }
        }
        Value::Object(out)
    }

    fn array(&mut self, s: &Map<String, Value>) -> Value {
        let unique = s.get("uniqueItems") == Some(&json!(true));
        let item = s.get("items").cloned().unwrap_or(json!({}));
        if let Some(Value::Array(prefix)) = s.get("prefixItems") {
            let mut out: Vec<Value> = prefix.iter().map(|p| self.value(p)).collect();
            if item != json!(false) {
                for _ in 0..self.rng.usize(0..2) {
                    out.push(self.value(&item));
                }
            }
            return Value::Array(out);
        }
        let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
        let max = s.get("maxItems").and_then(Value::as_u64).map(|m| m as usize).unwrap_or(min + 3).max(min);
        let target = self.rng.usize(min..=max);
        let mut out: Vec<Value> = Vec::new();
        if let Some(contains) = s.get("contains") {
            let k = s.get("minContains").and_then(Value::as_u64).unwrap_or(1) as usize;
            let mut tries = 0;
            while out.iter().filter(|v| matches_simple(contains, v)).count() < k && tries < 200 {
                tries += 1;
                let v = self.value(&merge(&item, contains));
                if !(unique && out.contains(&v)) {
                    out.push(v);
                }
            }
        }
        let mut tries = 0;
        while out.len() < target && tries < 50 {
            tries += 1;
            let v = self.value(&item);
            if !(unique && out.contains(&v)) {
                out.push(v);
            }
        }
        if out.len() > 1 {
            // Keep the required ones somewhere in the list, not always first.
            self.rng.shuffle(&mut out);
        }
        Value::Array(out)
    }

    fn string(&mut self, s: &Map<String, Value>, name: &str) -> Value {
        let pattern = s.get("pattern").and_then(Value::as_str);
        if let (Some(_), Some(Value::Array(examples))) = (pattern, s.get("examples")) {
            return examples[self.rng.usize(..examples.len())].clone();
        }
        let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
        if name == "quote" && self.rng.bool() && !self.quotable.is_empty() {
            let words: Vec<&str> = self.quotable.split_whitespace().collect();
            let a = self.rng.usize(..words.len());
            let b = self.rng.usize(a..words.len());
            let q = words[a..=b].join(" ");
            if q.chars().count() >= min {
                return json!(q);
            }
        }
        let mut len = if self.rng.u8(..5) == 0 { min } else { min + self.rng.usize(0..24) };
        match pattern {
            None => {}
            Some(r"\S") => len = len.max(1),
            Some(other) => panic!("the generator knows no instances of pattern {other:?} (give examples)"),
        }
        let mut text: String = (0..len).map(|_| ALPHABET[self.rng.usize(..ALPHABET.len())]).collect();
        if pattern == Some(r"\S") && text.trim().is_empty() {
            text.replace_range(0..1, "k");
        }
        json!(text)
    }

    /// Any JSON value, nested up to `depth`.
    pub fn any(&mut self, depth: u32) -> Value {
        match self.rng.u8(..if depth == 0 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(self.rng.bool()),
            2 => json!(self.rng.i64(-5..1000)),
            3 => json!(self.rng.f64() * 100.0),
            4 => {
                let len = self.rng.usize(0..12);
                json!((0..len).map(|_| ALPHABET[self.rng.usize(..ALPHABET.len())]).collect::<String>())
            }
            5 => Value::Array((0..self.rng.usize(0..4)).map(|_| self.any(depth - 1)).collect()),
            _ => {
                let mut m = Map::new();
                for i in 0..self.rng.usize(0..4) {
                    m.insert(format!("k{i}"), self.any(depth - 1));
                }
                Value::Object(m)
            }
        }
    }
}

/// `schema` without `key`.
fn without(schema: &Value, key: &str) -> Value {
    let mut s = schema.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove(key);
    }
    s
}

/// `b` laid over `a`: keys of `b` win, `properties` merge property by property, `required`
/// is the union.
pub fn merge(a: &Value, b: &Value) -> Value {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else { return b.clone() };
    let mut out = a.clone();
    for (k, v) in b {
        match (k.as_str(), out.get(k)) {
            ("properties", Some(existing)) => {
                let mut props = existing.as_object().cloned().unwrap_or_default();
                for (name, p) in v.as_object().into_iter().flatten() {
                    let merged = match props.get(name) {
                        Some(old) => merge(old, p),
                        None => p.clone(),
                    };
                    props.insert(name.clone(), merged);
                }
                out.insert(k.clone(), Value::Object(props));
            }
            ("required", Some(Value::Array(existing))) => {
                let mut all = existing.clone();
                for r in v.as_array().into_iter().flatten() {
                    if !all.contains(r) {
                        all.push(r.clone());
                    }
                }
                out.insert(k.clone(), Value::Array(all));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    // A const or enum laid over a base with the other one replaces it.
    if b.contains_key("const") {
        out.remove("enum");
    }
    Value::Object(out)
}

/// Whether `v` fits the parts of `schema` that `contains` uses here (const, enum, properties
/// with const).
fn matches_simple(schema: &Value, v: &Value) -> bool {
    if let Some(c) = schema.get("const") {
        return c == v;
    }
    if let Some(Value::Array(e)) = schema.get("enum") {
        return e.contains(v);
    }
    if let Some(Value::Object(props)) = schema.get("properties") {
        return props.iter().all(|(k, p)| match p.get("const") {
            Some(c) => v.get(k) == Some(c),
            None => true,
        });
    }
    true
}

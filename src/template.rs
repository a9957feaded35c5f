//! `${…}` templates: parsing references out of strings, substituting them while the stack
//! loads, and evaluating them to plain values at plan and apply time.
//!
//! A template is an ordinary JSON value whose strings may hold references. `$${` writes a
//! literal `${`. A string that is exactly one reference takes the referenced value's type;
//! inside a longer string the value is interpolated.

use serde_json::Value;
use std::fmt;

/// The address of a block (`<type>.<name>`: `aws_vpc.main`, `eks.train`) or of what a
/// component makes below its own (`eks.train.nodegroups.gpu.nodegroup`). It reads as the text
/// it is (`Deref` to `str`); its parts have names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address(String);

impl Address {
    /// The address written as `text`.
    pub fn new(text: impl Into<String>) -> Address {
        Address(text.into())
    }

    /// The block type: `eks` of `eks.train`.
    pub fn kind(&self) -> &str {
        self.0.split_once('.').map_or(&self.0, |(kind, _)| kind)
    }

    /// The block's own name: `train` of `eks.train` (and of what it makes below it).
    pub fn name(&self) -> &str {
        let rest = self.0.split_once('.').map_or(self.0.as_str(), |(_, rest)| rest);
        rest.split_once('.').map_or(rest, |(name, _)| name)
    }

    /// The address of `local` below this one: `eks.train` and `cluster` make `eks.train.cluster`.
    pub fn child(&self, local: &str) -> Address {
        Address(format!("{}.{local}", self.0))
    }
}

impl std::ops::Deref for Address {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One `${a.b.c}` reference: its dotted path, split into segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// The segments, e.g. `["null", "a", "triggers", "label"]`.
    pub segments: Vec<String>,
}

impl Reference {
    /// The path as written between `${` and `}`.
    pub fn path(&self) -> String {
        self.segments.join(".")
    }

    /// What the reference points into: the longest address (two segments or more) that
    /// `find` knows, what `find` gave for it, and the attribute path below it
    /// (`${vpc.main.private.us-west-2a.id}` is `vpc.main.private.us-west-2a` and `["id"]`
    /// when that resource exists). The one place a reference is split into address and path:
    /// the loader, the planner and apply all resolve through it.
    pub fn resolve<T>(&self, mut find: impl FnMut(&str) -> Option<T>) -> Option<(Address, T, &[String])> {
        (2..=self.segments.len()).rev().find_map(|split| {
            let address = Address(self.segments[..split].join("."));
            find(&address).map(|found| (address, found, &self.segments[split..]))
        })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "${{{}}}", self.path())
    }
}

/// A piece of a parsed string.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Ref(Reference),
}

/// Why a string is not a valid template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: &'static str,
}

fn parse(s: &str) -> Result<Vec<Part>, SyntaxError> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = s;
    while let Some(pos) = rest.find("${") {
        if pos > 0 && rest[..pos].ends_with('$') {
            literal.push_str(&rest[..pos - 1]);
            literal.push_str("${");
            rest = &rest[pos + 2..];
            continue;
        }
        literal.push_str(&rest[..pos]);
        let after = &rest[pos + 2..];
        let Some(end) = after.find('}') else {
            return Err(SyntaxError {
                message: format!("unclosed reference `{}`", &rest[pos..]),
                hint: "close it with `}`, or write `$${` for a literal `${`",
            });
        };
        let path = after[..end].trim();
        let segments: Vec<String> = path.split('.').map(str::to_owned).collect();
        let valid_segment = |seg: &String| !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if path.is_empty() || !segments.iter().all(valid_segment) || segments.len() < 2 {
            return Err(SyntaxError {
                message: format!("`${{{}}}` is not a valid reference", &after[..end]),
                hint: "write `${<type>.<name>.<attribute>}` or `${var.<name>}`",
            });
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(std::mem::take(&mut literal)));
        }
        parts.push(Part::Ref(Reference { segments }));
        rest = &after[end + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(parts)
}

fn escape(s: &str) -> String {
    s.replace("${", "$${")
}

/// Checks every string in `value` and returns the references it holds, in order.
pub fn references(value: &Value) -> Result<Vec<Reference>, SyntaxError> {
    let mut found = Vec::new();
    visit_strings(value, &mut |s| {
        for part in parse(s)? {
            if let Part::Ref(r) = part {
                found.push(r);
            }
        }
        Ok(())
    })?;
    Ok(found)
}

fn visit_strings(value: &Value, f: &mut impl FnMut(&str) -> Result<(), SyntaxError>) -> Result<(), SyntaxError> {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().try_for_each(|v| visit_strings(v, f)),
        Value::Object(map) => map.values().try_for_each(|v| visit_strings(v, f)),
        _ => Ok(()),
    }
}

/// Turns plain data into a template that stands for exactly that data (escapes `${`).
pub fn quote(value: &Value) -> Value {
    map_strings(value, &mut |s| Value::String(escape(s)))
}

fn map_strings(value: &Value, f: &mut impl FnMut(&str) -> Value) -> Value {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => Value::Array(items.iter().map(|v| map_strings(v, f)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), map_strings(v, f))).collect()),
        other => other.clone(),
    }
}

/// An error met while substituting or evaluating a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// The reference that failed, as written.
    pub reference: String,
    /// What is wrong with it.
    pub message: String,
}

/// Notes an error met at `reference`, unless one is noted already: the first one is the
/// result.
fn note(error: &mut Option<EvalError>, reference: String, message: String) {
    error.get_or_insert(EvalError { reference, message });
}

/// Maps every string of `value` through `f`, given its parts and where to [`note`] an error:
/// a string that does not parse stays as it is, and its error is noted. The result, or the
/// first error noted.
fn map_templates(value: &Value, f: &mut impl FnMut(&str, Vec<Part>, &mut Option<EvalError>) -> Value) -> Result<Value, EvalError> {
    let mut error = None;
    let out = map_strings(value, &mut |s| match parse(s) {
        Ok(parts) => f(s, parts, &mut error),
        Err(e) => {
            note(&mut error, s.to_owned(), e.message);
            Value::String(s.to_owned())
        }
    });
    error.map_or(Ok(out), Err)
}

/// Replaces references by templates: `lookup` returns the template that stands for a reference,
/// or `None` to keep the reference as it is. The result is again a template.
pub fn substitute(value: &Value, lookup: &mut impl FnMut(&Reference) -> Result<Option<Value>, String>) -> Result<Value, EvalError> {
    map_templates(value, &mut |s, parts, error| {
        if let [Part::Ref(r)] = parts.as_slice() {
            return match lookup(r) {
                Ok(Some(v)) => v,
                Ok(None) => Value::String(s.to_owned()),
                Err(message) => {
                    note(error, r.to_string(), message);
                    Value::String(s.to_owned())
                }
            };
        }
        let mut text = String::new();
        for part in parts {
            match part {
                Part::Literal(l) => text.push_str(&escape(&l)),
                Part::Ref(r) => match lookup(&r) {
                    Ok(Some(Value::String(t))) => text.push_str(&t),
                    Ok(Some(v @ (Value::Number(_) | Value::Bool(_)))) => text.push_str(&v.to_string()),
                    Ok(Some(_)) => note(error, r.to_string(), "a table or list cannot be interpolated into a string".into()),
                    Ok(None) => text.push_str(&r.to_string()),
                    Err(message) => note(error, r.to_string(), message),
                },
            }
        }
        Value::String(text)
    })
}

/// Evaluates a template to plain data. `lookup` returns a reference's value, or `None` while it
/// is unknown (before apply); a value that depends on an unknown becomes JSON `null`, which the
/// plan shows as "(known after apply)". TOML has no null, so it cannot be mistaken for data.
pub fn evaluate(value: &Value, lookup: &mut impl FnMut(&Reference) -> Result<Option<Value>, String>) -> Result<Value, EvalError> {
    map_templates(value, &mut |_, parts, error| {
        let mut fail = |r: &Reference, message: String| {
            note(error, r.to_string(), message);
            Value::Null
        };
        if let [Part::Ref(r)] = parts.as_slice() {
            return match lookup(r) {
                Ok(v) => v.unwrap_or(Value::Null),
                Err(message) => fail(r, message),
            };
        }
        let mut text = String::new();
        for part in parts {
            match part {
                Part::Literal(l) => text.push_str(&l),
                Part::Ref(r) => match lookup(&r) {
                    Ok(Some(Value::String(t))) => text.push_str(&t),
                    Ok(Some(v @ (Value::Number(_) | Value::Bool(_)))) => text.push_str(&v.to_string()),
                    Ok(Some(Value::Null) | None) => return Value::Null,
                    Ok(Some(_)) => return fail(&r, "a table or list cannot be interpolated into a string".into()),
                    Err(message) => return fail(&r, message),
                },
            }
        }
        Value::String(text)
    })
}

/// Follows `path` (object keys and list indexes) into `value`.
pub fn get_path<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, seg| match v {
        Value::Object(map) => map.get(seg),
        Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// True when the value holds no unknown (`null`) anywhere.
pub fn is_known(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Array(items) => items.iter().all(is_known),
        Value::Object(map) => map.values().all(is_known),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refs(s: &str) -> Vec<String> {
        references(&json!(s)).unwrap().iter().map(Reference::path).collect()
    }

    #[test]
    fn a_reference_resolves_to_the_longest_known_address() {
        let r = Reference {
            segments: ["vpc", "main", "private", "a", "id"].map(String::from).to_vec(),
        };
        let known = ["vpc.main", "vpc.main.private.a"];
        let (address, found, path) = r.resolve(|a| known.iter().position(|k| *k == a)).unwrap();
        assert_eq!((&*address, found, path), ("vpc.main.private.a", 1, &["id".to_owned()][..]));
        assert!(r.resolve(|_| None::<()>).is_none());
        assert_eq!((address.kind(), address.name()), ("vpc", "main"));
        assert_eq!(Address::new("eks.train").child("cluster").to_string(), "eks.train.cluster");
    }

    #[test]
    fn finds_references_and_escapes() {
        assert_eq!(refs("${null.a.id}-x-${var.n}"), ["null.a.id", "var.n"]);
        assert!(refs("literal $${not.a.ref} and $5").is_empty());
        assert!(references(&json!("${null.a")).unwrap_err().message.contains("unclosed"));
        assert!(references(&json!("${}")).is_err());
        assert!(references(&json!("${null a}")).is_err());
        assert!(references(&json!("${single}")).is_err());
    }

    #[test]
    fn whole_reference_keeps_type_and_interpolation_stringifies() {
        let mut lookup = |r: &Reference| Ok(Some(if r.path() == "var.n" { json!(4) } else { json!(["a", "b"]) }));
        assert_eq!(evaluate(&json!("${var.n}"), &mut lookup).unwrap(), json!(4));
        assert_eq!(evaluate(&json!("n=${var.n}"), &mut lookup).unwrap(), json!("n=4"));
        assert_eq!(evaluate(&json!("${x.list}"), &mut lookup).unwrap(), json!(["a", "b"]));
        let err = evaluate(&json!("l=${x.list}"), &mut lookup).unwrap_err();
        assert!(err.message.contains("cannot be interpolated"));
    }

    #[test]
    fn unknown_values_become_null_and_escapes_unfold() {
        let mut lookup = |_: &Reference| Ok(None);
        let out = evaluate(&json!({"a": "${null.x.id}", "b": "p-${null.x.id}", "c": "$${lit}"}), &mut lookup).unwrap();
        assert_eq!(out, json!({"a": null, "b": null, "c": "${lit}"}));
        assert!(!is_known(&out));
    }

    #[test]
    fn substitution_keeps_literals_literal() {
        let quoted = quote(&json!("has ${braces}"));
        let mut lookup = |r: &Reference| Ok((r.segments[0] == "var").then(|| quoted.clone()));
        let t = substitute(&json!("${var.v}"), &mut lookup).unwrap();
        assert_eq!(references(&t).unwrap(), vec![]);
        let mut none = |_: &Reference| Ok(None);
        assert_eq!(evaluate(&t, &mut none).unwrap(), json!("has ${braces}"));
        let t2 = substitute(&json!("x-${var.v}-${null.a.id}"), &mut lookup).unwrap();
        assert_eq!(refs(t2.as_str().unwrap()), ["null.a.id"]);
    }

    #[test]
    fn paths_walk_tables_and_lists() {
        let v = json!({"t": {"l": [1, {"k": "v"}]}});
        let path = |p: &str| p.split('.').map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(get_path(&v, &path("t.l.1.k")), Some(&json!("v")));
        assert_eq!(get_path(&v, &path("t.l.7")), None);
    }
}

//! The plan as text for people: one line per change with its symbol, then the attributes that
//! change, then the summary line. Colour is added by `output`.

use super::drift::{AttributeDrift, Drift};
use super::{Action, Change, Mode, Plan};
use serde_json::Value;
use std::fmt::Write;

/// Renders a value the way it is written in a stack file; `null` is "(known after apply)", and
/// a text of several lines (a template file) is summed up by its length.
pub fn value(v: &Value) -> String {
    match v {
        Value::Null => "(known after apply)".into(),
        Value::String(s) if s.contains('\n') => format!("(text of {} lines)", s.lines().count()),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!("[{}]", items.iter().map(value).collect::<Vec<_>>().join(", ")),
        Value::Object(map) if map.is_empty() => "{}".into(),
        Value::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .map(|(k, v)| format!("{k} = {}", value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// A long list as one item per line (32 EFA interfaces stay readable); anything else as
/// [`value`].
fn listed(v: &Value) -> String {
    const WIDTH: usize = 100;
    let one_line = value(v);
    match v {
        Value::Array(items) if one_line.len() > WIDTH => {
            let lines: String = items.iter().map(|item| format!("          {},\n", value(item))).collect();
            format!("[\n{lines}        ]")
        }
        _ => one_line,
    }
}

/// Lines for the attributes that differ, nested tables walked key by key.
fn attribute_lines(out: &mut String, path: &str, before: Option<&Value>, after: Option<&Value>, forcing: &[String]) {
    let mark = |out: &mut String, symbol: &str, text: String| {
        let top = path.split('.').next().unwrap_or(path);
        let note = if forcing.iter().any(|f| f == top) {
            "   # forces replacement"
        } else {
            ""
        };
        let _ = writeln!(out, "      {symbol} {path} = {text}{note}");
    };
    // Tables are walked key by key: two of them, or a long one made or removed whole (a
    // Kubernetes manifest) against nothing.
    let empty = serde_json::Map::new();
    let long_table = |v: &Value| matches!(v, Value::Object(m) if !m.is_empty()) && value(v).len() > 100;
    let tables = match (before, after) {
        (Some(Value::Object(b)), Some(Value::Object(a))) => Some((b, a)),
        (None, Some(a @ Value::Object(m))) if long_table(a) => Some((&empty, m)),
        (Some(b @ Value::Object(m)), None) if long_table(b) => Some((m, &empty)),
        _ => None,
    };
    if let Some((b, a)) = tables {
        for key in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
            let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
            attribute_lines(out, &child, b.get(key), a.get(key), forcing);
        }
        return;
    }
    // A launch template's network interfaces, one line: their layout, not 33 tables.
    let (nics_before, nics_after) = (before.and_then(nic_layout), after.and_then(nic_layout));
    if path == "network_interfaces" && (nics_before.is_some() || nics_after.is_some()) && nics_before != nics_after {
        match (nics_before, nics_after) {
            (Some(b), Some(a)) => mark(out, "~", format!("{b} -> {a}")),
            (None, Some(a)) => mark(out, "+", a),
            (Some(b), None) => mark(out, "-", b),
            (None, None) => {}
        }
        return;
    }
    match (before, after) {
        (Some(b), Some(a)) if b == a && !a.is_null() => {}
        (Some(b), Some(a)) => mark(out, "~", format!("{} -> {}", value(b), value(a))),
        (None, Some(a)) => mark(out, "+", listed(a)),
        (Some(b), None) => mark(out, "-", listed(b)),
        (None, None) => {}
    }
}

/// A list of network interfaces as a layout: `33 interfaces: ENA + 32 EFA-only over 32
/// cards`; `None` for anything else.
fn nic_layout(v: &Value) -> Option<String> {
    let nics = v.as_array().filter(|l| !l.is_empty())?;
    let mut cards = std::collections::BTreeSet::new();
    let (mut ena, mut efa, mut efa_only) = (0, 0, 0);
    for nic in nics {
        cards.insert(nic.get("network_card_index")?.as_i64()?);
        match nic.get("interface_type").and_then(Value::as_str).unwrap_or("interface") {
            "efa" => efa += 1,
            "efa-only" => efa_only += 1,
            _ => ena += 1,
        }
    }
    let count = |n: usize, what: &str| match n {
        0 => None,
        1 if what == "ENA" => Some("ENA".to_owned()),
        n => Some(format!("{n} {what}")),
    };
    let kinds: Vec<String> = [count(ena, "ENA"), count(efa, "EFA"), count(efa_only, "EFA-only")]
        .into_iter()
        .flatten()
        .collect();
    let plural = |n: usize, one: &str| if n == 1 { one.to_owned() } else { format!("{one}s") };
    Some(format!(
        "{} {}: {} over {} {}",
        nics.len(),
        plural(nics.len(), "interface"),
        kinds.join(" + "),
        cards.len(),
        plural(cards.len(), "card")
    ))
}

/// What a change's header names in parentheses: its kind, or for a Kubernetes object the
/// object itself (`k8s: DaemonSet kube-system/nvidia-device-plugin`).
fn kind_label(c: &Change) -> String {
    let manifest = c.after.as_ref().or(c.before.as_ref()).and_then(|a| a.get("manifest"));
    match (c.kind.as_str(), manifest) {
        ("k8s_object", Some(m)) => {
            let text = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or("?");
            match m.pointer("/metadata/namespace").and_then(Value::as_str) {
                Some(ns) => format!("k8s: {} {ns}/{}", text("/kind"), text("/metadata/name")),
                None => format!("k8s: {} {}", text("/kind"), text("/metadata/name")),
            }
        }
        _ => c.kind.clone(),
    }
}

fn change_block(out: &mut String, c: &Change) {
    let mut header = format!("  {} {} ({})", c.action.symbol(), c.address, kind_label(c));
    if !c.replace_because.is_empty() {
        let _ = write!(header, ", replaced because {} changed", c.replace_because.join(", "));
    }
    if c.destroys_data {
        header.push_str(" (DESTROYS DATA)");
    }
    if let Some(p) = &c.purchase {
        let _ = write!(header, " (BUYS: {} upfront, not refundable)", money(p.upfront, &p.currency));
    }
    if let Some(reason) = &c.reason {
        let _ = write!(header, " — {reason}");
    }
    let _ = writeln!(out, "{header}");
    if let Some(p) = &c.purchase {
        let _ = writeln!(out, "      buys {}", p.what);
    }
    if c.action != Action::Delete {
        let nothing = Value::Object(Default::default());
        attribute_lines(
            out,
            "",
            Some(c.before.as_ref().unwrap_or(&nothing)),
            c.after.as_ref(),
            &c.replace_because,
        );
    }
}

/// The summary line.
pub fn summary(plan: &Plan) -> String {
    if plan.is_empty() {
        return match plan.mode {
            Mode::Apply => format!("No changes. The stack matches its state ({} resources).", plan.unchanged),
            Mode::Destroy => "No changes. The state holds no resources to destroy.".into(),
        };
    }
    let imports = match plan.imports.len() {
        0 => String::new(),
        n => format!("{n} to import, "),
    };
    let mut line = format!(
        "Plan: {imports}{} to add, {} to change, {} to replace, {} to destroy.",
        plan.count(Action::Create),
        plan.count(Action::Update),
        plan.count(Action::Replace),
        plan.count(Action::Delete)
    );
    let mut fees: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for (_, p) in plan.purchases() {
        *fees.entry(p.currency.as_str()).or_default() += p.upfront;
    }
    if !fees.is_empty() {
        let total: Vec<String> = fees.iter().map(|(currency, fee)| money(*fee, currency)).collect();
        let _ = write!(
            line,
            "\nPurchases: {} upfront, not refundable (`up` buys only with `--allow-purchase`).",
            total.join(" + ")
        );
    }
    line
}

/// `13209.6` in USD → `$13,209.60`; another currency is written after the amount; a fee that
/// is not a number, `unknown`.
pub fn money(amount: f64, currency: &str) -> String {
    if !amount.is_finite() {
        return "unknown".into();
    }
    let grouped = crate::cost::thousands(amount, 2);
    match currency {
        "USD" => format!("${grouped}"),
        other => format!("{grouped} {other}"),
    }
}

/// The objects the plan reads and the reads it forgets, as text: `<= aws_vpc.shared (aws_vpc,
/// vpc-…)`.
fn reads(out: &mut String, plan: &Plan) {
    if !plan.reads.is_empty() {
        out.push_str("forge reads these existing objects and never changes them:\n\n");
        for r in &plan.reads {
            let _ = writeln!(out, "  <= {} ({}, {})", r.address, r.kind, r.id.as_deref().unwrap_or_default());
        }
        out.push('\n');
    }
    if !plan.forgets.is_empty() {
        out.push_str("forge forgets these existing objects it read, and leaves them as they are:\n\n");
        for address in &plan.forgets {
            let _ = writeln!(out, "  - {address} (read only: no call)");
        }
        out.push('\n');
    }
}

/// The whole plan as text.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    reads(&mut out, plan);
    if !plan.imports.is_empty() {
        out.push_str("forge imports these objects (marks them as its own and records them, before the changes):\n\n");
        for r in &plan.imports {
            let _ = writeln!(
                out,
                "  <= import {} ({}, {})",
                r.address,
                r.kind,
                r.id.as_deref().unwrap_or_default()
            );
        }
        out.push('\n');
    }
    if !plan.changes.is_empty() {
        out.push_str("forge will perform these actions:\n\n");
        for c in &plan.changes {
            change_block(&mut out, c);
        }
        out.push('\n');
    }
    out.push_str(&summary(plan));
    out.push('\n');
    if !plan.deferred.is_empty() {
        out.push_str(&format!(
            "\nPending, left for a run that reaches the clusters (--skip-in-cluster): {} change(s)\n",
            plan.deferred.len()
        ));
        for c in &plan.deferred {
            out.push_str(&format!("  {} {}\n", c.action.symbol(), c.address));
        }
    }
    for note in &plan.notes {
        out.push_str(&format!("\nNote: {note}\n"));
    }
    if let Some(cost) = &plan.cost {
        out.push_str(&crate::cost::render::plan(cost));
    }
    out
}

/// A drift value: as in a stack file, `null` as "(absent)".
fn live_value(v: &Value) -> String {
    if v.is_null() { "(absent)".into() } else { value(v) }
}

/// What differs in one attribute, for people: `tags.team: "ml" -> "ops"`, or for lists the
/// items only live (`+`) and only applied (`-`), one per line.
pub fn attribute_drift(a: &AttributeDrift) -> Vec<String> {
    if let (Value::Array(applied), Value::Array(live)) = (&a.applied, &a.live) {
        let added = live
            .iter()
            .filter(|x| !applied.contains(x))
            .map(|x| format!("{}: + {}", a.attribute, value(x)));
        let removed = applied
            .iter()
            .filter(|x| !live.contains(x))
            .map(|x| format!("{}: - {}", a.attribute, value(x)));
        let lines: Vec<String> = added.chain(removed).collect();
        if !lines.is_empty() {
            return lines;
        }
    }
    vec![format!("{}: {} -> {}", a.attribute, live_value(&a.applied), live_value(&a.live))]
}

/// One line per drifted resource with its attributes under it: `~` changed outside forge, `-`
/// deleted outside forge, `?` unmanaged.
pub fn drift(d: &Drift) -> String {
    let mut out = String::new();
    for c in &d.changed {
        let _ = writeln!(out, "  ~ {} ({}, {}) changed outside forge", c.address, c.kind, c.id);
        for a in &c.attributes {
            for line in attribute_drift(a) {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
    for g in &d.deleted {
        let _ = writeln!(out, "  - {} ({}, {}) deleted outside forge", g.address, g.kind, g.id);
    }
    for u in &d.unmanaged {
        let _ = writeln!(
            out,
            "  ? {} {} unmanaged: tagged as `{}` of this stack, but the state does not know it",
            u.kind, u.id, u.tagged_address
        );
    }
    for c in &d.read_changed {
        let _ = writeln!(
            out,
            "  <= {} ({}, {}) read as existing: changed where the stack refers to it (forge never changes it; `up` passes the new values on)",
            c.address, c.kind, c.id
        );
        for a in &c.attributes {
            for line in attribute_drift(a) {
                let _ = writeln!(out, "      {line}");
            }
        }
    }
    for g in &d.read_gone {
        let _ = writeln!(
            out,
            "  <= {} ({}, {}) read as existing: gone, nothing matches its `existing` any more",
            g.address, g.kind, g.id
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fees_read_as_money() {
        assert_eq!(money(13209.6, "USD"), "$13,209.60");
        assert_eq!(money(5.0, "USD"), "$5.00");
        assert_eq!(money(1234567.891, "EUR"), "1,234,567.89 EUR");
        assert_eq!(money(f64::NAN, "USD"), "unknown");
    }

    #[test]
    fn network_interfaces_read_as_their_layout() {
        let nic = |card: u32, kind: &str| json!({ "network_card_index": card, "device_index": 0, "interface_type": kind });
        let mut p5 = vec![nic(0, "interface"), nic(0, "efa-only")];
        p5.extend((1..32).map(|c| nic(c, "efa-only")));
        assert_eq!(
            nic_layout(&json!(p5)).as_deref(),
            Some("33 interfaces: ENA + 32 EFA-only over 32 cards")
        );
        let plain = json!([{ "network_card_index": 0, "device_index": 0 }]);
        assert_eq!(nic_layout(&plain).as_deref(), Some("1 interface: ENA over 1 card"));
        assert_eq!(nic_layout(&json!(["sg-1"])), None);
    }
}

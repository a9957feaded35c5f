//! What blocks accept: attribute types, the one declaration each resource kind makes of its
//! block type, attributes and outputs ([`Spec`], written with [`attributes!`]), and the checks of
//! values against them that the stack loader, the components and the planner share. It sits
//! below all of them and depends on nothing of forge's but the template syntax.

use serde_json::Value;

/// The type a block attribute must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// A string.
    String,
    /// A whole number.
    Integer,
    /// `true` or `false`.
    Bool,
    /// A TOML table.
    Table,
    /// A TOML array.
    List,
    /// A file path, relative to the stack file's folder; the loader reads the file, and the
    /// attribute's value is its text (so an edited file shows in the plan).
    File,
    /// A node count, or a `{ min, max }` table to autoscale (components' node groups).
    Size,
    /// `true`, `false`, or the name of something that exists (a node group's placement group).
    BoolOrName,
}

impl FieldType {
    /// The name used in error messages.
    pub fn describe(self) -> &'static str {
        match self {
            FieldType::String => "a string",
            FieldType::Integer => "an integer",
            FieldType::Bool => "a boolean",
            FieldType::Table => "a table",
            FieldType::List => "a list",
            FieldType::File => "a file path (a string)",
            FieldType::Size => "a node count or a `{ min, max }` table",
            FieldType::BoolOrName => "true, false or a name",
        }
    }

    /// True when a literal value is of this type.
    pub fn accepts(self, value: &Value) -> bool {
        match self {
            FieldType::String | FieldType::File => value.is_string(),
            FieldType::Integer => value.is_i64() || value.is_u64(),
            FieldType::Bool => value.is_boolean(),
            FieldType::Table => value.is_object(),
            FieldType::List => value.is_array(),
            FieldType::Size => value.is_i64() || value.is_u64() || value.is_object(),
            FieldType::BoolOrName => value.is_boolean() || value.is_string(),
        }
    }
}

/// One attribute a kind or component accepts.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// Attribute name as written in the stack file.
    pub name: &'static str,
    /// Its type.
    pub ty: FieldType,
    /// Whether a block must set it.
    pub required: bool,
    /// Whether changing it needs a new object (the cloud cannot change it in place).
    pub replaces: bool,
    /// Whether only the create reads it (what a GKE cluster is created with inline), so a
    /// later change of it is no change of the resource.
    pub create_only: bool,
}

impl Field {
    /// An attribute every block must set.
    pub const fn required(name: &'static str, ty: FieldType) -> Field {
        Field {
            name,
            ty,
            required: true,
            replaces: false,
            create_only: false,
        }
    }

    /// An attribute a block may leave out.
    pub const fn optional(name: &'static str, ty: FieldType) -> Field {
        Field {
            name,
            ty,
            required: false,
            replaces: false,
            create_only: false,
        }
    }

    /// The same attribute, whose change forces replacement.
    pub const fn replacing(self) -> Field {
        Field { replaces: true, ..self }
    }
}

/// Where an output's value comes from, which says what a plan knows of it before the call.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// Assigned by the cloud (an id, an ARN, an endpoint): as recorded, else known after apply.
    Cloud,
    /// The block's attribute of this name when the block sets it, else as recorded.
    Attribute(&'static str),
    /// New with every apply (a template's version): known after apply.
    Fresh,
    /// Worked out from the block's attributes and the recorded outputs.
    Computed(fn(&Value, Option<&Value>) -> Value),
}

/// One output a kind computes, readable as `${<address>.<name>}`.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Its name.
    pub name: &'static str,
    /// Where its value comes from.
    pub source: Source,
}

impl Output {
    /// An output the cloud assigns.
    pub const fn cloud(name: &'static str) -> Output {
        Output {
            name,
            source: Source::Cloud,
        }
    }
}

/// What a resource kind declares once: its block type, the attributes its block accepts
/// (which of them force replacement), and the outputs it computes. The loader's checks, the
/// planner's replace decisions and planned outputs, and the kind's own parsing (see
/// [`attributes!`]) all read it.
#[derive(Debug)]
pub struct Spec {
    /// The block type that selects the kind (`aws_vpc`).
    pub name: &'static str,
    /// The attributes.
    pub fields: &'static [Field],
    /// The outputs, readable as `${<address>.<output>}`.
    pub outputs: &'static [Output],
}

impl Spec {
    /// Whether changing `attribute` needs a new object.
    pub fn replaces(&self, attribute: &str) -> bool {
        self.fields.iter().any(|f| f.replaces && f.name == attribute)
    }

    /// The attributes whose change forces replacement, in declaration order.
    pub fn replace_on(&self) -> impl Iterator<Item = &'static str> {
        self.fields.iter().filter(|f| f.replaces).map(|f| f.name)
    }

    /// The outputs' names, in declaration order.
    pub fn output_names(&self) -> impl Iterator<Item = &'static str> {
        self.outputs.iter().map(|o| o.name)
    }

    /// The outputs as far as they are known before the call, from their [`Source`]s (`null`
    /// where unknown); `prior` is the recorded outputs when the resource is updated in place.
    pub fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        let recorded = |name: &str| prior.and_then(|p| p.get(name)).cloned().unwrap_or(Value::Null);
        let planned = self.outputs.iter().map(|output| {
            let value = match output.source {
                Source::Cloud => recorded(output.name),
                Source::Attribute(attribute) => config.get(attribute).cloned().unwrap_or_else(|| recorded(output.name)),
                Source::Fresh => Value::Null,
                Source::Computed(compute) => compute(config, prior),
            };
            (output.name.to_owned(), value)
        });
        Value::Object(planned.collect())
    }

    /// Whether only the create reads `attribute` (see [`Field::create_only`]).
    pub fn create_only(&self, attribute: &str) -> bool {
        self.fields.iter().any(|f| f.create_only && f.name == attribute)
    }
}

/// The attribute type a Rust type stands for in a kind's config (see [`attributes!`]);
/// `Option<T>` is the same type, not required.
pub trait AttributeType {
    /// The attribute's type.
    const TYPE: FieldType;
    /// Whether a block may leave it out with no default.
    const OPTIONAL: bool = false;
}

macro_rules! attribute_types {
    ($($ty:ty => $field:ident),* $(,)?) => {
        $(impl AttributeType for $ty {
            const TYPE: FieldType = FieldType::$field;
        })*
    };
}

attribute_types! {
    String => String,
    bool => Bool,
    i32 => Integer,
    i64 => Integer,
    u16 => Integer,
    u32 => Integer,
    u64 => Integer,
    Value => Table,
    serde_json::Map<String, Value> => Table,
}

impl<T> AttributeType for Vec<T> {
    const TYPE: FieldType = FieldType::List;
}

impl<K, V> AttributeType for std::collections::BTreeMap<K, V> {
    const TYPE: FieldType = FieldType::Table;
}

impl<T: AttributeType> AttributeType for Option<T> {
    const TYPE: FieldType = T::TYPE;
    const OPTIONAL: bool = true;
}

/// Declares a kind once: the serde struct its code parses a block's attributes into, the
/// [`Spec`] (`const SPEC`) the loader checks blocks against, and the kind's
/// [`Declared`](crate::provider::Declared) (its `spec()`). Each output names its
/// [`Source`]: alone, the cloud assigns it; `= attribute` is the block's attribute of the same
/// name (`= attribute other` of another), `= fresh` is new with every apply, `= computed f`
/// is `f(config, prior)`. A field is required unless it is
/// an `Option` or has a `#[serde(default…)]` (its only serde attribute: a rename would part
/// the attribute's name from the field's); its type comes from its Rust type
/// ([`AttributeType`]) unless `as File` (or another [`FieldType`]) says otherwise; `[replace]`
/// marks what forces replacement, `[create_only]` what only the create reads; `extra` lists the optional tables the kind reads from the
/// raw block itself (`tags`, `timeouts`), which the struct leaves out.
///
/// ```ignore
/// attributes! {
///     kind Vpc, spec "aws_vpc", outputs [id, cidr_block = attribute], extra [tags];
///     struct Config {
///         cidr_block: String [replace],
///         #[serde(default = "yes")] enable_dns_hostnames: bool,
///     }
/// }
/// ```
#[cfg_attr(not(any(feature = "aws", feature = "gcp")), allow(unused_macros))]
macro_rules! attributes {
    (
        kind $kind:ident, spec $name:literal,
        outputs [$($output:ident $(= $source:ident $($argument:ident)?)?),* $(,)?] $(, extra [$($extra:ident),* $(,)?])?;
        $(#[$meta:meta])*
        struct $config:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])?
                $field:ident : $ty:ty $(as $override:ident)? $([$replace:ident])?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Deserialize, serde::Serialize)]
        struct $config {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                $field: $ty,
            )*
        }

        /// The kind's declaration: block type, attributes, outputs.
        const SPEC: $crate::schema::Spec = $crate::schema::Spec {
            name: $name,
            fields: &[
                $(
                    $crate::schema::Field {
                        name: stringify!($field),
                        ty: $crate::schema::attributes!(@type $ty $(, $override)?),
                        required: !<$ty as $crate::schema::AttributeType>::OPTIONAL
                            && !$crate::schema::attributes!(@defaulted $($($serde)*)?),
                        replaces: $crate::schema::attributes!(@replace $($replace)?),
                        create_only: $crate::schema::attributes!(@create_only $($replace)?),
                    },
                )*
                $($($crate::schema::Field::optional(stringify!($extra), $crate::schema::FieldType::Table),)*)?
            ],
            outputs: &[$(
                $crate::schema::Output {
                    name: stringify!($output),
                    source: $crate::schema::attributes!(@source $output $(, $source $($argument)?)?),
                },
            )*],
        };

        impl $crate::provider::Declared for $kind {
            fn spec(&self) -> &'static $crate::schema::Spec {
                &SPEC
            }

            /// The block read as the kind reads it (its serde defaults filled in) and written
            /// back over it; an attribute left out that has no default stays out.
            fn with_defaults(&self, config: &serde_json::Value) -> serde_json::Value {
                let read = serde_json::from_value::<$config>(config.clone()).ok().and_then(|c| serde_json::to_value(c).ok());
                let mut full = config.clone();
                if let (Some(serde_json::Value::Object(read)), Some(full)) = (read, full.as_object_mut()) {
                    for (key, value) in read.into_iter().filter(|(_, v)| !v.is_null()) {
                        full.entry(key).or_insert(value);
                    }
                }
                full
            }

            fn accepts(&self, config: &serde_json::Value) -> bool {
                serde_json::from_value::<$config>(config.clone()).is_ok()
            }
        }
    };
    (@source $output:ident) => { $crate::schema::Source::Cloud };
    (@source $output:ident, attribute) => { $crate::schema::Source::Attribute(stringify!($output)) };
    (@source $output:ident, attribute $attribute:ident) => { $crate::schema::Source::Attribute(stringify!($attribute)) };
    (@source $output:ident, fresh) => { $crate::schema::Source::Fresh };
    (@source $output:ident, computed $compute:ident) => { $crate::schema::Source::Computed($compute) };
    (@type $ty:ty) => { <$ty as $crate::schema::AttributeType>::TYPE };
    (@type $ty:ty, $override:ident) => { $crate::schema::FieldType::$override };
    (@defaulted default $($rest:tt)*) => { true };
    (@defaulted $($serde:tt)*) => { false };
    (@replace) => { false };
    (@replace replace) => { true };
    (@replace create_only) => { false };
    (@create_only create_only) => { true };
    (@create_only $($other:ident)?) => { false };
}

#[cfg_attr(not(any(feature = "aws", feature = "gcp")), allow(unused_imports))]
pub(crate) use attributes;

/// A component's block, a table nested in it (a node group, a queue), or a provider's settings
/// (`[aws]`), declared with [`block!`]: the serde struct its reader reads it into, and the
/// attributes it accepts.
pub trait Block: serde::de::DeserializeOwned {
    /// The attributes, from the same declaration as the struct: the loader checks written
    /// blocks against them, and [`misfit`] the nested tables.
    const FIELDS: &'static [Field];
}

/// Declares a component's block or nested table once: a serde struct that refuses unknown
/// keys, and its [`Block::FIELDS`]. A field is required unless it is an `Option` or has a
/// `#[serde(default…)]`; its type comes from its Rust type ([`AttributeType`]) unless `as
/// List` (or another [`FieldType`]) says otherwise: an `Option<Value>` that the component
/// hands on to a resource unread says what the resource will take. A visibility before
/// `struct` (`pub struct`) is the struct's and its fields' (the provider settings are read
/// outside their module).
///
/// ```ignore
/// block! {
///     /// A node group.
///     struct NodeGroup {
///         instance_type: String,
///         size: Value as Size,
///         efa: Option<bool>,
///     }
/// }
/// ```
macro_rules! block {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])?
                $field:ident : $ty:ty $(as $override:ident)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])?
                $vis $field: $ty,
            )*
        }

        impl $crate::schema::Block for $name {
            const FIELDS: &'static [$crate::schema::Field] = &[
                $(
                    $crate::schema::Field {
                        name: stringify!($field),
                        ty: $crate::schema::attributes!(@type $ty $(, $override)?),
                        required: !<$ty as $crate::schema::AttributeType>::OPTIONAL
                            && !$crate::schema::attributes!(@defaulted $($($serde)*)?),
                        replaces: false,
                        create_only: false,
                    },
                )*
            ];
        }
    };
}

pub(crate) use block;

/// The first attribute of `config` whose value is known (no references, no unknowns) and of
/// the wrong type.
pub fn mistyped<'f>(fields: &'f [Field], config: &Value) -> Option<&'f Field> {
    use crate::template;
    fields.iter().find(|f| {
        config
            .get(f.name)
            .is_some_and(|v| template::is_known(v) && template::references(v).is_ok_and(|r| r.is_empty()) && !f.ty.accepts(v))
    })
}

/// What is wrong with a block's attributes as its kind declares them (see [`misfit`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Misfit {
    /// A key the kind does not accept.
    Unknown(String),
    /// A required attribute that is not set.
    Missing(&'static str),
    /// A known value of the wrong type: the attribute, its type and what was found.
    Mistyped(&'static str, FieldType, &'static str),
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Misfit::Unknown(key) => write!(f, "unknown key `{key}`"),
            Misfit::Missing(key) => write!(f, "`{key}` is missing"),
            Misfit::Mistyped(key, ty, found) => write!(f, "`{key}` must be {}, not {found}", ty.describe()),
        }
    }
}

/// The first thing wrong with the attributes `config` of a block that accepts `fields`: a key
/// it does not accept (besides `meta`, the engine's own keys), a required attribute missing, or
/// a known value of the wrong type (references and values known only after apply are not
/// checked). The loader holds the blocks components generate to it, as it holds written blocks
/// to the same rules with their places in the file; components hold their nested tables to it.
pub fn misfit(fields: &'static [Field], meta: &[&str], config: &serde_json::Map<String, Value>) -> Option<Misfit> {
    if let Some(key) = config
        .keys()
        .find(|k| !meta.contains(&k.as_str()) && !fields.iter().any(|f| f.name == k.as_str()))
    {
        return Some(Misfit::Unknown(key.clone()));
    }
    if let Some(field) = fields.iter().find(|f| f.required && !config.contains_key(f.name)) {
        return Some(Misfit::Missing(field.name));
    }
    let config = Value::Object(config.clone());
    mistyped(fields, &config).map(|f| Misfit::Mistyped(f.name, f.ty, describe(&config[f.name])))
}

/// "an integer", "a string", … for messages about a value's type.
pub fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => FieldType::Bool.describe(),
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => FieldType::Integer.describe(),
        Value::String(_) => FieldType::String.describe(),
        Value::Array(_) => FieldType::List.describe(),
        Value::Object(_) => FieldType::Table.describe(),
    }
}

/// What is wrong with one entry of a `kind` block's `timeouts`, if anything: the message and
/// a hint. Every kind times its create, update and delete; an in-cluster object also how long
/// forge tries its cluster's endpoint (`reach`) and waits for the cluster to serve its kind
/// (`api`).
pub fn timeout_problem(kind: &str, operation: &str, value: &Value) -> Option<(String, String)> {
    let operations: &[&str] = match kind {
        "k8s_object" => &["create", "update", "delete", "reach", "api"],
        _ => &["create", "update", "delete"],
    };
    if !operations.contains(&operation) {
        return Some(("not an operation with a timeout".into(), suggestion(operation, operations)));
    }
    match value.as_str().map(humantime::parse_duration) {
        Some(Ok(_)) => None,
        _ => Some((
            format!("must be a duration, not {}", describe(value)),
            "write it like \"45m\", \"1h 30m\" or \"90s\"".into(),
        )),
    }
}

/// Suggests the candidate closest to `word`, if one is close enough to be a likely typo.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// "did you mean `x`?" or the list of what is valid.
pub fn suggestion(word: &str, candidates: &[&str]) -> String {
    match did_you_mean(word, candidates.iter().copied()) {
        Some(best) => format!("did you mean `{best}`?"),
        None if candidates.is_empty() => "nothing is accepted here".to_owned(),
        None => format!(
            "expected one of: {}",
            candidates.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestKind;

    fn greeting(config: &Value, _: Option<&Value>) -> Value {
        serde_json::json!(format!("hello {}", config["name"].as_str().unwrap_or_default()))
    }

    attributes! {
        kind TestKind, spec "test_kind", outputs [id, name = attribute, label = attribute note, version = fresh, greeting = computed greeting], extra [tags];
        struct Config {
            name: String [replace],
            #[serde(default)] count: i64,
            note: Option<String>,
            body: Option<String> as File,
        }
    }

    #[test]
    fn one_declaration_gives_the_struct_and_the_spec() {
        let shape: Vec<(&str, FieldType, bool, bool)> = SPEC.fields.iter().map(|f| (f.name, f.ty, f.required, f.replaces)).collect();
        assert_eq!(
            shape,
            [
                ("name", FieldType::String, true, true),
                ("count", FieldType::Integer, false, false),
                ("note", FieldType::String, false, false),
                ("body", FieldType::File, false, false),
                ("tags", FieldType::Table, false, false),
            ]
        );
        assert!(SPEC.replaces("name") && !SPEC.replaces("count"));
        assert!(std::ptr::eq(crate::provider::Declared::spec(&TestKind), &SPEC));
        let parsed: Config = serde_json::from_value(serde_json::json!({ "name": "a", "tags": {} })).unwrap();
        assert_eq!((parsed.name.as_str(), parsed.count, parsed.note, parsed.body), ("a", 0, None, None));
    }

    #[test]
    fn planned_outputs_come_from_their_declared_sources() {
        let config = serde_json::json!({ "name": "a" });
        let prior = serde_json::json!({ "id": "i-1", "name": "old", "label": "kept", "version": 3, "greeting": "x" });
        assert_eq!(
            SPEC.planned_outputs(&config, None),
            serde_json::json!({ "id": null, "name": "a", "label": null, "version": null, "greeting": "hello a" })
        );
        assert_eq!(
            SPEC.planned_outputs(&config, Some(&prior)),
            serde_json::json!({ "id": "i-1", "name": "a", "label": "kept", "version": null, "greeting": "hello a" })
        );
    }

    #[test]
    fn misfit_finds_unknown_missing_and_mistyped_keys() {
        let check = |config: serde_json::Value| misfit(SPEC.fields, &["depends_on"], config.as_object().unwrap());
        assert_eq!(
            check(serde_json::json!({ "name": "a", "count": "${var.n}", "depends_on": [] })),
            None
        );
        assert_eq!(
            check(serde_json::json!({ "name": "a", "cuont": 2 })),
            Some(Misfit::Unknown("cuont".into()))
        );
        assert_eq!(check(serde_json::json!({ "count": 2 })), Some(Misfit::Missing("name")));
        assert_eq!(
            check(serde_json::json!({ "name": "a", "count": "2" })),
            Some(Misfit::Mistyped("count", FieldType::Integer, "a string"))
        );
    }
}

//! Reading and checking a stack file. Every error names the file, line and key.

use super::diagnostic::{SourceFile, StackError};
use super::{Resource, Stack};
use crate::components::{self, Component, Input, Part};
use crate::facts::{Facts, Needs};
use crate::provider::settings::{GcpEndpoints, Providers};
use crate::provider::{Lookups, Registry, Selector};
use crate::schema::{Field, FieldType, describe, mistyped, suggestion, timeout_problem};
use crate::state::Backend;
use crate::template::{self, Address, Reference};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Where each string of a block sits in the file, by JSON pointer (`/triggers/nodes`).
type Spans = HashMap<String, Range<usize>>;

/// The entries of a list of strings (`depends_on`), each with where it sits in the file.
type Listed = Vec<(String, Range<usize>)>;

/// The tags or labels a provider's settings give every resource of its kinds, when the stack
/// sets them.
struct DefaultLabels<'a> {
    /// The tags or labels.
    values: Option<&'a Map<String, Value>>,
    /// The provider's kinds: those whose type starts with this.
    prefix: &'static str,
    /// The attribute they go in: the first of these the kind has.
    attributes: &'static [&'static str],
}

/// Per provider, the tags or labels every resource of its kinds gets (see [`DefaultLabels`]).
fn default_labels(providers: &Providers) -> [DefaultLabels<'_>; 2] {
    [
        DefaultLabels {
            values: providers.aws.as_ref().and_then(|a| a.default_tags.as_ref()),
            prefix: "aws_",
            attributes: &["tags"],
        },
        DefaultLabels {
            values: providers.gcp.as_ref().and_then(|g| g.default_labels.as_ref()),
            prefix: "google_",
            attributes: &["resource_labels", "labels"],
        },
    ]
}

/// The state backends, and the keys `[state]` takes.
const BACKENDS: &[&str] = &["local", "s3", "gcs"];
const STATE_KEYS: &[&str] = &[
    "backend",
    "path",
    "bucket",
    "key",
    "region",
    "kms_key_id",
    "prefix",
    "kms_key_name",
    "lease",
];
/// The `[state]` keys of each remote backend (beside `backend` and `path`, which all take).
const REMOTE_KEYS: &[(&str, &[&str])] = &[
    ("s3", &["bucket", "key", "region", "kms_key_id", "lease"]),
    ("gcs", &["bucket", "prefix", "kms_key_name", "lease"]),
];

const SECTIONS: &[&str] = &["stack", "aws", "gcp", "state", "vars", "outputs", "import"];
const META_KEYS: &[&str] = &["depends_on", "ignore_changes"];
/// The key that makes a block read an object instead of making one.
const EXISTING: &str = "existing";

/// The local state file of stack `name` by default: `state/<name>.json`.
fn default_state_path(name: &str) -> PathBuf {
    PathBuf::from(format!("state/{name}.json"))
}

/// What a remote state takes from the provider settings: an S3 bucket's region (unless
/// `[state] region` gives it) from `[aws] region`; a GCS bucket's project and endpoint from
/// `[gcp] project` and `endpoints.storage`.
fn provider_settings(state: &mut Backend, providers: &Providers) {
    match state {
        Backend::S3 { region, .. } => {
            if region.is_none() {
                *region = providers.aws_region().map(str::to_owned);
            }
        }
        Backend::Gcs { project, endpoint, .. } => {
            let gcp = providers.gcp.as_ref();
            *project = gcp.and_then(|g| g.project.clone());
            *endpoint = gcp
                .and_then(|g| g.endpoints.as_ref())
                .and_then(|e| e.get("storage"))
                .map(str::to_owned);
        }
        Backend::Local { .. } => {}
    }
}

/// Reads and checks the stack file at `path`, with `--var` overrides; `facts` answers the
/// components' questions about instance types (see [`Facts`]). [`parse`] and
/// [`Parsed::finish`] in one, for commands that ask the clouds nothing.
pub fn load(path: &Path, overrides: &[(String, String)], registry: &Registry, facts: &Facts) -> Result<Stack, LoadError> {
    Ok(parse(path, overrides, registry)?.finish(registry, facts)?)
}

/// Reads the stack file at `path` once and checks everything but what needs cloud facts.
pub fn parse(path: &Path, overrides: &[(String, String)], registry: &Registry) -> Result<Parsed, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read {
        path: path.to_owned(),
        source: e,
    })?;
    Ok(parse_str(&path.display().to_string(), &text, overrides, registry)?)
}

/// Why a stack could not be loaded.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read the stack file `{}`", path.display())]
    #[diagnostic(help("check the path; stack files are TOML, e.g. `examples/hello.toml`"))]
    Read {
        /// The path given.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file has a problem.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(#[from] StackError),
}

/// Checks a stack given as text; `name` is the file name shown in errors.
pub fn load_str(name: &str, text: &str, overrides: &[(String, String)], registry: &Registry, facts: &Facts) -> Result<Stack, StackError> {
    parse_str(name, text, overrides, registry)?.finish(registry, facts)
}

/// [`parse`] of a stack given as text; `name` is the file name shown in errors.
pub fn parse_str(name: &str, text: &str, overrides: &[(String, String)], registry: &Registry) -> Result<Parsed, StackError> {
    let file = SourceFile {
        name: name.to_owned(),
        text: Arc::from(text),
    };
    let first = Loader { file: &file, registry }.parse(text, overrides)?;
    Ok(Parsed { file, ..first })
}

/// A stack file read, parsed and checked up to its components' expansion, which may need cloud
/// facts (instance types and the zones offering them): [`Parsed::needs`] says which,
/// [`Parsed::finish`] expands the components with them and resolves every reference.
pub struct Parsed {
    file: SourceFile,
    name: String,
    description: Option<String>,
    providers: Providers,
    state: Backend,
    /// `[outputs]` as written, checked after the resources as always.
    outputs: Option<Outputs>,
    /// `[[import]]` entries, checked against the resources once they are all known.
    imports: Vec<super::Import>,
    blocks: Vec<Block>,
    pending: Vec<PendingComponent>,
}

impl Parsed {
    /// The provider settings (`[aws]`, `[gcp]`): how to reach the clouds the facts come from.
    pub fn providers(&self) -> &Providers {
        &self.providers
    }

    /// The facts the components ask about, learned by expanding them against the built-in
    /// table with every unknown name let through (what goes wrong there, [`Parsed::finish`]
    /// reports).
    pub fn needs(&self, registry: &Registry) -> Needs {
        let probe = Facts::probe();
        let _ = self.finish(registry, &probe);
        Needs {
            instance_types: probe.asked(),
            bundles: probe.bundles_asked(),
        }
    }

    /// Expands the components with `facts`, adds the providers' default tags and resolves
    /// every reference: the validated [`Stack`].
    pub fn finish(&self, registry: &Registry, facts: &Facts) -> Result<Stack, StackError> {
        Loader {
            file: &self.file,
            registry,
        }
        .finish(self, facts)
    }
}

/// `[outputs]` as written, where it sits, and the variables its templates may use.
struct Outputs {
    json: Value,
    spans: Spans,
    span: Range<usize>,
    vars: Map<String, Value>,
}

struct Loader<'a> {
    file: &'a SourceFile,
    registry: &'a Registry,
}

/// A component block, kept until every component's config is known (one may read another's).
#[derive(Clone)]
struct PendingComponent {
    component: &'static Component,
    /// The block as written (its kind the component's name).
    block: Block,
}

/// A block section as written: its key, its type (`null`, `eks`) and its table of named blocks.
type BlockSection<'t> = (&'t Spanned<std::borrow::Cow<'t, str>>, &'t str, &'t Spanned<DeValue<'t>>);

/// The sections of a stack file but `[stack]`: the providers, `[state]` and `[vars]` read;
/// `[outputs]` and the block sections kept as written, for after the `--var` overrides.
struct Sections<'t> {
    providers: Providers,
    state: Backend,
    vars: Map<String, Value>,
    outputs: Option<&'t Spanned<DeValue<'t>>>,
    imports: Option<&'t Spanned<DeValue<'t>>>,
    blocks: Vec<BlockSection<'t>>,
}

/// A block as parsed, before references are checked.
#[derive(Clone)]
struct Block {
    address: String,
    kind: String,
    config: Value,
    explicit_deps: Vec<(String, Range<usize>)>,
    /// `ignore_changes`: attribute paths drift leaves out.
    ignore_changes: Vec<String>,
    spans: Spans,
    span: Range<usize>,
    /// Set when a component made this block: errors point at the component.
    generated: bool,
    /// `existing = …`: the object the block reads instead of making one.
    existing: Option<super::Existing>,
}

impl Loader<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>, label: impl Into<String>, help: impl Into<String>) -> StackError {
        self.file.error(Some(span), message, label, Some(help.into()))
    }

    /// The stack file's text, read and checked up to the components' expansion.
    fn parse(&self, text: &str, overrides: &[(String, String)]) -> Result<Parsed, StackError> {
        let root = self.parse_toml(text)?;
        let root = root.get_ref();

        let Some((_, stack_section)) = root.iter().find(|(k, _)| k.get_ref() == "stack") else {
            return Err(self.file.error(
                Some(0..0),
                "the stack file has no `[stack]` section",
                "expected `[stack]` with a `name`",
                Some("start the file with:\n[stack]\nname = \"my-cluster\"".into()),
            ));
        };
        let (name, description) = self.stack_section(stack_section)?;

        let Sections {
            providers,
            state,
            mut vars,
            outputs,
            imports,
            blocks: block_sections,
        } = self.sections(root, &name)?;
        self.apply_overrides(&mut vars, overrides)?;
        let imports = imports
            .map(|section| self.import_section(section, &vars))
            .transpose()?
            .unwrap_or_default();

        let mut blocks = Vec::new();
        let mut pending = Vec::new();
        for (key, block_type, value) in block_sections {
            let written = self.block_section(key, block_type, value, &vars)?;
            match components::find(block_type) {
                Some(component) => pending.extend(written.into_iter().map(|block| PendingComponent { component, block })),
                None => blocks.extend(written),
            }
        }
        let outputs = outputs.map(|section| self.outputs_section(section, vars)).transpose()?;
        Ok(Parsed {
            file: self.file.clone(),
            name,
            description,
            providers,
            state,
            outputs,
            imports,
            blocks,
            pending,
        })
    }

    /// `[[import]]` entries: each `to` (an address) and `id` (variables substituted), both
    /// strings known when the stack loads.
    fn import_section(&self, section: &Spanned<DeValue>, vars: &Map<String, Value>) -> Result<Vec<super::Import>, StackError> {
        let hint = "write each as `[[import]]` with `to = \"aws_vpc.main\"` and `id = \"vpc-…\"`";
        let DeValue::Array(entries) = section.get_ref() else {
            return Err(self.err(section.span(), "`import` must be a list of tables", "not a list", hint));
        };
        let mut imports = Vec::new();
        for entry in entries {
            let table = self.table(entry, "import", hint)?;
            self.known_keys("import", table, &["to", "id"])?;
            let (json, spans) = self.to_json(entry, "")?;
            let json = self.substitute_vars(&json, &spans, vars)?;
            let text = |key: &str| {
                let value = json.get(key).and_then(Value::as_str).filter(|v| !v.trim().is_empty());
                let literal = value.filter(|v| template::references(&Value::String((*v).to_owned())).is_ok_and(|r| r.is_empty()));
                literal.map(str::to_owned).ok_or_else(|| {
                    self.err(
                        spans.get(&format!("/{key}")).cloned().unwrap_or(entry.span()),
                        format!("`import.{key}` must be a string known when the stack loads"),
                        if value.is_some() {
                            "a reference"
                        } else {
                            "missing or not a string"
                        },
                        hint,
                    )
                })
            };
            imports.push(super::Import {
                to: text("to")?,
                id: text("id")?,
                span: entry.span(),
            });
        }
        Ok(imports)
    }

    /// The file as a TOML table, or an error at what is not TOML (a key declared twice).
    fn parse_toml<'t>(&self, text: &'t str) -> Result<Spanned<DeTable<'t>>, StackError> {
        DeTable::parse(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            if e.message().contains("duplicate key") {
                let key = text.get(span.clone()).unwrap_or_default();
                return self.file.error(
                    Some(span),
                    format!("duplicate `{key}`: this block or key is declared twice"),
                    "declared again here",
                    Some("each address (`[<type>.<name>]`) and key may appear once; rename or merge one of them".into()),
                );
            }
            self.file.error(
                Some(span),
                format!("the stack file is not valid TOML: {}", e.message().trim_end()),
                "here",
                Some("fix the TOML syntax; see docs/stack-format.md".into()),
            )
        })
    }

    /// The sections but `[stack]`, in file order (see [`Sections`]); `name` is the stack's.
    fn sections<'t>(&self, root: &'t DeTable<'t>, name: &str) -> Result<Sections<'t>, StackError> {
        let mut sections = Sections {
            providers: Providers::default(),
            state: Backend::Local {
                path: default_state_path(name),
            },
            vars: Map::new(),
            outputs: None,
            imports: None,
            blocks: Vec::new(),
        };
        for (key, value) in root {
            match key.get_ref().as_ref() {
                "stack" => {}
                "aws" => sections.providers.aws = Some(self.provider_section("aws", value)?),
                "gcp" => sections.providers.gcp = Some(self.provider_section("gcp", value)?),
                "state" => sections.state = self.state_section(value, name)?,
                "vars" => {
                    self.table(value, "vars", "write `[vars]` with `name = default` lines")?;
                    sections.vars = self.to_json(value, "")?.0.as_object().cloned().unwrap_or_default();
                }
                "outputs" => sections.outputs = Some(value),
                "import" => sections.imports = Some(value),
                block_type => sections.blocks.push((key, block_type, value)),
            }
        }
        provider_settings(&mut sections.state, &sections.providers);
        Ok(sections)
    }

    /// A block section (`[null.a]`, `[eks.main]`, …): each named block it holds, checked
    /// against its kind's or component's schema.
    fn block_section(
        &self,
        key: &Spanned<std::borrow::Cow<str>>,
        block_type: &str,
        value: &Spanned<DeValue>,
        vars: &Map<String, Value>,
    ) -> Result<Vec<Block>, StackError> {
        let kind_fields = self.registry.get(block_type).map(|k| k.spec().fields);
        let comp = components::find(block_type);
        let Some(fields) = kind_fields.or(comp.map(|c| c.schema)) else {
            let known: Vec<&str> = SECTIONS
                .iter()
                .copied()
                .chain(self.registry.names())
                .chain(components::builtin().iter().map(|c| c.name))
                .collect();
            return Err(self.err(
                key.span(),
                format!("unknown section `{block_type}`"),
                "not a section, resource kind or component",
                suggestion(block_type, &known),
            ));
        };
        let DeValue::Table(named) = value.get_ref() else {
            return Err(self.err(
                value.span(),
                format!("`{block_type}` must hold named blocks"),
                "expected a table",
                format!("write `[{block_type}.<name>]`"),
            ));
        };
        named
            .iter()
            .map(|(block_name, body)| self.written_block(block_type, block_name, body, fields, comp.is_none(), vars))
            .collect()
    }

    /// One written block of a section whose schema is `fields` (a resource kind's when
    /// `of_kind`, else a component's): keys and types checked, variables substituted, files read.
    fn written_block(
        &self,
        block_type: &str,
        block_name: &Spanned<std::borrow::Cow<str>>,
        body: &Spanned<DeValue>,
        fields: &[Field],
        of_kind: bool,
        vars: &Map<String, Value>,
    ) -> Result<Block, StackError> {
        let address = format!("{block_type}.{}", block_name.get_ref());
        self.check_block_name(block_name)?;
        let header = block_name.span();
        let body_table = self.table(body, &address, &format!("write `[{address}]` followed by its attributes"))?;
        let reads = of_kind && body_table.iter().any(|(k, _)| k.get_ref() == EXISTING);
        if reads {
            self.check_existing_keys(&address, block_type, body_table)?;
        }
        let (explicit_deps, ignore_changes) = self.check_attributes(&address, body_table, header.clone(), fields, of_kind, reads)?;
        let (mut config, spans) = self.to_json(body, "")?;
        if let Some(map) = config.as_object_mut() {
            for meta in META_KEYS {
                map.remove(*meta);
            }
        }
        let mut config = self.substitute_vars(&config, &spans, vars)?;
        // A component's `existing` is its own attribute.
        let existing = match config.as_object_mut().filter(|_| of_kind).and_then(|m| m.remove(EXISTING)) {
            Some(written) => Some(self.existing(&address, block_type, &written, &spans)?),
            None => None,
        };
        if let Some(field) = mistyped(fields, &config) {
            return Err(self.err(
                spans.get(&format!("/{}", field.name)).cloned().unwrap_or(header.clone()),
                format!(
                    "`{address}.{}` must be {}, not {}",
                    field.name,
                    field.ty.describe(),
                    describe(&config[field.name])
                ),
                format!("expected {} once variables are substituted", field.ty.describe()),
                "check the variable's value (its default or `--var`)",
            ));
        }
        self.check_timeouts(&address, block_type, &config, &spans)?;
        let config = self.read_files(&address, config, &spans, fields)?;
        Ok(Block {
            address,
            kind: block_type.to_owned(),
            config,
            explicit_deps,
            ignore_changes,
            spans,
            span: header,
            generated: false,
            existing,
        })
    }

    /// A block with `existing` names an object forge only reads: its kind must read such
    /// objects, and it sets nothing else but `ignore_changes`.
    fn check_existing_keys(&self, address: &str, block_type: &str, table: &DeTable) -> Result<(), StackError> {
        let key_span = |name: &str| {
            table
                .iter()
                .find(|(k, _)| k.get_ref() == name)
                .map(|(k, _)| k.span())
                .unwrap_or(0..0)
        };
        if !self.registry.get(block_type).is_some_and(|k| k.lookups().any()) {
            let readers: Vec<&str> = self
                .registry
                .names()
                .filter(|n| self.registry.get(n).is_some_and(|k| k.lookups().any()))
                .collect();
            return Err(self.err(
                key_span(EXISTING),
                format!("`{address}`: forge cannot read an existing `{block_type}` yet"),
                "not for this kind",
                format!(
                    "the kinds that take `existing`: {}; or drop `existing` to have forge make and manage this one",
                    readers.join(", ")
                ),
            ));
        }
        if let Some((key, _)) = table.iter().find(|(k, _)| k.get_ref() == "depends_on") {
            return Err(self.err(
                key.span(),
                format!("`{address}` reads an existing object: `depends_on` cannot delay that read"),
                "no effect here",
                "forge reads existing objects when it plans, before anything is applied, so the object must exist by then: remove `depends_on` (the blocks that refer to this one already follow it)",
            ));
        }
        if let Some((key, _)) = table
            .iter()
            .find(|(k, _)| !matches!(k.get_ref().as_ref(), EXISTING | "ignore_changes"))
        {
            return Err(self.err(
                key.span(),
                format!(
                    "`{address}` reads an existing object, so forge never sets its attributes: `{}` cannot be here",
                    key.get_ref()
                ),
                "set on an existing object",
                "remove it (refer to the object's attributes instead, `${…}`), or remove `existing` to have forge make and manage the object",
            ));
        }
        Ok(())
    }

    /// `existing = "<id or name>"` or `existing = { tags = { … } }`, variables substituted,
    /// in a form the kind reads.
    fn existing(&self, address: &str, block_type: &str, written: &Value, spans: &Spans) -> Result<super::Existing, StackError> {
        let span = spans.get("/existing").cloned().unwrap_or(0..0);
        let lookups = self.registry.get(block_type).map_or(Lookups::NONE, |k| k.lookups());
        let mut forms: Vec<String> = Vec::new();
        if let Some(id) = lookups.id {
            forms.push(format!("`existing = \"<{id}>\"`"));
        }
        if lookups.tags {
            forms.push("`existing = { tags = { name = \"value\" } }`".to_owned());
        }
        if !lookups.attributes.is_empty() {
            let pairs: Vec<String> = lookups
                .attributes
                .iter()
                .map(|(name, takes)| format!("{name} = <{takes}>"))
                .collect();
            forms.push(format!("`existing = {{ {} }}` (any of them)", pairs.join(", ")));
        }
        let forms = forms.join(", or ");
        let refuse = |message: String, label: &str| {
            self.err(
                span.clone(),
                format!("`{address}.existing` {message}"),
                label,
                format!("write {forms}"),
            )
        };
        let literal = super::existing_literal(written).map_err(|unnamed| match unnamed {
            super::Unnamed::Empty => refuse("is empty".into(), "empty"),
            super::Unnamed::Reference(reference) => refuse(
                format!("must be known when the stack loads, not refer to another block (`{reference}`)"),
                "a reference",
            ),
        })?;
        let selector = match &literal {
            Value::String(_) if lookups.id.is_none() => {
                return Err(refuse(format!("cannot name a `{block_type}` by id"), "an id"));
            }
            Value::String(id) => Selector::Id(id.clone()),
            Value::Object(table) if table.len() == 1 && table.contains_key("tags") => {
                let tags: Option<BTreeMap<String, String>> = table["tags"]
                    .as_object()
                    .filter(|t| !t.is_empty())
                    .and_then(|t| t.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect());
                match tags {
                    None => return Err(refuse("needs `tags` as a table of one or more strings".into(), "not tags")),
                    Some(_) if !lookups.tags => {
                        return Err(refuse(format!("cannot find a `{block_type}` by tags"), "by tags"));
                    }
                    Some(tags) => Selector::Tags { tags },
                }
            }
            Value::Object(table) if !table.is_empty() && !table.contains_key("tags") => {
                let mut values = BTreeMap::new();
                for (key, value) in table {
                    let Some((_, takes)) = lookups.attributes.iter().find(|(name, _)| name == key) else {
                        return Err(refuse(format!("cannot find a `{block_type}` by `{key}`"), "not a way to find it"));
                    };
                    let Some(value) = value.as_str() else {
                        return Err(refuse(format!("`{key}` must be {takes}, a string"), "not a string"));
                    };
                    values.insert(key.clone(), value.to_owned());
                }
                Selector::Where(values)
            }
            other => return Err(refuse(format!("must be an id string or a table, not {}", describe(other)), "here")),
        };
        Ok(super::Existing { selector, span })
    }

    /// `[outputs]` as written, with the variables its templates may use.
    fn outputs_section(&self, section: &Spanned<DeValue>, vars: Map<String, Value>) -> Result<Outputs, StackError> {
        let (json, spans) = self.to_json(section, "")?;
        Ok(Outputs {
            json,
            spans,
            span: section.span(),
            vars,
        })
    }

    /// The second half of loading: expands the components of `parsed` with `facts`, adds the
    /// providers' default tags and resolves every reference.
    fn finish(&self, parsed: &Parsed, facts: &Facts) -> Result<Stack, StackError> {
        let Parsed {
            name,
            description,
            providers,
            state,
            outputs,
            pending,
            ..
        } = parsed;
        let mut blocks = parsed.blocks.clone();
        let mut components: HashMap<String, Map<String, Value>> = HashMap::new();
        let written: BTreeMap<String, Map<String, Value>> = pending
            .iter()
            .map(|p| (p.block.address.clone(), p.block.config.as_object().cloned().unwrap_or_default()))
            .collect();
        let resources: BTreeMap<String, Map<String, Value>> = parsed
            .blocks
            .iter()
            .map(|b| (b.address.clone(), b.config.as_object().cloned().unwrap_or_default()))
            .collect();
        let mut readiness = Vec::new();
        for p in pending {
            let expanded = self.expand(p, providers, &written, &resources, facts)?;
            components.insert(p.block.address.clone(), expanded.outputs);
            blocks.extend(expanded.blocks);
            readiness.extend(expanded.ready);
        }

        // The effective tags and labels are part of each resource's attributes, so a change of
        // `default_tags` / `default_labels` shows in the plan and updates them in place.
        for DefaultLabels {
            values,
            prefix,
            attributes: fields,
        } in default_labels(providers)
        {
            let Some(defaults) = values else {
                continue;
            };
            for block in blocks.iter_mut().filter(|b| b.kind.starts_with(prefix)) {
                let Some(spec) = self.registry.get(&block.kind).map(|k| k.spec()) else {
                    continue;
                };
                let Some(field) = fields.iter().find(|f| spec.fields.iter().any(|x| x.name == **f)) else {
                    continue;
                };
                let mut labels = template::quote(&Value::Object(defaults.clone()))
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                if let Some(own) = block.config.get(*field).and_then(Value::as_object) {
                    labels.extend(own.clone());
                }
                block
                    .config
                    .as_object_mut()
                    .expect("blocks are tables")
                    .insert((*field).into(), Value::Object(labels));
            }
        }
        let addresses: HashMap<&str, &Block> = blocks.iter().map(|b| (b.address.as_str(), b)).collect();
        let targets = Targets {
            loader: self,
            blocks: &addresses,
            components: &components,
        };
        let mut resources = Vec::with_capacity(blocks.len());
        for block in &blocks {
            resources.push(targets.resolve_block(block)?);
        }
        let outputs = match outputs {
            Some(outputs) => targets.outputs(outputs)?,
            None => BTreeMap::new(),
        };
        let imports = self.checked_imports(&parsed.imports, &resources)?;
        Ok(Stack {
            name: name.clone(),
            description: description.clone(),
            source: self.file.clone(),
            providers: providers.clone(),
            state: state.clone(),
            outputs,
            resources,
            imports,
            component_outputs: components.into_iter().collect(),
            readiness,
            bundles: facts.unpinned_digests(),
        })
    }

    /// The `[[import]]` entries, each into a resource of the stack that forge can import into,
    /// one entry per resource.
    fn checked_imports(&self, imports: &[super::Import], resources: &[Resource]) -> Result<Vec<super::Import>, StackError> {
        let mut seen = BTreeSet::new();
        for import in imports {
            let refuse = |message: String, hint: String| self.err(import.span.clone(), message, "this import", hint);
            let Some(resource) = resources.iter().find(|r| r.address == import.to) else {
                let known: Vec<&str> = resources.iter().map(|r| r.address.as_str()).collect();
                return Err(refuse(
                    format!("`{}` is no resource of this stack", import.to),
                    suggestion(&import.to, &known),
                ));
            };
            if resource.existing.is_some() {
                return Err(refuse(
                    format!("`{}` reads an existing object: forge never manages it", import.to),
                    "drop `existing` from the block to import the object into it".into(),
                ));
            }
            if !self.registry.get(&resource.kind).is_some_and(|k| k.importable()) {
                let kinds: Vec<&str> = self
                    .registry
                    .names()
                    .filter(|n| self.registry.get(n).is_some_and(|k| k.importable()))
                    .collect();
                return Err(refuse(
                    format!("forge cannot import a `{}` yet", resource.kind),
                    format!("the kinds it imports: {}", kinds.join(", ")),
                ));
            }
            if !seen.insert(import.to.as_str()) {
                return Err(refuse(
                    format!("`{}` is imported twice", import.to),
                    "keep one `[[import]]` per block".into(),
                ));
            }
        }
        Ok(imports.to_vec())
    }

    /// The section as a table, or an error that says how to write `what`.
    fn table<'t>(&self, section: &'t Spanned<DeValue<'t>>, what: &str, how: &str) -> Result<&'t DeTable<'t>, StackError> {
        match section.get_ref() {
            DeValue::Table(table) => Ok(table),
            _ => Err(self.err(section.span(), format!("`{what}` must be a table"), "expected a table", how)),
        }
    }

    fn stack_section(&self, section: &Spanned<DeValue>) -> Result<(String, Option<String>), StackError> {
        let table = self.table(section, "stack", "write `[stack]` with `name = \"…\"`")?;
        self.known_keys("stack", table, &["name", "description"])?;
        let string = |key: &str| -> Result<Option<(String, Range<usize>)>, StackError> {
            match table.iter().find(|(k, _)| k.get_ref() == key) {
                None => Ok(None),
                Some((_, v)) => match v.get_ref() {
                    DeValue::String(s) => Ok(Some((s.to_string(), v.span()))),
                    _ => Err(self.err(
                        v.span(),
                        format!("`stack.{key}` must be a string"),
                        "not a string",
                        format!("write `{key} = \"…\"`"),
                    )),
                },
            }
        };
        let Some((name, span)) = string("name")? else {
            return Err(self.err(
                section.span(),
                "`[stack]` has no `name`",
                "missing `name`",
                "add `name = \"my-cluster\"`: it names the state and tags every resource",
            ));
        };
        let valid = name.len() <= 40
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            return Err(self.err(
                span,
                format!("invalid stack name `{name}`"),
                "invalid name",
                "a stack name is 1 to 40 characters: a lowercase letter, then lowercase letters, digits or `-`",
            ));
        }
        Ok((name, string("description")?.map(|(d, _)| d)))
    }

    /// `[provider]`, checked against the keys and types its settings struct `T` declares and
    /// read into it.
    fn provider_section<T: crate::schema::Block>(&self, provider: &str, section: &Spanned<DeValue>) -> Result<T, StackError> {
        let table = self.table(section, provider, &format!("write `[{provider}]`"))?;
        let fields = T::FIELDS;
        let names: Vec<&str> = fields.iter().map(|f| f.name).collect();
        self.known_keys(provider, table, &names)?;
        for (key, value) in table {
            let field = fields.iter().find(|f| f.name == key.get_ref()).expect("checked above");
            let literal = self.to_json(value, "")?.0;
            let strings_only = literal.as_object().is_none_or(|m| m.values().all(Value::is_string));
            if !field.ty.accepts(&literal) || !strings_only {
                let expected = if field.ty == FieldType::Table {
                    "a table of strings"
                } else {
                    field.ty.describe()
                };
                return Err(self.err(
                    value.span(),
                    format!("`{provider}.{}` must be {expected}", key.get_ref()),
                    format!("expected {expected}"),
                    format!("see `[{provider}]` in docs/stack-format.md"),
                ));
            }
            if key.get_ref() == "endpoints"
                && let DeValue::Table(endpoints) = value.get_ref()
            {
                let services: Vec<&str> = <GcpEndpoints as crate::schema::Block>::FIELDS.iter().map(|f| f.name).collect();
                self.known_keys("gcp.endpoints", endpoints, &services)?;
            }
        }
        let settings = self.to_json(section, "")?.0;
        serde_json::from_value(settings).map_err(|e| {
            self.err(
                section.span(),
                format!("`[{provider}]`: {e}"),
                "in this table",
                format!("see `[{provider}]` in docs/stack-format.md"),
            )
        })
    }

    /// `[state]`: the backend and its keys (`stack_name` names the default file and key). The
    /// settings a remote state takes from `[aws]` / `[gcp]`, [`provider_settings`] adds.
    fn state_section(&self, section: &Spanned<DeValue>, stack_name: &str) -> Result<Backend, StackError> {
        let table = self.table(
            section,
            "state",
            "write `[state]` with `backend` and `path`, or `backend = \"s3\"` (or `\"gcs\"`) and `bucket`",
        )?;
        self.known_keys("state", table, STATE_KEYS)?;
        let mut values = self.state_values(table)?;
        let backend = values.remove("backend").unwrap_or_else(|| "local".to_owned());
        self.check_state_owners(table, &backend)?;
        let path = values.remove("path").map_or_else(|| default_state_path(stack_name), PathBuf::from);
        if backend == "local" {
            return Ok(Backend::Local { path });
        }
        let Some(bucket) = values.remove("bucket") else {
            return Err(self.err(
                section.span(),
                format!("`[state] backend = \"{backend}\"` needs a `bucket`"),
                "no bucket",
                "add `bucket = \"my-team-forge-state\"`: an existing bucket, with versioning on to keep every snapshot",
            ));
        };
        // GCS's `prefix` only names the key.
        let key = match (values.remove("key"), values.remove("prefix")) {
            (Some(key), _) => key,
            (None, Some(prefix)) => format!("{}/state.json", prefix.trim_end_matches('/')),
            (None, None) => format!("{stack_name}/state.json"),
        };
        Ok(match backend.as_str() {
            "s3" => Backend::S3 {
                path,
                bucket,
                key,
                region: values.remove("region"),
                kms_key_id: values.remove("kms_key_id"),
                lease: values.remove("lease"),
            },
            _ => Backend::Gcs {
                path,
                bucket,
                key,
                kms_key_name: values.remove("kms_key_name"),
                project: None,
                endpoint: None,
                lease: values.remove("lease"),
            },
        })
    }

    /// The `[state]` values by key, each checked on its own: a string, a backend forge has, a
    /// path that is not empty, a lease that is a duration.
    fn state_values(&self, table: &DeTable) -> Result<HashMap<String, String>, StackError> {
        let mut values = HashMap::new();
        for (key, value) in table {
            let DeValue::String(s) = value.get_ref() else {
                return Err(self.err(
                    value.span(),
                    format!("`state.{}` must be a string", key.get_ref()),
                    "not a string",
                    "write it in quotes",
                ));
            };
            match key.get_ref().as_ref() {
                "backend" if !BACKENDS.contains(&s.as_ref()) => {
                    return Err(self.err(
                        value.span(),
                        format!("unsupported state backend `{s}`"),
                        "unknown backend",
                        format!("use one of: {}", BACKENDS.join(", ")),
                    ));
                }
                "path" if s.is_empty() => {
                    return Err(self.err(
                        value.span(),
                        "`state.path` is empty",
                        "empty path",
                        "give a file path such as `state/my-stack.json`",
                    ));
                }
                "lease" if humantime::parse_duration(s).is_err() => {
                    return Err(self.err(
                        value.span(),
                        format!("`state.lease = \"{s}\"` is not a duration"),
                        "not a duration",
                        "write it like \"2m\" or \"90s\": how long a lock lasts unless its holder renews it",
                    ));
                }
                _ => {}
            }
            values.insert(key.get_ref().to_string(), s.to_string());
        }
        Ok(values)
    }

    /// Refuses a `[state]` key of a remote backend (`REMOTE_KEYS`) that `backend` does not take.
    fn check_state_owners(&self, table: &DeTable, backend: &str) -> Result<(), StackError> {
        let owner = |key: &str| {
            REMOTE_KEYS
                .iter()
                .find(|(_, keys)| keys.contains(&key))
                .map(|(backend, _)| *backend)
        };
        let foreign = table.iter().find(|(k, _)| {
            let key = k.get_ref().as_ref();
            owner(key).is_some() && !REMOTE_KEYS.iter().any(|(b, keys)| *b == backend && keys.contains(&key))
        });
        let Some((key, _)) = foreign else {
            return Ok(());
        };
        let span = key.span();
        let key = key.get_ref().as_ref();
        let owners: Vec<&str> = REMOTE_KEYS
            .iter()
            .filter(|(_, keys)| keys.contains(&key))
            .map(|(b, _)| *b)
            .collect();
        Err(self.err(
            span,
            format!(
                "`state.{key}` is a setting of the `{}` backend{}, not of `{backend}`",
                owners.join("` and `"),
                if owners.len() > 1 { "s" } else { "" },
            ),
            format!("not for `{backend}`"),
            match backend {
                "local" => format!("add `backend = \"{}\"` to keep the state in a bucket, or remove it", owners[0]),
                _ => "remove it, or fix `backend`".to_owned(),
            },
        ))
    }

    fn apply_overrides(&self, vars: &mut Map<String, Value>, overrides: &[(String, String)]) -> Result<(), StackError> {
        for (name, raw) in overrides {
            let Some(default) = vars.get(name) else {
                let declared: Vec<&str> = vars.keys().map(String::as_str).collect();
                return Err(self.file.error(
                    None,
                    format!("`--var {name}` sets a variable the stack does not declare"),
                    "",
                    Some(format!(
                        "declare it under `[vars]` with a default, or fix the name ({})",
                        suggestion(name, &declared)
                    )),
                ));
            };
            let value = parse_var(raw);
            if describe(&value) != describe(default) {
                return Err(self.file.error(
                    None,
                    format!("`--var {name}={raw}` has the wrong type: `{name}` is {}", describe(default)),
                    "",
                    Some(format!("its default is `{default}`; give a value of the same type")),
                ));
            }
            vars.insert(name.clone(), value);
        }
        Ok(())
    }

    fn check_block_name(&self, name: &Spanned<std::borrow::Cow<str>>) -> Result<(), StackError> {
        let n = name.get_ref();
        let valid = n.len() <= 64
            && n.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if valid {
            return Ok(());
        }
        Err(self.err(
            name.span(),
            format!("invalid block name `{n}`"),
            "invalid name",
            "a block name is 1 to 64 characters: a lowercase letter or `_`, then lowercase letters, digits, `_` or `-`",
        ))
    }

    fn known_keys(&self, section: &str, table: &DeTable, allowed: &[&str]) -> Result<(), StackError> {
        for (key, _) in table {
            if !allowed.contains(&key.get_ref().as_ref()) {
                return Err(self.err(
                    key.span(),
                    format!("unknown key `{}` in `{section}`", key.get_ref()),
                    "unknown key",
                    suggestion(key.get_ref(), allowed),
                ));
            }
        }
        Ok(())
    }

    /// Checks keys and literal types against the schema; returns the `depends_on` and
    /// `ignore_changes` entries (whose first segment must be an attribute when `of_kind`; a
    /// component's entries apply to each resource it makes).
    fn check_attributes(
        &self,
        address: &str,
        table: &DeTable,
        header: Range<usize>,
        fields: &[Field],
        of_kind: bool,
        reads: bool,
    ) -> Result<(Listed, Vec<String>), StackError> {
        let existing = of_kind.then_some(EXISTING);
        let allowed: Vec<&str> = fields
            .iter()
            .map(|f| f.name)
            .chain(META_KEYS.iter().copied())
            .chain(existing)
            .collect();
        self.known_keys(address, table, &allowed)?;
        for field in fields.iter().filter(|f| f.required && !reads) {
            if !table.iter().any(|(k, _)| k.get_ref() == field.name) {
                return Err(self.err(
                    header.clone(),
                    format!("`{address}` is missing `{}`", field.name),
                    format!("`{}` is required", field.name),
                    format!("add `{} = …` ({})", field.name, field.ty.describe()),
                ));
            }
        }
        let mut deps = Vec::new();
        let mut ignores = Vec::new();
        for (key, value) in table {
            if key.get_ref() == "ignore_changes" {
                ignores = self.check_ignore_changes(address, value, fields, of_kind)?;
                continue;
            }
            if key.get_ref() == EXISTING {
                continue;
            }
            if key.get_ref() == "depends_on" {
                deps = self.strings(
                    value,
                    &format!("`{address}.depends_on` must be a list of addresses"),
                    "a `depends_on` entry must be an address string",
                    "write `depends_on = [\"null.b\"]`",
                )?;
                continue;
            }
            let field = fields.iter().find(|f| f.name == key.get_ref()).expect("checked above");
            let is_reference =
                matches!(value.get_ref(), DeValue::String(s) if s.trim_start().starts_with("${") && s.trim_end().ends_with('}'));
            let (literal, _) = self.to_json(value, "")?;
            if !is_reference && !field.ty.accepts(&literal) {
                return Err(self.err(
                    value.span(),
                    format!(
                        "`{address}.{}` must be {}, not {}",
                        field.name,
                        field.ty.describe(),
                        describe(&literal)
                    ),
                    format!("expected {}", field.ty.describe()),
                    format!("see `{}` in docs/stack-format.md", address.split('.').next().unwrap_or(address)),
                ));
            }
        }
        Ok((deps, ignores))
    }

    /// `ignore_changes = ["tags.team", "scaling.desired"]`: attribute paths, each starting with
    /// an attribute of the kind.
    fn check_ignore_changes(
        &self,
        address: &str,
        value: &Spanned<DeValue>,
        fields: &[Field],
        of_kind: bool,
    ) -> Result<Vec<String>, StackError> {
        let entries = self.strings(
            value,
            &format!("`{address}.ignore_changes` must be a list of attribute paths"),
            "an `ignore_changes` entry must be an attribute path string",
            "write `ignore_changes = [\"tags.team\"]`: attribute paths whose live changes drift leaves out",
        )?;
        let mut paths = Vec::new();
        for (path, span) in entries {
            let first = path.split('.').next().unwrap_or_default();
            if of_kind && !fields.iter().any(|f| f.name == first) {
                let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
                return Err(self.err(
                    span,
                    format!("`{address}.ignore_changes`: `{path}` names no attribute of this block"),
                    "unknown attribute",
                    suggestion(first, &known),
                ));
            }
            paths.push(path);
        }
        Ok(paths)
    }

    /// A list of strings with each one's span; `not_list` and `not_string` say what is wrong
    /// when it is not one.
    fn strings(
        &self,
        value: &Spanned<DeValue>,
        not_list: &str,
        not_string: &str,
        hint: &str,
    ) -> Result<Vec<(String, Range<usize>)>, StackError> {
        let DeValue::Array(items) = value.get_ref() else {
            return Err(self.err(value.span(), not_list, "not a list", hint));
        };
        items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::String(s) => Ok((s.to_string(), item.span())),
                _ => Err(self.err(item.span(), not_string, "not a string", hint)),
            })
            .collect()
    }

    /// Converts a TOML value to JSON and records where each string and value sits.
    fn to_json(&self, value: &Spanned<DeValue>, pointer: &str) -> Result<(Value, Spans), StackError> {
        let mut spans = Spans::new();
        let json = self.to_json_into(value, pointer, &mut spans)?;
        Ok((json, spans))
    }

    fn to_json_into(&self, value: &Spanned<DeValue>, pointer: &str, spans: &mut Spans) -> Result<Value, StackError> {
        spans.insert(pointer.to_owned(), value.span());
        Ok(match value.get_ref() {
            DeValue::String(s) => Value::String(s.to_string()),
            DeValue::Integer(i) => {
                let digits = i.as_str().replace('_', "");
                match i64::from_str_radix(&digits, i.radix()) {
                    Ok(n) => Value::from(n),
                    Err(_) => return Err(self.err(value.span(), "integer out of range", "too large", "integers must fit in 64 bits")),
                }
            }
            DeValue::Float(f) => match f
                .as_str()
                .replace('_', "")
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
            {
                Some(n) => Value::Number(n),
                None => {
                    return Err(self.err(
                        value.span(),
                        "this number cannot be used",
                        "not a finite number",
                        "use a finite number; `inf` and `nan` are not allowed",
                    ));
                }
            },
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::String(d.to_string()),
            DeValue::Array(items) => Value::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.to_json_into(item, &format!("{pointer}/{i}"), spans))
                    .collect::<Result<_, _>>()?,
            ),
            DeValue::Table(table) => {
                let mut map = Map::new();
                for (k, v) in table {
                    let child = format!("{pointer}/{}", k.get_ref().replace('~', "~0").replace('/', "~1"));
                    spans.insert(format!("{child}#key"), k.span());
                    map.insert(k.get_ref().to_string(), self.to_json_into(v, &child, spans)?);
                }
                Value::Object(map)
            }
        })
    }

    fn substitute_vars(&self, config: &Value, spans: &Spans, vars: &Map<String, Value>) -> Result<Value, StackError> {
        check_syntax(self, config, spans)?;
        let mut lookup = |r: &Reference| -> Result<Option<Value>, String> {
            if r.segments[0] != "var" {
                return Ok(None);
            }
            let name = &r.segments[1];
            let Some(value) = vars.get(name) else {
                let declared: Vec<&str> = vars.keys().map(String::as_str).collect();
                return Err(format!("there is no variable `{name}`: {}", suggestion(name, &declared)));
            };
            template::get_path(value, &r.segments[2..])
                .map(|v| Some(template::quote(v)))
                .ok_or_else(|| format!("variable `{name}` has no `{}`", r.segments[2..].join(".")))
        };
        let substituted = template::substitute(config, &mut lookup).map_err(|e| {
            let span = span_of_reference(config, spans, &e.reference);
            self.err(
                span,
                format!("unknown variable in `{}`", e.reference),
                "here",
                format!("{} (variables are declared under `[vars]`)", e.message),
            )
        })?;
        // A value ending in `$` would join the `{` or `${` after it into something else.
        let resource_refs =
            |v: &Value| template::references(v).map(|r| r.into_iter().filter(|r| r.segments[0] != "var").collect::<Vec<_>>());
        if resource_refs(&substituted).ok() != resource_refs(config).ok() {
            let mut changed = None;
            walk_strings(config, "", &mut |pointer, s| {
                let one = Value::String(s.to_owned());
                let after = template::substitute(&one, &mut lookup).ok();
                if changed.is_none() && after.as_ref().map(resource_refs).and_then(Result::ok) != resource_refs(&one).ok() {
                    changed = spans.get(pointer).cloned();
                }
            });
            return Err(self.err(
                changed.unwrap_or(0..0),
                "a variable's value changes how this string reads",
                "here",
                "a value ending in `$` joins the `{` or `${` after it into an escape or a reference; put something between them",
            ));
        }
        Ok(substituted)
    }

    /// Replaces each file attribute's path (relative to the stack file's folder) by the
    /// file's text, quoted so that `${…}` in it (CloudFormation's own `!Sub`) stays literal.
    fn read_files(&self, address: &str, mut config: Value, spans: &Spans, fields: &[Field]) -> Result<Value, StackError> {
        let folder = Path::new(&self.file.name).parent().unwrap_or(Path::new(""));
        for field in fields.iter().filter(|f| f.ty == FieldType::File) {
            let Some(Value::String(path)) = config.get(field.name) else {
                continue;
            };
            let full = folder.join(path);
            let text = std::fs::read_to_string(&full).map_err(|e| {
                self.err(
                    spans.get(&format!("/{}", field.name)).cloned().unwrap_or_default(),
                    format!("`{address}.{}`: cannot read `{}`: {e}", field.name, full.display()),
                    "this file",
                    format!(
                        "the path is relative to the folder of the stack file (`{}`)",
                        if folder.as_os_str().is_empty() { Path::new(".") } else { folder }.display()
                    ),
                )
            })?;
            config[field.name] = template::quote(&Value::String(text));
        }
        Ok(config)
    }

    /// `timeouts = { create = "45m", update = "1h", delete = "20m" }`: operations the kind
    /// has, and durations humantime reads.
    fn check_timeouts(&self, address: &str, kind: &str, config: &Value, spans: &Spans) -> Result<(), StackError> {
        for (operation, value) in config.get("timeouts").and_then(Value::as_object).into_iter().flatten() {
            if let Some((message, hint)) = timeout_problem(kind, operation, value) {
                let span = spans.get(&format!("/timeouts/{operation}")).cloned().unwrap_or(0..0);
                return Err(self.err(span, format!("`{address}.timeouts.{operation}`: {message}"), "here", hint));
            }
        }
        Ok(())
    }

    fn expand(
        &self,
        pending: &PendingComponent,
        providers: &Providers,
        components: &BTreeMap<String, Map<String, Value>>,
        blocks: &BTreeMap<String, Map<String, Value>>,
        facts: &Facts,
    ) -> Result<Expanded, StackError> {
        let PendingComponent { component, block } = pending;
        let (address, header) = (Address::new(block.address.as_str()), &block.span);
        let attrs = block.config.as_object().cloned().unwrap_or_default();
        let input = Input {
            address: &address,
            config: &attrs,
            providers,
            components,
            blocks,
            facts,
        };
        let expansion = (component.expand)(&input).map_err(|e| {
            let pointer = e.key.as_ref().map(|k| format!("/{}", k.replace('.', "/")));
            let (span, label) = match pointer.as_ref().and_then(|p| block.spans.get(p)) {
                Some(span) => (span.clone(), "here"),
                None => (header.clone(), "in this component"),
            };
            self.err(
                span,
                format!("`{address}`: {}", e.message),
                label,
                e.hint
                    .unwrap_or_else(|| format!("see `{}` in docs/stack-format.md", component.name)),
            )
        })?;
        let blocks = expansion
            .parts
            .into_iter()
            .map(|part| in_cluster_waits(part, components))
            .map(|part| Block {
                address: format!("{address}.{}", part.local),
                kind: part.kind.to_owned(),
                // A part that reads an existing object (an `eks` block's cluster, a `vpc`
                // block's subnets) names it by id or by attribute values.
                existing: part.existing.map(|selector| super::Existing {
                    selector,
                    span: header.clone(),
                }),
                config: part.config,
                explicit_deps: part
                    .depends_on
                    .into_iter()
                    .map(|d| (d, header.clone()))
                    .chain(block.explicit_deps.iter().cloned())
                    .collect(),
                ignore_changes: block.ignore_changes.clone(),
                spans: Spans::new(),
                span: header.clone(),
                generated: true,
            })
            .collect::<Vec<Block>>();
        for block in &blocks {
            self.check_generated(component, block)?;
        }
        if let (Some(read), Some((_, span))) = (blocks.iter().find(|b| b.existing.is_some()), pending.block.explicit_deps.first()) {
            return Err(self.err(
                span.clone(),
                format!("`{address}` reads an existing object (`{}`): `depends_on` cannot delay that read", read.address),
                "no effect on the read",
                "forge reads existing objects when it plans, before anything is applied: remove `depends_on`, or make the object outside this stack first",
            ));
        }
        Ok(Expanded {
            blocks,
            outputs: expansion.outputs,
            ready: expansion.ready,
        })
    }

    /// Holds a block that `component` made to the key and type checks a written block gets
    /// ([`crate::schema::misfit`]): a misfit is a bug in the component, said at its block
    /// before anything is planned, never dropped at apply time.
    fn check_generated(&self, component: &Component, block: &Block) -> Result<(), StackError> {
        let problem = match (self.registry.get(&block.kind), block.config.as_object()) {
            (None, _) => format!("a kind this forge does not have (`{}`)", block.kind),
            (Some(kind), _) if block.existing.is_some() && !kind.lookups().any() => "`existing` on a kind that reads none".to_owned(),
            (Some(_), _) if block.existing.is_some() => return Ok(()),
            (Some(_), None) => "attributes that are not a table".to_owned(),
            (Some(kind), Some(config)) => match crate::schema::misfit(kind.spec().fields, &[], config) {
                None => return Ok(()),
                Some(misfit) => misfit.to_string(),
            },
        };
        Err(self.err(
            block.span.clone(),
            format!(
                "the `{}` component made `{}` ({}) with {problem}",
                component.name, block.address, block.kind
            ),
            "in this component",
            format!(
                "this is a bug in forge's `{}` component, not in the stack; please report it with this block",
                component.name
            ),
        ))
    }
}

fn check_syntax(loader: &Loader, value: &Value, spans: &Spans) -> Result<(), StackError> {
    let mut result = Ok(());
    walk_strings(value, "", &mut |pointer, s| {
        if result.is_ok()
            && let Err(e) = template::references(&Value::String(s.to_owned()))
        {
            result = Err(loader.err(spans.get(pointer).cloned().unwrap_or(0..0), e.message, "invalid reference", e.hint));
        }
    });
    result
}

fn walk_strings(value: &Value, pointer: &str, f: &mut impl FnMut(&str, &str)) {
    match value {
        Value::String(s) => f(pointer, s),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| walk_strings(v, &format!("{pointer}/{i}"), f)),
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| walk_strings(v, &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")), f)),
        _ => {}
    }
}

/// The span of the first string in `value` that contains `reference`.
fn span_of_reference(value: &Value, spans: &Spans, reference: &str) -> Range<usize> {
    let mut found = None;
    walk_strings(value, "", &mut |pointer, s| {
        if found.is_none() && s.contains(reference) {
            found = spans.get(pointer).cloned();
        }
    });
    found.unwrap_or(0..0)
}

/// What references may point at: resources and component outputs.
struct Targets<'a> {
    loader: &'a Loader<'a>,
    blocks: &'a HashMap<&'a str, &'a Block>,
    components: &'a HashMap<String, Map<String, Value>>,
}

enum Target<'a> {
    Resource(&'a Block, &'a [String]),
    Component(&'a str, &'a [String]),
}

impl Targets<'_> {
    /// Finds what a reference points at: the longest address that is a prefix of its path.
    fn find<'r>(&self, r: &'r Reference) -> Result<Target<'r>, String>
    where
        Self: 'r,
    {
        let found = r.resolve(|prefix| match self.blocks.get(prefix) {
            Some(block) => Some(Ok(*block)),
            None => self.components.get_key_value(prefix).map(Err),
        });
        match found {
            Some((prefix, Ok(_), [])) => {
                return Err(format!(
                    "`{prefix}` is a resource; name one of its attributes, e.g. `${{{prefix}.id}}`"
                ));
            }
            Some((_, Ok(block), attr)) => return Ok(Target::Resource(block, attr)),
            Some((prefix, Err((_, outputs)), attr)) if attr.is_empty() || !outputs.contains_key(&attr[0]) => {
                let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
                return Err(format!(
                    "component `{prefix}` has no output `{}`; its outputs: {}",
                    attr.join("."),
                    names.join(", ")
                ));
            }
            Some((_, Err((name, _)), attr)) => return Ok(Target::Component(name, attr)),
            None => {}
        }
        let wanted = r.segments[..2].join(".");
        Err(format!("there is no block `{wanted}`; {}", suggestion(&wanted, &self.addresses())))
    }

    /// Every address a reference or `depends_on` may name, sorted (for suggestions).
    fn addresses(&self) -> Vec<&str> {
        let mut known: Vec<&str> = self
            .blocks
            .keys()
            .copied()
            .chain(self.components.keys().map(String::as_str))
            .collect();
        known.sort_unstable();
        known
    }

    /// Checks a block's references and `depends_on`, inlines component outputs.
    fn resolve_block(&self, block: &Block) -> Result<Resource, StackError> {
        let span_for = |reference: &str| {
            if block.generated {
                block.span.clone()
            } else {
                span_of_reference(&block.config, &block.spans, reference)
            }
        };
        let config = self.inline(&block.config, span_for)?;
        let mut deps = BTreeSet::new();
        for r in template::references(&config).expect("checked") {
            if let Ok(Target::Resource(target, _)) = self.find(&r) {
                deps.insert(target.address.clone());
            }
        }
        for (dep, span) in &block.explicit_deps {
            if self.blocks.contains_key(dep.as_str()) {
                deps.insert(dep.clone());
            } else if self.components.contains_key(dep) {
                let prefix = format!("{dep}.");
                deps.extend(
                    self.blocks
                        .keys()
                        .filter(|a| a.starts_with(&prefix))
                        .map(std::string::ToString::to_string),
                );
            } else {
                return Err(self.loader.err(
                    span.clone(),
                    format!("`{}` depends on `{dep}`, which does not exist", block.address),
                    "unknown address",
                    suggestion(dep, &self.addresses()),
                ));
            }
        }
        Ok(Resource {
            address: block.address.clone(),
            kind: block.kind.clone(),
            config,
            depends_on: deps.into_iter().collect(),
            ignore_changes: block.ignore_changes.clone(),
            span: block.span.clone(),
            existing: block.existing.clone(),
        })
    }

    /// Validates every reference in `value` and replaces component outputs by their templates.
    fn inline(&self, value: &Value, span_for: impl Fn(&str) -> Range<usize>) -> Result<Value, StackError> {
        let mut lookup = |r: &Reference| -> Result<Option<Value>, String> {
            match self.find(r)? {
                Target::Resource(block, attr) => {
                    let kind = self.loader.registry.get(&block.kind);
                    let kind_outputs: Vec<&str> = kind.map(|k| k.spec().output_names().collect()).unwrap_or_default();
                    // An existing object's attributes are what its look-up reads: any of the kind's.
                    let read_fields: Vec<&str> = kind
                        .filter(|_| block.existing.is_some())
                        .map(|k| k.spec().fields.iter().map(|f| f.name).collect())
                        .unwrap_or_default();
                    let has_config_key = block.config.get(&attr[0]).is_some() || read_fields.contains(&attr[0].as_str());
                    if !kind_outputs.contains(&attr[0].as_str()) && !has_config_key {
                        let mut names = kind_outputs;
                        names.extend(read_fields);
                        names.extend(block.config.as_object().into_iter().flat_map(|m| m.keys().map(String::as_str)));
                        return Err(format!(
                            "`{}` has no attribute `{}`; {}",
                            block.address,
                            attr[0],
                            suggestion(&attr[0], &names)
                        ));
                    }
                    Ok(None)
                }
                Target::Component(name, attr) => {
                    let outputs = Value::Object(self.components[name].clone());
                    template::get_path(&outputs, attr)
                        .cloned()
                        .map(Some)
                        .ok_or_else(|| format!("component `{name}` has no output `{}`", attr.join(".")))
                }
            }
        };
        template::substitute(value, &mut lookup).map_err(|e| {
            self.loader.err(
                span_for(&e.reference),
                format!("invalid reference `{}`", e.reference),
                "here",
                e.message,
            )
        })
    }

    fn outputs(&self, outputs: &Outputs) -> Result<BTreeMap<String, Value>, StackError> {
        if !outputs.json.is_object() {
            return Err(self.loader.err(
                outputs.span.clone(),
                "`outputs` must be a table",
                "expected a table",
                "write `[outputs]` with `name = \"${…}\"` lines",
            ));
        }
        let json = self.loader.substitute_vars(&outputs.json, &outputs.spans, &outputs.vars)?;
        let inlined = self.inline(&json, |reference| span_of_reference(&json, &outputs.spans, reference))?;
        Ok(inlined.as_object().cloned().unwrap_or_default().into_iter().collect())
    }
}

/// Parses a `--var` value as TOML (`4`, `true`, `[1, 2]`, `"x"`), or takes it as a string.
fn parse_var(raw: &str) -> Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|t| t.get("v").cloned())
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}
/// A component block expanded: its resources as blocks, its outputs and readiness checks.
struct Expanded {
    blocks: Vec<Block>,
    outputs: Map<String, Value>,
    ready: Vec<crate::readiness::Check>,
}

/// A `k8s_object` part with the in-cluster waits its cluster's block sets
/// ([`crate::components::kubernetes::with_cluster_waits`]).
#[cfg(any(feature = "aws", feature = "gcp"))]
fn in_cluster_waits(mut part: Part, components: &BTreeMap<String, Map<String, Value>>) -> Part {
    if part.kind == "k8s_object" {
        crate::components::kubernetes::with_cluster_waits(&mut part, components);
    }
    part
}

/// Without a cloud there are no clusters: the part as made.
#[cfg(not(any(feature = "aws", feature = "gcp")))]
fn in_cluster_waits(part: Part, _: &BTreeMap<String, Map<String, Value>>) -> Part {
    part
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::{Expansion, Part};

    /// A component whose one part carries its block's `made`: what a component with a
    /// misspelt or mistyped key in its `json!` would make.
    const MAKER: Component = Component {
        name: "test_component",
        schema: &[],
        expand: |input| {
            Ok(Expansion {
                parts: vec![Part {
                    local: "n".into(),
                    kind: "null",
                    config: input.config["made"].clone(),
                    depends_on: vec![],
                    existing: None,
                }],
                outputs: Map::new(),
                ready: vec![],
            })
        },
    };

    fn expand_making(made: Value) -> Result<Expanded, StackError> {
        let registry = Registry::builtin();
        let file = SourceFile {
            name: "t.toml".into(),
            text: Arc::from("[test_component.c]\n"),
        };
        let loader = Loader {
            file: &file,
            registry: &registry,
        };
        let pending = PendingComponent {
            component: &MAKER,
            block: Block {
                address: "test_component.c".into(),
                kind: "test_component".into(),
                config: serde_json::json!({ "made": made }),
                explicit_deps: vec![],
                ignore_changes: vec![],
                spans: Spans::new(),
                span: 1..15,
                generated: false,
                existing: None,
            },
        };
        loader.expand(
            &pending,
            &Providers::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            &Facts::builtin(),
        )
    }

    #[test]
    fn a_gcs_state_takes_its_project_and_endpoint_from_gcp() {
        let text = "[stack]\nname = \"s\"\n[gcp]\nproject = \"p\"\nendpoints = { storage = \"http://127.0.0.1:9/\" }\n[state]\nbackend = \"gcs\"\nbucket = \"b\"\n";
        let parsed = parse_str("s.toml", text, &[], &Registry::builtin()).expect("the stack parses");
        let Backend::Gcs { project, endpoint, .. } = &parsed.state else {
            panic!("a gcs backend, not {:?}", parsed.state);
        };
        assert_eq!((project.as_deref(), endpoint.as_deref()), (Some("p"), Some("http://127.0.0.1:9/")));
    }

    #[test]
    fn a_generated_block_gets_the_written_blocks_key_and_type_checks() {
        assert!(expand_making(serde_json::json!({ "delay_ms": 5 })).is_ok());
        for (made, problem) in [
            (serde_json::json!({ "dealy_ms": 5 }), "unknown key `dealy_ms`"),
            (
                serde_json::json!({ "delay_ms": "5" }),
                "`delay_ms` must be an integer, not a string",
            ),
        ] {
            let message = expand_making(made).err().expect("a misfit fails the load").to_string();
            assert!(
                message.contains(&format!(
                    "the `test_component` component made `test_component.c.n` (null) with {problem}"
                )),
                "{message}"
            );
        }
    }
}

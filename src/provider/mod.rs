//! Resource kinds: the trait every kind implements, the schema it declares, and the registry
//! that maps block types to kinds. A kind sees its own config, its outputs and a [`Ctx`] —
//! never the graph, the plan or the state store.

#[cfg(feature = "aws")]
pub mod aws;
pub mod budget;
#[cfg(feature = "gcp")]
pub mod gcp;
#[cfg(any(feature = "aws", feature = "gcp"))]
pub mod k8s;
pub mod null;
pub mod prices;
pub mod retry;
pub mod settings;
pub mod wait;

pub use crate::schema::{Field, FieldType, Output, Source, Spec};
pub use retry::RetryPolicy;
pub use wait::{Poll, wait_gone, wait_until};

use serde::de::DeserializeOwned;
use serde_json::Value;
use settings::Providers;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future, so kinds can live behind `dyn Kind` in one registry.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The output `key` recorded before this change, or `null` (known after apply) when there is
/// none: what a kind's [`Resource::planned_outputs`] reports for outputs the cloud assigns.
pub fn prior_output(prior: Option<&Value>, key: &str) -> Value {
    prior.and_then(|p| p.get(key)).cloned().unwrap_or(Value::Null)
}

/// How long a slow call may wait: the block's `timeouts.<operation>` (`"45m"`, checked when the
/// stack loads), else the kind's default.
pub fn timeout(config: &Value, operation: &str, default: std::time::Duration) -> std::time::Duration {
    config
        .get("timeouts")
        .and_then(|t| t.get(operation))
        .and_then(Value::as_str)
        .and_then(|text| humantime::parse_duration(text).ok())
        .unwrap_or(default)
}

/// One line for an answer that is not the cloud API's own (an HTML page from a proxy or a
/// wrong endpoint): the HTTP status and the first words of the body, never the whole response.
pub fn not_the_api(status: u16, body: &[u8]) -> String {
    let body = String::from_utf8_lossy(body);
    let words: String = body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(80).collect();
    format!("HTTP {status}, not an answer from the API: {words}")
}

/// Reads a kind's config (checked against its schema when the stack loaded).
pub fn parse<T: DeserializeOwned>(ctx: &Ctx, config: &Value) -> Result<T, ProviderError> {
    serde_json::from_value(config.clone()).map_err(|e| ProviderError::permanent(format!("invalid attributes for `{}`: {e}", ctx.address)))
}

/// The tag that ties an object to the create that made it: only a create with the same token
/// (a retry, or a resumed create) adopts it.
pub const TOKEN_TAG: &str = "forge:token";

/// Whether an object was made by the create with `token`: its stack, address and token tags,
/// read with `tag` (each service has its own tag type). A retried or resumed create adopts
/// such an object; anything else with the same name is someone else's.
pub fn made_by<'t>(ctx: &Ctx, token: &str, tag: impl Fn(&str) -> Option<&'t str>) -> bool {
    tag("forge:stack") == Some(ctx.stack.as_str()) && tag("forge:address") == Some(ctx.address.as_str()) && tag(TOKEN_TAG) == Some(token)
}

/// What the cloud call may report while it runs: a short status shown on the resource's
/// progress line ("CREATING", "waiting for ACTIVE").
pub type StatusFn = Arc<dyn Fn(&str) + Send + Sync>;

/// What a kind gets for a call, besides its config.
pub struct Ctx {
    /// The stack's name (`forge:stack` tag).
    pub stack: String,
    /// The resource's address (`forge:address` tag).
    pub address: String,
    /// Reports status text to the person watching.
    pub status: StatusFn,
    /// The clouds, connected on first use.
    pub cloud: Arc<Cloud>,
    /// Whether this create resumes an interrupted one: its token was recorded before, so its
    /// call may have reached the cloud.
    pub resumed: bool,
    /// What the plan priced this create at (see [`Resource::quote`]): the only thing it may buy.
    pub quoted: Option<Purchase>,
}

impl Ctx {
    /// The tags every object gets in its create call: the block's `tags` (which the loader
    /// has merged with the provider's `default_tags`), then `forge:stack` and `forge:address`,
    /// which nothing overrides.
    pub fn tags(&self, config: &Value) -> BTreeMap<String, String> {
        let mut tags = BTreeMap::new();
        for (k, v) in config.get("tags").and_then(Value::as_object).into_iter().flatten() {
            tags.insert(k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        }
        tags.insert("forge:stack".into(), self.stack.clone());
        tags.insert("forge:address".into(), self.address.clone());
        tags
    }
}

/// Provider settings (`[aws]`, `[gcp]`), the SDK clients made from them on first use, their
/// connections and the rate budgets their calls draw on: one per command and provider
/// settings, shared by refresh, the dry run, facts, apply and readiness.
#[derive(Default)]
pub struct Cloud {
    /// The stack's `[aws]` / `[gcp]` settings.
    pub settings: Providers,
    /// The command's rate budgets (shared with its other clouds); only AWS's calls are paced
    /// ahead so far.
    #[cfg_attr(not(feature = "aws"), allow(dead_code))]
    budgets: Arc<budget::Budgets>,
    #[cfg(feature = "aws")]
    aws: tokio::sync::OnceCell<aws::Clients>,
    #[cfg(feature = "gcp")]
    gcp: tokio::sync::OnceCell<Result<gcp::Clients, ProviderError>>,
    /// The Kubernetes clusters reached so far.
    #[cfg(any(feature = "aws", feature = "gcp"))]
    kubernetes: k8s::Connections,
}

impl Cloud {
    /// Clouds configured by `settings`, pacing their calls with `budgets`; nothing connects
    /// until a kind asks.
    #[cfg_attr(not(any(feature = "aws", feature = "gcp")), allow(clippy::needless_update))]
    pub fn new(settings: Providers, budgets: Arc<budget::Budgets>) -> Self {
        Cloud {
            settings,
            budgets,
            ..Default::default()
        }
    }

    /// The AWS clients, made from `[aws]` and the standard AWS environment on first use.
    #[cfg(feature = "aws")]
    pub async fn aws(&self) -> &aws::Clients {
        self.aws
            .get_or_init(|| aws::Clients::connect(self.settings.aws.as_ref(), self.budgets.clone()))
            .await
    }
}

/// The result of a successful create.
#[derive(Debug, Clone)]
pub struct Created {
    /// The cloud's id for the new object.
    pub id: String,
    /// The kind's outputs (no JSON nulls: absent means absent).
    pub outputs: Value,
}

/// One object as the cloud has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The cloud's id.
    pub id: String,
    /// Its `forge:address` tag, when it carries the stack's `forge:stack` tag.
    pub address: Option<String>,
    /// The attributes the kind reads back, in the shape of [`Resource::comparable`]; an attribute
    /// the kind cannot read is absent (and never counts as drift), as is one of
    /// [`Resource::presence`] the object does not have (which does).
    pub attributes: Value,
}

impl Observed {
    /// Objects known to exist, with no attributes read (a kind whose API reports nothing more
    /// than existence in a batch).
    pub fn existing(ids: impl IntoIterator<Item = String>) -> Vec<Observed> {
        ids.into_iter()
            .map(|id| Observed {
                id,
                address: None,
                attributes: Value::Object(Default::default()),
            })
            .collect()
    }
}

/// A failed cloud call. Retry and backoff live in one place (apply), driven by `retryable`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// The cloud's own message, verbatim.
    pub message: String,
    /// Throttling or a transient server error: the same call may succeed later.
    pub retryable: bool,
    /// The cloud refused the call for its request rate and did nothing: the retry does not
    /// count it as an attempt, and the rate budget paces the next try.
    pub throttled: bool,
}

impl ProviderError {
    /// An error no retry mends (bad input, a missing setting): said once, not tried again.
    pub fn permanent(message: impl Into<String>) -> Self {
        ProviderError {
            message: message.into(),
            retryable: false,
            throttled: false,
        }
    }

    /// An error a later try of the same call may not hit (an object still in use, a cloud
    /// still settling): tried again with backoff, each try an attempt.
    pub fn transient(message: impl Into<String>) -> Self {
        ProviderError {
            retryable: true,
            ..ProviderError::permanent(message)
        }
    }
}

/// What a create buys (see [`Resource::quote`]): money the cloud charges when the object is
/// made and does not give back.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Purchase {
    /// What is bought, in a line.
    pub what: String,
    /// The cloud's id of what is on sale (a Capacity Block offering): the create buys this and
    /// nothing else.
    pub offer: String,
    /// The fee charged up front.
    pub upfront: f64,
    /// Its currency (`USD`).
    pub currency: String,
}

/// How an `existing` block names the object forge reads and never changes (see
/// [`Resource::look_up`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `existing = "vpc-0abc…"`: the cloud's id, or the name the kind is known by.
    Id(String),
    /// `existing = { tags = { team = "ml" } }`: the one object that carries all these tags.
    Tags {
        /// The tags, every one of which the object carries.
        tags: BTreeMap<String, String>,
    },
    /// `existing = { vpc_id = "vpc-…", availability_zone = "us-west-2a", tier = "private" }`:
    /// the one object with these attribute values (the attributes [`Lookups::attributes`]
    /// names).
    Where(BTreeMap<String, String>),
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selector::Id(id) => write!(f, "`{id}`"),
            Selector::Tags { tags } => {
                let pairs: Vec<String> = tags.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
                write!(f, "the tags {{ {} }}", pairs.join(", "))
            }
            Selector::Where(values) => {
                let pairs: Vec<String> = values.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
                write!(f, "{{ {} }}", pairs.join(", "))
            }
        }
    }
}

/// Which forms of `existing` a kind reads (see [`Resource::lookups`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookups {
    /// What an id names for this kind, as the stack's author knows it (`a VPC id, vpc-…`);
    /// `None`: the kind is not read by id.
    pub id: Option<&'static str>,
    /// Whether the kind is read by tags (`existing = { tags = { … } }`).
    pub tags: bool,
    /// The attributes it is read by (`existing = { availability_zone = "…" }`), with what each
    /// takes.
    pub attributes: &'static [(&'static str, &'static str)],
}

impl Lookups {
    /// The kind cannot be an existing block.
    pub const NONE: Lookups = Lookups {
        id: None,
        tags: false,
        attributes: &[],
    };

    /// Whether the kind reads any form.
    pub fn any(self) -> bool {
        self.id.is_some() || self.tags || !self.attributes.is_empty()
    }
}

/// An object `forge import` is to take over, as the cloud has it (see [`Resource::inspect`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Inspected {
    /// The kind's outputs, as a create would have returned them.
    pub outputs: Value,
    /// Its attributes in the block's shape, as far as the kind reads them.
    pub attributes: Value,
    /// The stack and address of the forge mark it carries, if any.
    pub mark: Option<(String, String)>,
}

/// One object an `existing` block's [`Selector`] matched, read for the stack's references.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The cloud's id, as the kind records its own objects.
    pub id: String,
    /// The kind's outputs, as a create would return them.
    pub outputs: Value,
    /// Its attributes in the kind's config shape, as [`Resource::read`] reports them.
    pub attributes: Value,
}

/// An in-place change the cloud would refuse (see [`Resource::refusal`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The attribute whose change is refused (`version`).
    pub attribute: &'static str,
    /// Why, in the cloud's terms.
    pub message: String,
    /// How to get what the stack asks for.
    pub hint: String,
}

/// What a kind declares once: its [`Spec`]. Kinds get it from
/// [`attributes!`](crate::schema::attributes), which writes it beside their config struct.
pub trait Declared {
    /// The kind's declaration: block type, attributes (and which force replacement), outputs.
    fn spec(&self) -> &'static Spec;
    /// `config` with the values the kind gives the attributes it leaves out (what a create or
    /// update of it would apply), for `forge import` to compare with the object; as written
    /// when it cannot tell.
    fn with_defaults(&self, config: &Value) -> Value {
        config.clone()
    }
    /// Whether the kind reads `config` (the attributes it holds, of the types it takes); by
    /// default it takes anything.
    fn accepts(&self, _config: &Value) -> bool {
        true
    }
}

/// `config` with the string lists at `keys` sorted: for [`Resource::comparable`], where the
/// cloud keeps a list in no order.
pub fn sorted_lists(config: &Value, keys: &[&str]) -> Value {
    let mut config = config.clone();
    for key in keys {
        if let Some(list) = config.get_mut(*key).and_then(Value::as_array_mut) {
            list.sort_by_key(Value::to_string);
        }
    }
    config
}

/// A resource kind, e.g. `null` or `aws_vpc`, as its file writes it: a declaration
/// ([`Declared`]), a few plain methods, and the cloud calls as `async fn`s. The engine holds
/// kinds as [`Kind`]s.
pub trait Resource: Declared + Send + Sync + 'static {
    /// Whether changing `attribute` from `before` to `after` needs a new object; by default
    /// when the spec marks it so. Kinds override it for changes that only go one way in place
    /// (a file system grows, never shrinks).
    fn forces_replacement(&self, attribute: &str, _before: Option<&Value>, _after: Option<&Value>) -> bool {
        self.spec().replaces(attribute)
    }
    /// Whether deleting the object deletes data people keep in it (a file system): the plan
    /// marks its replacement or removal `(DESTROYS DATA)` and `up` refuses it without
    /// `--allow-data-loss`.
    fn holds_data(&self) -> bool {
        false
    }
    /// The outputs as far as they are known before the call (`null` where unknown); `prior` is
    /// the recorded outputs when the resource is updated in place. From the spec's declared
    /// output sources.
    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        self.spec().planned_outputs(config, prior)
    }
    /// The applied attributes in the form [`Resource::read`] reports them, so the two compare
    /// attribute by attribute; as written unless the cloud keeps them in another shape (rules
    /// as single permissions).
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        config.clone()
    }
    /// Attribute paths whose live value is owned by something else unless the block says
    /// otherwise (a node group's desired size when its size is a range: the autoscaler's).
    fn ignored_by_default(&self, _config: &Value) -> Vec<String> {
        Vec::new()
    }
    /// Attributes whose presence is part of the object's state, which [`Resource::read`]
    /// reports whenever the cloud has them (a node pool's `node_count` against its
    /// `min_node_count` / `max_node_count`: a fixed size or autoscaling). Drift compares them
    /// even when one side leaves them out: one the stack sets that the read leaves out is gone
    /// from the cloud, one the read reports that the stack leaves out is the other mode. By
    /// default none: an attribute either side leaves out is not compared.
    fn presence(&self) -> &'static [&'static str] {
        &[]
    }
    /// Attributes whose live values an update leaves alone when the block leaves the attribute
    /// out (a security group's rules that forge did not apply): `forge import` does not hold
    /// the object to their defaults. By default none.
    fn kept_when_left_out(&self) -> &'static [&'static str] {
        &[]
    }
    /// Why the cloud would refuse to bring the object from `before` to `after` in place (GKE
    /// never downgrades a version), checked when the update is planned, so `forge plan` fails
    /// naming the attribute instead of the apply; `outputs` are the recorded ones. By default
    /// nothing is refused.
    fn refusal(&self, _before: &Value, _after: &Value, _outputs: &Value) -> Option<Refusal> {
        None
    }
    /// A key that no two of the apply's calls may hold at once, given the resource's evaluated
    /// config: where the cloud runs one operation at a time on an object and its children (a
    /// GKE cluster and its node pools), the object's id. `None`, the default: no limit.
    fn serialization_key(&self, _config: &Value) -> Option<String> {
        None
    }
    /// Creates the object. `token` is unique to this create and stays the same when an
    /// interrupted create is resumed: kinds pass it as the API's idempotency token, so a retried
    /// create adopts the object the first try made instead of making a second one.
    fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> impl Future<Output = Result<Created, ProviderError>> + Send;
    /// The live objects among `ids`, and, where the API lists by tag in the same batched read,
    /// every other object tagged `forge:stack = stack`; read in as few calls as the API allows
    /// (one Describe per page, filtered by the stack's tag or by id), never one per object
    /// unless the API has no batch read. An id that is not returned is gone.
    fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> impl Future<Output = Result<Vec<Observed>, ProviderError>> + Send;
    /// Looks for the object an interrupted create with `token` may have made (by the API's
    /// idempotency token or by forge's tags); `None` when there is none.
    fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> impl Future<Output = Result<Option<String>, ProviderError>> + Send;
    /// Brings the object from `old` to `new` in place; returns the new outputs.
    fn update(&self, ctx: &Ctx, id: &str, old: &Value, new: &Value) -> impl Future<Output = Result<Value, ProviderError>> + Send;
    /// Deletes the object; an object that is already gone is a success.
    fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> impl Future<Output = Result<(), ProviderError>> + Send;
    /// At plan time, asks the API whether it would take `config` (a create or update whose
    /// values are all known) without changing anything: `Some(why)` when it refuses, `None`
    /// when it takes it or cannot tell yet (what it needs does not exist). Most APIs have no
    /// such call.
    fn dry_run(&self, _ctx: &Ctx, _config: &Value) -> impl Future<Output = Result<Option<String>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// Whether making an object of this kind spends money that is not given back (a Capacity
    /// Block): such an object that a refresh does not see is not gone — no one can delete it;
    /// it shows only some seconds after its purchase, or ended — and is never bought again by
    /// itself.
    fn paid_for(&self) -> bool {
        false
    }
    /// At plan time, what creating `config` buys — or, with the id of the `existing` object,
    /// what updating it to `config` buys (a Capacity Block's extension) — asked of every create
    /// and update of a kind that is [`Resource::paid_for`] before `up` may apply it. An error
    /// fails the plan (nothing on sale within the block's ceiling). `config` is `null` when the
    /// plan does not know all of it yet: the kind must then refuse, as it cannot be priced.
    fn quote(
        &self,
        _ctx: &Ctx,
        _config: &Value,
        _existing: Option<&str>,
    ) -> impl Future<Output = Result<Option<Purchase>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// What an object of the kind is billed for, read from its attributes ([`crate::cost`]):
    /// by default nothing (it costs nothing of its own, as a VPC or a role).
    fn meter(&self, _sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        None
    }
    /// Whether `forge import` can take over an object of the kind ([`Resource::inspect`] and
    /// [`Resource::mark`]); by default not.
    fn importable(&self) -> bool {
        false
    }
    /// For `forge import`: the object `id` — its outputs and the forge mark it carries — or
    /// `None` when the cloud has no such object.
    fn inspect(&self, _cloud: &Cloud, _id: &str) -> impl Future<Output = Result<Option<Inspected>, ProviderError>> + Send {
        async { Err(ProviderError::permanent("this kind cannot be imported")) }
    }
    /// For `forge import`: puts forge's mark on the object `id` — the stack, address and
    /// token that every create gives its object — so later runs treat it as forge's own.
    fn mark(&self, _ctx: &Ctx, _id: &str, _token: &str) -> impl Future<Output = Result<(), ProviderError>> + Send {
        async { Err(ProviderError::permanent("this kind cannot be imported")) }
    }
    /// Which forms of `existing` the kind reads with [`Resource::look_up`]; by default the id
    /// `forge import` takes, for a kind it imports, else none: a block of the kind cannot name
    /// an existing object.
    fn lookups(&self) -> Lookups {
        if self.importable() {
            Lookups {
                id: Some("its id, as `forge import` takes it"),
                tags: false,
                attributes: &[],
            }
        } else {
            Lookups::NONE
        }
    }
    /// Reads the objects `selector` names, for a block that forge reads and never writes
    /// (`existing = …`): every match (the caller wants exactly one), in as few calls as the
    /// API allows, and nothing else — no tag, no change. By default, an id is read as
    /// `forge import` reads it ([`Resource::inspect`]).
    fn look_up(&self, cloud: &Cloud, selector: &Selector) -> impl Future<Output = Result<Vec<Found>, ProviderError>> + Send {
        async move {
            let Selector::Id(id) = selector else { return Ok(Vec::new()) };
            if !self.importable() {
                return Ok(Vec::new());
            }
            Ok(self
                .inspect(cloud, id)
                .await?
                .into_iter()
                .map(|found| Found {
                    id: id.clone(),
                    outputs: found.outputs,
                    attributes: found.attributes,
                })
                .collect())
        }
    }
}

/// A kind as the engine holds it, behind `dyn` in one [`Registry`]: every [`Resource`] is one,
/// its calls boxed. See [`Resource`] for what each method does.
pub trait Kind: Send + Sync + 'static {
    /// [`Resource::spec`].
    fn spec(&self) -> &'static Spec;
    /// [`Resource::forces_replacement`].
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool;
    /// [`Resource::holds_data`].
    fn holds_data(&self) -> bool;
    /// [`Resource::planned_outputs`].
    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value;
    /// [`Resource::comparable`].
    fn comparable(&self, id: &str, config: &Value) -> Value;
    /// [`Declared::with_defaults`].
    fn with_defaults(&self, config: &Value) -> Value;
    /// [`Declared::accepts`].
    fn accepts(&self, config: &Value) -> bool;
    /// [`Resource::ignored_by_default`].
    fn ignored_by_default(&self, config: &Value) -> Vec<String>;
    /// [`Resource::presence`].
    fn presence(&self) -> &'static [&'static str];
    /// [`Resource::kept_when_left_out`].
    fn kept_when_left_out(&self) -> &'static [&'static str];
    /// [`Resource::refusal`].
    fn refusal(&self, before: &Value, after: &Value, outputs: &Value) -> Option<Refusal>;
    /// [`Resource::serialization_key`].
    fn serialization_key(&self, config: &Value) -> Option<String>;
    /// [`Resource::create`].
    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>>;
    /// [`Resource::read`].
    fn read<'a>(&'a self, cloud: &'a Cloud, stack: &'a str, ids: &'a [String]) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>>;
    /// [`Resource::find`].
    fn find<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>>;
    /// [`Resource::update`].
    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>>;
    /// [`Resource::delete`].
    fn delete<'a>(&'a self, ctx: &'a Ctx, id: &'a str, config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>>;
    /// [`Resource::dry_run`].
    fn dry_run<'a>(&'a self, ctx: &'a Ctx, config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>>;
    /// [`Resource::paid_for`].
    fn paid_for(&self) -> bool;
    /// [`Resource::quote`].
    fn quote<'a>(
        &'a self,
        ctx: &'a Ctx,
        config: &'a Value,
        existing: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Purchase>, ProviderError>>;
    /// [`Resource::meter`].
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter>;
    /// [`Resource::importable`].
    fn importable(&self) -> bool;
    /// [`Resource::inspect`].
    fn inspect<'a>(&'a self, cloud: &'a Cloud, id: &'a str) -> BoxFuture<'a, Result<Option<Inspected>, ProviderError>>;
    /// [`Resource::mark`].
    fn mark<'a>(&'a self, ctx: &'a Ctx, id: &'a str, token: &'a str) -> BoxFuture<'a, Result<(), ProviderError>>;
    /// [`Resource::lookups`].
    fn lookups(&self) -> Lookups;
    /// [`Resource::look_up`].
    fn look_up<'a>(&'a self, cloud: &'a Cloud, selector: &'a Selector) -> BoxFuture<'a, Result<Vec<Found>, ProviderError>>;
}

impl<R: Resource> Kind for R {
    fn spec(&self) -> &'static Spec {
        Declared::spec(self)
    }
    fn forces_replacement(&self, attribute: &str, before: Option<&Value>, after: Option<&Value>) -> bool {
        Resource::forces_replacement(self, attribute, before, after)
    }
    fn holds_data(&self) -> bool {
        Resource::holds_data(self)
    }
    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        Resource::planned_outputs(self, config, prior)
    }
    fn comparable(&self, id: &str, config: &Value) -> Value {
        Resource::comparable(self, id, config)
    }
    fn with_defaults(&self, config: &Value) -> Value {
        Declared::with_defaults(self, config)
    }
    fn accepts(&self, config: &Value) -> bool {
        Declared::accepts(self, config)
    }
    fn ignored_by_default(&self, config: &Value) -> Vec<String> {
        Resource::ignored_by_default(self, config)
    }
    fn kept_when_left_out(&self) -> &'static [&'static str] {
        Resource::kept_when_left_out(self)
    }
    fn presence(&self) -> &'static [&'static str] {
        Resource::presence(self)
    }
    fn refusal(&self, before: &Value, after: &Value, outputs: &Value) -> Option<Refusal> {
        Resource::refusal(self, before, after, outputs)
    }
    fn serialization_key(&self, config: &Value) -> Option<String> {
        Resource::serialization_key(self, config)
    }
    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(Resource::create(self, ctx, token, config))
    }
    fn read<'a>(&'a self, cloud: &'a Cloud, stack: &'a str, ids: &'a [String]) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(Resource::read(self, cloud, stack, ids))
    }
    fn find<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(Resource::find(self, ctx, token, config))
    }
    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(Resource::update(self, ctx, id, old, new))
    }
    fn delete<'a>(&'a self, ctx: &'a Ctx, id: &'a str, config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(Resource::delete(self, ctx, id, config))
    }
    fn dry_run<'a>(&'a self, ctx: &'a Ctx, config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(Resource::dry_run(self, ctx, config))
    }
    fn paid_for(&self) -> bool {
        Resource::paid_for(self)
    }
    fn meter(&self, sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Resource::meter(self, sight)
    }
    fn quote<'a>(
        &'a self,
        ctx: &'a Ctx,
        config: &'a Value,
        existing: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Purchase>, ProviderError>> {
        Box::pin(Resource::quote(self, ctx, config, existing))
    }
    fn importable(&self) -> bool {
        Resource::importable(self)
    }
    fn inspect<'a>(&'a self, cloud: &'a Cloud, id: &'a str) -> BoxFuture<'a, Result<Option<Inspected>, ProviderError>> {
        Box::pin(Resource::inspect(self, cloud, id))
    }
    fn mark<'a>(&'a self, ctx: &'a Ctx, id: &'a str, token: &'a str) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(Resource::mark(self, ctx, id, token))
    }
    fn lookups(&self) -> Lookups {
        Resource::lookups(self)
    }
    fn look_up<'a>(&'a self, cloud: &'a Cloud, selector: &'a Selector) -> BoxFuture<'a, Result<Vec<Found>, ProviderError>> {
        Box::pin(Resource::look_up(self, cloud, selector))
    }
}

/// All kinds forge knows, by block type.
#[derive(Clone)]
pub struct Registry {
    kinds: BTreeMap<&'static str, Arc<dyn Kind>>,
}

impl Registry {
    /// The kinds built into this binary.
    pub fn builtin() -> Self {
        let registry = Self::empty().with(null::Null);
        #[cfg(feature = "aws")]
        let registry = aws::register(registry);
        #[cfg(feature = "gcp")]
        let registry = gcp::register(registry);
        #[cfg(any(feature = "aws", feature = "gcp"))]
        let registry = registry.with(k8s::object::K8sObject).with(k8s::teardown::K8sTeardown);
        registry
    }

    /// A registry with no kinds (tests add their own).
    pub fn empty() -> Self {
        Self { kinds: BTreeMap::new() }
    }

    /// Adds a kind.
    pub fn with(mut self, kind: impl Kind) -> Self {
        self.kinds.insert(kind.spec().name, Arc::new(kind));
        self
    }

    /// The kind for a block type.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Kind>> {
        self.kinds.get(name)
    }

    /// Every kind's name.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.keys().copied()
    }
}

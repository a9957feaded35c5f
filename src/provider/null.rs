//! `null`: forge's `terraform_data`. It touches no cloud; `triggers` force replacement and
//! `delay_ms` makes every call take that long, to rehearse a stack's timing.

use super::{Cloud, Created, Ctx, Declared, Field, FieldType, Observed, Output, ProviderError, Resource, Source, Spec};
use serde_json::{Value, json};
use std::time::Duration;

/// The `null` kind.
pub struct Null;

const SPEC: Spec = Spec {
    name: "null",
    fields: &[
        Field::optional("triggers", FieldType::Table).replacing(),
        Field::optional("delay_ms", FieldType::Integer),
    ],
    outputs: &[
        Output::cloud("id"),
        Output {
            name: "triggers",
            source: Source::Computed(|config, _| triggers(config)),
        },
    ],
};

impl Declared for Null {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
}

async fn pause(ctx: &Ctx, config: &Value, doing: &str) {
    let ms = config.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
    if ms > 0 {
        (ctx.status)(doing);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

fn triggers(config: &Value) -> Value {
    config.get("triggers").cloned().unwrap_or_else(|| json!({}))
}

impl Resource for Null {
    /// The id is the create's token: a fresh UUID per create, and the same one when an
    /// interrupted create is resumed — the idempotency real kinds get from their API.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        pause(ctx, config, "creating").await;
        Ok(Created {
            id: token.to_owned(),
            outputs: json!({ "id": token, "triggers": triggers(config) }),
        })
    }

    /// A `null` resource exists as long as the state records it, as recorded.
    async fn read(&self, _cloud: &Cloud, _stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        Ok(Observed::existing(ids.to_vec()))
    }

    /// A `null` resource exists only in the state: an interrupted create left nothing behind.
    async fn find(&self, _ctx: &Ctx, _token: &str, _config: &Value) -> Result<Option<String>, ProviderError> {
        Ok(None)
    }

    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        pause(ctx, new, "updating").await;
        Ok(json!({ "id": id, "triggers": triggers(new) }))
    }

    async fn delete(&self, ctx: &Ctx, _id: &str, config: &Value) -> Result<(), ProviderError> {
        pause(ctx, config, "deleting").await;
        Ok(())
    }
}

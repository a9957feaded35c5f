//! `null`: forge's `terraform_data`. It touches no cloud; `triggers` force replacement and
//! `delay_ms` makes every call take that long, to rehearse a stack's timing.

use super::{BoxFuture, Cloud, Created, Ctx, Field, FieldType, Kind, Observed, ProviderError, Spec};
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
    outputs: &["id", "triggers"],
};

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

impl Kind for Null {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    fn planned_outputs(&self, config: &Value, prior: Option<&Value>) -> Value {
        let id = crate::provider::prior_output(prior, "id");
        json!({ "id": id, "triggers": triggers(config) })
    }

    /// The id is the create's token: a fresh UUID per create, and the same one when an
    /// interrupted create is resumed — the idempotency real kinds get from their API.
    fn create<'a>(&'a self, ctx: &'a Ctx, token: &'a str, config: &'a Value) -> BoxFuture<'a, Result<Created, ProviderError>> {
        Box::pin(async move {
            pause(ctx, config, "creating").await;
            Ok(Created {
                id: token.to_owned(),
                outputs: json!({ "id": token, "triggers": triggers(config) }),
            })
        })
    }

    /// A `null` resource exists as long as the state records it, as recorded.
    fn read<'a>(&'a self, _cloud: &'a Cloud, _stack: &'a str, ids: &'a [String]) -> BoxFuture<'a, Result<Vec<Observed>, ProviderError>> {
        Box::pin(async move { Ok(Observed::existing(ids.to_vec())) })
    }

    /// A `null` resource exists only in the state: an interrupted create left nothing behind.
    fn find<'a>(&'a self, _ctx: &'a Ctx, _token: &'a str, _config: &'a Value) -> BoxFuture<'a, Result<Option<String>, ProviderError>> {
        Box::pin(async { Ok(None) })
    }

    fn update<'a>(&'a self, ctx: &'a Ctx, id: &'a str, _old: &'a Value, new: &'a Value) -> BoxFuture<'a, Result<Value, ProviderError>> {
        Box::pin(async move {
            pause(ctx, new, "updating").await;
            Ok(json!({ "id": id, "triggers": triggers(new) }))
        })
    }

    fn delete<'a>(&'a self, ctx: &'a Ctx, _id: &'a str, config: &'a Value) -> BoxFuture<'a, Result<(), ProviderError>> {
        Box::pin(async move {
            pause(ctx, config, "deleting").await;
            Ok(())
        })
    }
}

//! `aws_cloudformation_stack`: a CloudFormation stack from a template file (read when the stack
//! file loads, so an edited template shows in the plan) or an inline body, with parameters
//! (references allowed), capabilities and tags. Creates, updates and deletes wait for the stack
//! to settle; its outputs are readable as `${aws_cloudformation_stack.<name>.outputs.<key>}`.
//! A failure names the first resource that failed and CloudFormation's reason for it.

use crate::provider::aws::{Claim, Clients, Poll, TOKEN_TAG, create_tags, error, made_by, parse, wait_until};
use crate::provider::{Cloud, Created, Ctx, Observed, ProviderError, Resource, timeout};
use crate::schema::attributes;
use aws_sdk_cloudformation::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_cloudformation::types::{Capability, Parameter, Stack, StackStatus, Tag};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `aws_cloudformation_stack` kind.
pub(crate) struct CloudFormationStack;

attributes! {
    kind CloudFormationStack, spec "aws_cloudformation_stack", outputs [id, name = attribute, outputs], extra [timeouts, tags];
    struct Config {
        name: String [replace],
        template_file: Option<String> as File,
        template_body: Option<String>,
        #[serde(default)] parameters: Map<String, Value>,
        #[serde(default)] capabilities: Vec<String>,
    }
}

impl Config {
    /// The template's text: from the file or inline, exactly one of them.
    fn template(&self) -> Result<&str, ProviderError> {
        match (&self.template_file, &self.template_body) {
            (Some(text), None) | (None, Some(text)) => Ok(text),
            _ => Err(ProviderError::permanent(format!(
                "CloudFormation stack `{}` needs exactly one of `template_file` and `template_body`",
                self.name
            ))),
        }
    }

    /// Parameters as CloudFormation takes them: every value a string.
    fn parameters(&self) -> Vec<Parameter> {
        self.parameters
            .iter()
            .map(|(k, v)| Parameter::builder().parameter_key(k).parameter_value(parameter_text(v)).build())
            .collect()
    }

    fn capabilities(&self) -> Vec<Capability> {
        self.capabilities.iter().map(|c| Capability::from(c.as_str())).collect()
    }
}

const CREATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The stack `id` (its ARN, or its name); `None` when it does not exist or is deleted.
async fn describe(aws: &Clients, id: &str) -> Result<Option<Stack>, ProviderError> {
    match aws.cloudformation.describe_stacks().stack_name(id).send().await {
        Ok(out) => Ok(out
            .stacks()
            .first()
            .filter(|s| s.stack_status() != Some(&StackStatus::DeleteComplete))
            .cloned()),
        Err(e) if is_missing(&e) => Ok(None),
        Err(e) => Err(error(aws, "DescribeStacks", e)),
    }
}

/// CloudFormation says "Stack with id X does not exist" as a ValidationError.
fn is_missing<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> bool {
    crate::provider::aws::code(e) == Some("ValidationError") && e.message().is_some_and(|m| m.contains("does not exist"))
}

/// Every live stack of the account and region, all pages.
async fn all(aws: &Clients) -> Result<Vec<Stack>, ProviderError> {
    Ok(all_pages!(aws, aws.cloudformation.describe_stacks(), stacks, "DescribeStacks"))
}

/// A parameter value as CloudFormation keeps it: a string, lists joined with commas.
fn parameter_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// The first resource that failed in the stack's latest operation, with CloudFormation's
/// reason: "`NodeGroup` (AWS::EKS::Nodegroup) CREATE_FAILED: …".
async fn first_failure(aws: &Clients, id: &str) -> Result<Option<String>, ProviderError> {
    let out = aws
        .cloudformation
        .describe_stack_events()
        .stack_name(id)
        .send()
        .await
        .map_err(|e| error(aws, "DescribeStackEvents", e))?;
    // Events come newest first; the latest operation starts at the stack's own IN_PROGRESS.
    let mut latest = Vec::new();
    for event in out.stack_events() {
        let own = event.resource_type() == Some("AWS::CloudFormation::Stack");
        let status = event
            .resource_status()
            .map(aws_sdk_cloudformation::types::ResourceStatus::as_str)
            .unwrap_or_default();
        if own && (status == "CREATE_IN_PROGRESS" || status == "UPDATE_IN_PROGRESS" || status == "DELETE_IN_PROGRESS") {
            break;
        }
        latest.push(event);
    }
    Ok(latest
        .iter()
        .rev()
        .find(|e| {
            let status = e
                .resource_status()
                .map(aws_sdk_cloudformation::types::ResourceStatus::as_str)
                .unwrap_or_default();
            status.ends_with("_FAILED")
                && e.resource_type() != Some("AWS::CloudFormation::Stack")
                && !e.resource_status_reason().unwrap_or_default().contains("cancelled")
        })
        .map(|e| {
            format!(
                "`{}` ({}) {}: {}",
                e.logical_resource_id().unwrap_or("?"),
                e.resource_type().unwrap_or("?"),
                e.resource_status()
                    .map(aws_sdk_cloudformation::types::ResourceStatus::as_str)
                    .unwrap_or_default(),
                e.resource_status_reason().unwrap_or("no reason given")
            )
        }))
}

/// Waits until the stack leaves its `…_IN_PROGRESS` states and returns it then (`None`: gone).
async fn settle(ctx: &Ctx, aws: &Clients, id: &str, limit: Duration) -> Result<Option<Stack>, ProviderError> {
    wait_until(ctx, limit, || async {
        let found = describe(aws, id).await?;
        let status = found
            .as_ref()
            .map(|s| s.stack_status().map_or("CREATE_IN_PROGRESS", |s| s.as_str()).to_owned());
        Ok(match status {
            Some(status) if status.ends_with("_IN_PROGRESS") => Poll::Pending(status),
            _ => Poll::Done(found),
        })
    })
    .await
}

/// The error for a stack that settled in another status than the one asked for: the status and
/// the resource that failed, with CloudFormation's reason.
async fn ended(aws: &Clients, id: &str, stack: &Stack) -> Result<ProviderError, ProviderError> {
    let cause = first_failure(aws, id)
        .await?
        .unwrap_or_else(|| "CloudFormation names no failed resource".into());
    Ok(ProviderError::permanent(format!(
        "CloudFormation stack {id} ended {}: {cause}",
        stack.stack_status().map_or("?", |s| s.as_str())
    )))
}

/// The error for a stack that disappeared during a create or update.
fn disappeared(id: &str) -> ProviderError {
    ProviderError::permanent(format!("CloudFormation stack {id} disappeared while forge waited for it"))
}

fn outputs(stack: &Stack) -> Value {
    let values: Map<String, Value> = stack
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), json!(o.output_value()))))
        .collect();
    json!({ "id": stack.stack_id(), "name": stack.stack_name(), "outputs": values })
}

fn tag_list(tags: BTreeMap<String, String>) -> Vec<Tag> {
    tags.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

impl Resource for CloudFormationStack {
    /// What a template makes is its own: forge does not price it.
    fn meter(&self, _sight: &crate::cost::Sight) -> Option<crate::cost::Meter> {
        Some(crate::cost::Meter::Unpriced {
            reason: "forge does not price what a CloudFormation template makes".into(),
        })
    }
    /// Passes the create's token as `ClientRequestToken` and tags the stack with it, so a
    /// retried create adopts the stack its first try made. A stack that rolls back is deleted
    /// again (it can never be updated) and the error names the resource that failed.
    async fn create(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Created, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let aws = ctx.cloud.aws().await;
        let made = aws
            .cloudformation
            .create_stack()
            .stack_name(&cfg.name)
            .template_body(cfg.template()?)
            .set_parameters(Some(cfg.parameters()))
            .set_capabilities(Some(cfg.capabilities()))
            .set_tags(Some(tag_list(create_tags(ctx, token, config))))
            .client_request_token(token)
            .send()
            .await;
        let id = match made {
            Ok(out) => out.stack_id().unwrap_or(&cfg.name).to_owned(),
            Err(e) if crate::provider::aws::code(&e) == Some("AlreadyExistsException") => {
                let existing = describe(aws, &cfg.name).await?;
                let found = existing.map(|stack| (stack.stack_id().unwrap_or(&cfg.name).to_owned(), owned(ctx, token, &stack)));
                // The refusal reads "a CloudFormation stack named `…` already exists and was not created by …".
                Claim::new(ctx, token, "a CloudFormation stack named", &cfg.name).adopt(found)?
            }
            Err(e) => return Err(error(aws, "CreateStack", e)),
        };
        let stack = match settle(ctx, aws, &id, timeout(config, "create", CREATE_TIMEOUT)).await? {
            Some(stack) if stack.stack_status() == Some(&StackStatus::CreateComplete) => stack,
            Some(stack) => {
                let failed = ended(aws, &id, &stack).await?;
                let _ = aws.cloudformation.delete_stack().stack_name(&id).send().await;
                return Err(ProviderError {
                    message: format!(
                        "{}; forge is deleting the rolled-back stack, so fix the template or its parameters and run `forge up` again",
                        failed.message
                    ),
                    ..failed
                });
            }
            None => return Err(disappeared(&id)),
        };
        Ok(Created {
            outputs: outputs(&stack),
            id,
        })
    }

    /// Parameters as the strings CloudFormation keeps.
    fn comparable(&self, _id: &str, config: &Value) -> Value {
        let mut config = config.clone();
        if let Some(parameters) = config.get_mut("parameters").and_then(Value::as_object_mut) {
            for value in parameters.values_mut() {
                *value = Value::String(parameter_text(value));
            }
        }
        config
    }

    /// One DescribeStacks (all pages) for the recorded stacks and those tagged with forge's.
    async fn read(&self, cloud: &Cloud, stack: &str, ids: &[String]) -> Result<Vec<Observed>, ProviderError> {
        let found = all(cloud.aws().await).await?;
        Ok(found
            .iter()
            .filter(|s| s.stack_status() != Some(&StackStatus::DeleteComplete))
            .filter_map(|s| {
                let tags = crate::provider::aws::tag_table(s.tags().iter().map(|t| (t.key(), t.value())));
                let parameters: Map<String, Value> = s
                    .parameters()
                    .iter()
                    .filter_map(|p| Some((p.parameter_key()?.to_owned(), json!(p.parameter_value()))))
                    .collect();
                crate::provider::aws::listed(
                    stack,
                    ids,
                    s.stack_id()?.to_owned(),
                    tags,
                    |tags| json!({ "name": s.stack_name(), "parameters": parameters, "tags": tags }),
                )
            })
            .collect())
    }

    async fn find(&self, ctx: &Ctx, token: &str, config: &Value) -> Result<Option<String>, ProviderError> {
        let cfg: Config = parse(ctx, config)?;
        let found = describe(ctx.cloud.aws().await, &cfg.name).await?;
        Ok(found.filter(|s| owned(ctx, token, s)).and_then(|s| s.stack_id().map(str::to_owned)))
    }

    /// "No updates are to be performed" is CloudFormation agreeing, not an error.
    async fn update(&self, ctx: &Ctx, id: &str, _old: &Value, new: &Value) -> Result<Value, ProviderError> {
        let cfg: Config = parse(ctx, new)?;
        let aws = ctx.cloud.aws().await;
        let limit = timeout(new, "update", UPDATE_TIMEOUT);
        let mut new_tags = tag_list(ctx.tags(new));
        if let Some(stack) = describe(aws, id).await? {
            new_tags.extend(stack.tags().iter().filter(|t| t.key() == Some(TOKEN_TAG)).cloned());
        }
        let sent = aws
            .cloudformation
            .update_stack()
            .stack_name(id)
            .template_body(cfg.template()?)
            .set_parameters(Some(cfg.parameters()))
            .set_capabilities(Some(cfg.capabilities()))
            .set_tags(Some(new_tags))
            .send()
            .await;
        let changed = match sent {
            Ok(_) => true,
            Err(e)
                if crate::provider::aws::code(&e) == Some("ValidationError")
                    && e.message().is_some_and(|m| m.contains("No updates are to be performed")) =>
            {
                false
            }
            Err(e) => return Err(error(aws, "UpdateStack", e)),
        };
        let stack = if changed {
            settle(ctx, aws, id, limit).await?
        } else {
            describe(aws, id).await?
        };
        let stack = match stack {
            Some(stack) if !changed || stack.stack_status() == Some(&StackStatus::UpdateComplete) => stack,
            Some(stack) => return Err(ended(aws, id, &stack).await?),
            None => return Err(disappeared(id)),
        };
        Ok(outputs(&stack))
    }

    async fn delete(&self, ctx: &Ctx, id: &str, config: &Value) -> Result<(), ProviderError> {
        let aws = ctx.cloud.aws().await;
        match describe(aws, id).await? {
            None => return Ok(()),
            Some(s) if s.stack_status() == Some(&StackStatus::DeleteInProgress) => {}
            Some(_) => aws
                .cloudformation
                .delete_stack()
                .stack_name(id)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| error(aws, "DeleteStack", e))?,
        }
        match settle(ctx, aws, id, timeout(config, "delete", DELETE_TIMEOUT)).await? {
            None => Ok(()),
            Some(stack) => Err(ended(aws, id, &stack).await?),
        }
    }
}

/// Whether the stack was made by the create with `token` (see [`made_by`]).
fn owned(ctx: &Ctx, token: &str, stack: &Stack) -> bool {
    made_by(ctx, token, |k| {
        stack.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value())
    })
}

//! Paces every AWS call to its API's rate budget ([`crate::provider::budget`]), in the SDK's
//! own extension points so no kind has to think of it: an interceptor names each attempt's
//! budget (scope, service and action, from the SDK's operation metadata) and reports how it
//! came out, read with the SDK's own retry classifiers; the identity cache waits for the
//! budget's token before the attempt is signed. Clients without the interceptor (S3 state,
//! the credential chain's own) pass untouched.

use super::rates;
use crate::provider::budget::{Budget, Budgets, Ticket};
use aws_smithy_runtime::client::identity::IdentityCache;
use aws_smithy_runtime::client::retries::classifiers::run_classifiers_on_ctx;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::identity::{IdentityFuture, ResolveCachedIdentity, SharedIdentityCache, SharedIdentityResolver};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::retries::classifiers::{RetryAction, RetryReason};
use aws_smithy_runtime_api::client::runtime_components::{RuntimeComponents, RuntimeComponentsBuilder};
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use aws_smithy_types::retry::ErrorKind;
use std::sync::{Arc, OnceLock};

/// One attempt's budget, and its ticket once the identity cache has taken its token.
#[derive(Debug, Clone)]
struct Pace {
    budget: Arc<Budget>,
    ticket: Arc<OnceLock<Ticket>>,
}

impl Storable for Pace {
    type Storer = StoreReplace<Self>;
}

/// The interceptor each AWS client gets: `scope` names the account and region its calls
/// count against, `budgets` the command's budgets they draw on.
#[derive(Debug, Clone)]
pub(super) struct Pacer {
    /// The account and region (forge uses the clients' region, profile and endpoint).
    pub scope: String,
    /// The command's rate budgets.
    pub budgets: Arc<Budgets>,
}

impl Intercept for Pacer {
    fn name(&self) -> &'static str {
        "forge rate budget"
    }

    fn read_before_attempt(
        &self,
        _: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(metadata) = cfg.load::<Metadata>() else { return Ok(()) };
        let (service, action) = (metadata.service(), metadata.name());
        let api = format!("{}:{action}", service.to_ascii_lowercase());
        if let Some(budget) = self.budgets.budget(&self.scope, &api, rates::rate(service, action)) {
            cfg.interceptor_state().store_put(Pace {
                budget,
                ticket: Default::default(),
            });
        }
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(pace) = cfg.load::<Pace>() else { return Ok(()) };
        let Some(ticket) = pace.ticket.get() else { return Ok(()) };
        match run_classifiers_on_ctx(components.retry_classifiers(), context.inner()) {
            RetryAction::RetryIndicated(RetryReason::RetryableError {
                kind: ErrorKind::ThrottlingError,
                ..
            }) => pace.budget.throttled(*ticket),
            _ if matches!(context.output_or_error(), Some(Ok(_))) => pace.budget.succeeded(),
            _ => {}
        }
        Ok(())
    }
}

/// The SDK's identity cache (`lazy`), first waiting for the attempt's token: resolving the
/// credentials is the one step the SDK awaits in each attempt before it signs the request, so
/// a paced call is signed when its turn comes, never long before it is sent.
#[derive(Debug)]
pub(super) struct PacedIdentityCache(SharedIdentityCache);

impl PacedIdentityCache {
    /// The SDK's default identity cache behind the budgets.
    pub(super) fn new() -> Self {
        PacedIdentityCache(IdentityCache::lazy().build())
    }
}

impl ResolveCachedIdentity for PacedIdentityCache {
    fn resolve_cached_identity<'a>(
        &'a self,
        resolver: SharedIdentityResolver,
        components: &'a RuntimeComponents,
        cfg: &'a ConfigBag,
    ) -> IdentityFuture<'a> {
        let pace = cfg.load::<Pace>().cloned();
        IdentityFuture::new(async move {
            if let Some(pace) = pace {
                let _ = pace.ticket.set(pace.budget.acquire().await);
            }
            self.0.resolve_cached_identity(resolver, components, cfg).await
        })
    }

    fn validate_base_client_config(&self, components: &RuntimeComponentsBuilder, cfg: &ConfigBag) -> Result<(), BoxError> {
        self.0.validate_base_client_config(components, cfg)
    }

    fn validate_final_config(&self, components: &RuntimeComponents, cfg: &ConfigBag) -> Result<(), BoxError> {
        self.0.validate_final_config(components, cfg)
    }
}

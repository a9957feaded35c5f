//! The facts stage: between parsing a stack and checking it, the facts its components need are
//! gathered, all at once and once per run: instance types from AWS (their names, EFA
//! interfaces, the zones offering them), Kubernetes bundles from their release URLs. An
//! instance-type question AWS cannot answer falls back to the built-in table, with a warning;
//! a bundle that does not arrive stops the command (a stack without its objects would plan to
//! delete them).

use super::{Bundle, Facts, Needs};
use crate::output::format_duration;
use crate::provider::Cloud;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long AWS may take to answer about instance types before the built-in table is used.
#[cfg(feature = "aws")]
const INSTANCE_TYPES_WITHIN: Duration = Duration::from_secs(20);

/// How long the bundles may take to arrive.
const BUNDLES_WITHIN: Duration = Duration::from_secs(120);

/// What gathering tells the person running the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// What was asked and how long it took (shown with `-v`).
    Detail(String),
    /// A fallback: what could not be asked, and what forge did instead.
    Warning(String),
}

/// A bundle that could not be fetched: what went wrong and how to get past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleError {
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    pub hint: &'static str,
}

/// The facts `needs` asks for: instance types from AWS when `online` (else, or when AWS
/// cannot be asked, the built-in table), and the bundles; `notes` gets what to tell.
pub async fn gather(cloud: &Cloud, needs: &Needs, online: bool, notes: &mut Vec<Note>) -> Result<Facts, BundleError> {
    let facts = if online && !needs.instance_types.is_empty() {
        instance_types(cloud, &needs.instance_types, notes).await
    } else {
        Facts::builtin()
    };
    Ok(facts.with_bundles(bundles(&needs.bundles, notes).await?))
}

/// The instance types `names` as AWS knows them, within [`INSTANCE_TYPES_WITHIN`], else the
/// built-in table.
#[cfg(feature = "aws")]
async fn instance_types(cloud: &Cloud, names: &[String], notes: &mut Vec<Note>) -> Facts {
    let started = Instant::now();
    let fallback = "so forge used its built-in table and did not check which zones offer them";
    match tokio::time::timeout(INSTANCE_TYPES_WITHIN, crate::provider::aws::instance_types::lookup(cloud, names)).await {
        Ok(Ok(live)) => {
            notes.push(Note::Detail(format!(
                "instance types: {} checked with AWS in {}",
                names.join(", "),
                format_duration(started.elapsed())
            )));
            return Facts::live(live);
        }
        Ok(Err(e)) => notes.push(Note::Warning(format!(
            "could not check instance types with AWS, {fallback}: {}",
            e.message
        ))),
        Err(_) => notes.push(Note::Warning(format!(
            "AWS did not answer about instance types within {}, {fallback}",
            humantime::format_duration(INSTANCE_TYPES_WITHIN)
        ))),
    }
    Facts::builtin()
}

/// Without AWS in the build, no component names an instance type: the built-in table.
#[cfg(not(feature = "aws"))]
async fn instance_types(_: &Cloud, _: &[String], _: &mut Vec<Note>) -> Facts {
    Facts::builtin()
}

/// The bundles at `urls`, fetched over HTTPS within [`BUNDLES_WITHIN`]; a build without a
/// cloud has no component that asks for one.
async fn bundles(urls: &[String], notes: &mut Vec<Note>) -> Result<BTreeMap<String, Bundle>, BundleError> {
    if urls.is_empty() {
        return Ok(BTreeMap::new());
    }
    let started = Instant::now();
    #[cfg(any(feature = "aws", feature = "gcp"))]
    let fetched = tokio::time::timeout(BUNDLES_WITHIN, crate::provider::k8s::bundle::fetch(urls)).await;
    #[cfg(not(any(feature = "aws", feature = "gcp")))]
    let fetched: Result<Result<_, crate::provider::ProviderError>, tokio::time::error::Elapsed> = Ok(Ok(BTreeMap::new()));
    let bundles = match fetched {
        Ok(Ok(bundles)) => bundles,
        Ok(Err(e)) => {
            return Err(BundleError {
                message: e.message,
                hint: "fetch it again, or pin another version",
            });
        }
        Err(_) => {
            return Err(BundleError {
                message: format!(
                    "the bundles ({}) did not arrive within {}",
                    urls.join(", "),
                    humantime::format_duration(BUNDLES_WITHIN)
                ),
                hint: "check the network, or set FORGE_BUNDLE_MIRROR to a mirror of their hosts",
            });
        }
    };
    notes.push(Note::Detail(format!(
        "bundles: {} fetched in {}",
        urls.join(", "),
        format_duration(started.elapsed())
    )));
    Ok(bundles)
}

//! The GCS object store of `[state] backend = "gcs"`, through Google's official
//! `google-cloud-storage` crate with the GCP provider's credentials (handed in as an
//! [`Access`]). That crate reads and writes objects over the JSON API but deletes and lists only
//! over gRPC, so this store does neither: the remote state needs reads, create-only writes
//! (`ifGenerationMatch=0`) and compare-and-swap writes (`ifGenerationMatch=<generation>`). The
//! endpoint is `[gcp] endpoints.storage`, else gcloud's `CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE`,
//! else `STORAGE_EMULATOR_HOST` (as Google's clients read it), else Google's. Objects are
//! encrypted with Google's keys, or with the Cloud KMS key `kms_key_name`.

use super::backend::Access;
use super::objects::{CallRuntime, Condition, ObjectError, Objects};
use google_cloud_gax::retry_policy::RetryPolicyExt;
use google_cloud_storage::client::Storage;
use google_cloud_storage::retry_policy::RetryableErrors;

/// A bucket, with its client and the runtime its calls run on.
pub struct GcsObjects {
    client: Storage,
    /// `projects/_/buckets/<bucket>`, as the crate names a bucket.
    bucket_path: String,
    bucket: String,
    kms_key_name: Option<String>,
    runtime: CallRuntime,
    /// "bucket …, project …, endpoint …", said with every error.
    context: String,
    /// How the GCP provider words an HTTP answer that is not the API's own.
    not_the_api: fn(u16, &[u8]) -> String,
}

/// The endpoint from the settings or the environment, in the order the module doc gives.
fn configured_endpoint(endpoint: Option<&str>) -> Option<String> {
    let variable = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    endpoint
        .map(str::to_owned)
        .or_else(|| variable("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE"))
        .or_else(|| variable("STORAGE_EMULATOR_HOST").map(|host| if host.contains("://") { host } else { format!("http://{host}") }))
}

impl GcsObjects {
    /// The store of `bucket` (of project `project`, named in messages), with the Cloud KMS key
    /// `kms_key_name` when given, at `endpoint` (`[gcp] endpoints.storage`) or the environment's;
    /// root URL, credentials and error wording from the GCP provider, through `access`.
    pub fn connect(
        bucket: &str,
        project: Option<&str>,
        endpoint: Option<&str>,
        kms_key_name: Option<&str>,
        access: &Access,
    ) -> Result<GcsObjects, String> {
        let runtime = CallRuntime::new("GCS")?;
        let root = (access.gcp_root_url)(configured_endpoint(endpoint), "storage");
        let context = format!("bucket {bucket}, project {}, endpoint {root}", project.unwrap_or("(not set)"));
        let credentials = (access.gcp_credentials)()?;
        let client = runtime
            .block_on(
                Storage::builder()
                    .with_endpoint(&root)
                    .with_credentials(credentials)
                    // A few tries per call, as the AWS SDK makes: the remote state retries on
                    // top, and stops the run on an outage rather than wait out the crate's
                    // default of five minutes.
                    .with_retry_policy(RetryableErrors.with_attempt_limit(3))
                    .build(),
            )
            .map_err(|e| format!("cannot reach GCS ({context}): {e}"))?;
        Ok(GcsObjects {
            client,
            bucket_path: format!("projects/_/buckets/{bucket}"),
            bucket: bucket.to_owned(),
            kms_key_name: kms_key_name.map(str::to_owned),
            runtime,
            context,
            not_the_api: access.not_the_api,
        })
    }

    /// The object's bytes and generation, or `None`; a missing bucket is an error.
    async fn read(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>, ObjectError> {
        let mut response = match self.client.read_object(&self.bucket_path, key).send().await {
            Ok(response) => response,
            Err(e) if e.http_status_code() == Some(404) && !self.message(&e).contains("bucket") => return Ok(None),
            Err(e) => return Err(self.failed("cannot read", key, &e)),
        };
        let generation = response.object().generation;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.next().await {
            bytes.extend_from_slice(&chunk.map_err(|e| self.failed("cannot read", key, &e))?);
        }
        Ok(Some((bytes, generation)))
    }

    fn failed(&self, what: &str, key: &str, err: &google_cloud_storage::Error) -> ObjectError {
        let text = self.message(err);
        let hint = match err.http_status_code() {
            Some(404) => " — create the bucket first (with object versioning on, to keep every snapshot), or fix `[state] bucket`",
            Some(401 | 403) => " — the credentials in use may not read or write this bucket",
            _ => "",
        };
        ObjectError::Failed(format!("{what} gs://{}/{key}: {text}{hint} ({})", self.bucket, self.context))
    }

    /// GCS's own message, else the HTTP status and the first words of what answered, else the
    /// client's error (a connection refused, a timeout).
    fn message(&self, err: &google_cloud_storage::Error) -> String {
        match (err.status(), err.http_status_code()) {
            (Some(status), _) if !status.message.is_empty() => status.message.clone(),
            (_, Some(code)) => (self.not_the_api)(code, err.http_payload().map(std::convert::AsRef::as_ref).unwrap_or_default()),
            _ => err.to_string(),
        }
    }
}

impl Objects for GcsObjects {
    fn url(&self, key: &str) -> String {
        format!("gs://{}/{key}", self.bucket)
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, String)>, ObjectError> {
        self.runtime
            .block_on(self.read(key))
            .map(|found| found.map(|(bytes, generation)| (bytes, generation.to_string())))
    }

    fn put(&self, key: &str, bytes: Vec<u8>, condition: Condition) -> Result<String, ObjectError> {
        let generation = match &condition {
            Condition::Always => None,
            Condition::Absent => Some(0),
            Condition::Version(tag) => Some(tag.parse::<i64>().map_err(|_| ObjectError::Conflict)?),
        };
        let mut call = self
            .client
            .write_object(&self.bucket_path, key, bytes::Bytes::from(bytes))
            .set_content_type("application/json")
            // Writing the same bytes again is harmless, so every write may be retried.
            .with_idempotency(true);
        if let Some(generation) = generation {
            call = call.set_if_generation_match(generation);
        }
        if let Some(kms) = &self.kms_key_name {
            call = call.set_kms_key(kms);
        }
        self.runtime.block_on(async {
            match call.send_unbuffered().await {
                Ok(object) => Ok(object.generation.to_string()),
                Err(e) if e.http_status_code() == Some(412) => Err(ObjectError::Conflict),
                Err(e) => Err(self.failed("cannot write", key, &e)),
            }
        })
    }

    /// The crate deletes only over gRPC: a folded segment stays, a small object no reader opens
    /// again (a bucket lifecycle rule on `<prefix>/state.json.journal/` clears them).
    fn discard(&self, _key: &str) {}
}

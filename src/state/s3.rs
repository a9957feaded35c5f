//! The S3 object store of `[state] backend = "s3"`, through `aws-sdk-s3` with the standard AWS
//! credential chain and environment (`AWS_ENDPOINT_URL`, `AWS_PROFILE`, …). Conditional writes
//! are S3's own (`If-None-Match: *`, `If-Match: <etag>`), so two runs can never both create a
//! lock or a journal segment, nor both replace one snapshot. Objects are encrypted with SSE-S3,
//! or SSE-KMS with `kms_key_id`.

use super::objects::{CallRuntime, Condition, ObjectError, Objects};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;

/// A bucket, with its client and the runtime its calls run on.
pub struct S3Objects {
    client: aws_sdk_s3::Client,
    bucket: String,
    kms_key_id: Option<String>,
    runtime: CallRuntime,
    /// "bucket …, region …, endpoint …", said with every error.
    context: String,
}

impl S3Objects {
    /// The store of `bucket`: region `region` (else the environment's), SSE-KMS with
    /// `kms_key_id` when given. A custom endpoint (`AWS_ENDPOINT_URL`: MinIO, an emulator) is
    /// addressed path-style, as such servers expect.
    pub fn connect(bucket: &str, region: Option<&str>, kms_key_id: Option<&str>) -> Result<S3Objects, String> {
        let runtime = CallRuntime::new("S3")?;
        let config = runtime.block_on(async {
            let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
            if let Some(region) = region {
                loader = loader.region(aws_config::Region::new(region.to_owned()));
            }
            loader.load().await
        });
        let path_style = config.endpoint_url().is_some();
        let context = format!(
            "bucket {bucket}, region {}, endpoint {}",
            config.region().map_or("(none)", |r| r.as_ref()),
            config.endpoint_url().unwrap_or("AWS")
        );
        let s3 = aws_sdk_s3::config::Builder::from(&config).force_path_style(path_style).build();
        Ok(S3Objects {
            client: aws_sdk_s3::Client::from_conf(s3),
            bucket: bucket.to_owned(),
            kms_key_id: kms_key_id.map(str::to_owned),
            runtime,
            context,
        })
    }

    fn failed<E: ProvideErrorMetadata + std::error::Error + 'static>(
        &self,
        what: &str,
        key: &str,
        err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> ObjectError {
        let status = err.raw_response().map(|r| r.status().as_u16());
        if matches!(status, Some(412 | 409)) {
            // 409: a conditional write that raced another one on the same key.
            return ObjectError::Conflict;
        }
        let message = match (err.code(), err.message()) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => code.to_owned(),
            _ => match (status, err.raw_response()) {
                (Some(status), _) => format!("HTTP {status}"),
                _ => aws_sdk_s3::error::DisplayErrorContext(err).to_string(),
            },
        };
        let hint = match err.code() {
            Some("NoSuchBucket") => " — create the bucket first (with versioning on, to keep every snapshot), or fix `[state] bucket`",
            Some("AccessDenied") => " — the credentials in use may not read or write this bucket",
            _ => "",
        };
        ObjectError::Failed(format!("{what} s3://{}/{key}: {message}{hint} ({})", self.bucket, self.context))
    }
}

impl Objects for S3Objects {
    fn url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, String)>, ObjectError> {
        self.runtime.block_on(async {
            match self.client.get_object().bucket(&self.bucket).key(key).send().await {
                Ok(out) => {
                    let tag = out.e_tag().unwrap_or_default().to_owned();
                    let bytes = out
                        .body
                        .collect()
                        .await
                        .map_err(|e| ObjectError::Failed(format!("reading s3://{}/{key}: {e} ({})", self.bucket, self.context)))?;
                    Ok(Some((bytes.into_bytes().to_vec(), tag)))
                }
                Err(e) if e.code() == Some("NoSuchKey") => Ok(None),
                Err(e) => Err(self.failed("cannot read", key, &e)),
            }
        })
    }

    fn put(&self, key: &str, bytes: Vec<u8>, condition: Condition) -> Result<String, ObjectError> {
        let mut call = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("application/json")
            .body(ByteStream::from(bytes));
        call = match &self.kms_key_id {
            Some(kms) => call.server_side_encryption(ServerSideEncryption::AwsKms).ssekms_key_id(kms),
            None => call.server_side_encryption(ServerSideEncryption::Aes256),
        };
        call = match condition {
            Condition::Always => call,
            Condition::Absent => call.if_none_match("*"),
            Condition::Version(tag) => call.if_match(tag),
        };
        self.runtime.block_on(async {
            match call.send().await {
                Ok(out) => Ok(out.e_tag().unwrap_or_default().to_owned()),
                Err(e) => Err(self.failed("cannot write", key, &e)),
            }
        })
    }

    fn discard(&self, key: &str) {
        let call = self.client.delete_object().bucket(&self.bucket).key(key);
        let _ = self.runtime.block_on(call.send());
    }
}

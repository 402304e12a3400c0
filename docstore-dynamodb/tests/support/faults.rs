//! A fault-injecting HTTP client: every request really reaches the emulator, and then, when
//! the plan says so, its answer is lost — replaced by an HTTP 500 (which DynamoDB documents as
//! "may have succeeded") or by a dropped connection — so the SDK sends the request again.

use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition, TokenBucket};
use aws_sdk_dynamodb::config::{HttpClient, RuntimeComponents, SharedHttpClient};
use aws_smithy_runtime_api::client::http::{
    HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How an answer is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// The emulator's answer is replaced by `500 InternalServerError`.
    ServerError,
    /// The emulator's answer is thrown away and the connection reported as reset.
    Dropped,
}

/// A refusal the emulator never sees: the request is answered with this status and error
/// type instead of being sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: u16,
    /// The DynamoDB error type, e.g. `ProvisionedThroughputExceededException`.
    pub code: &'static str,
    /// Refuse every request of the operation, not only the next one.
    pub always: bool,
}

/// What runs between a lost attempt and its resend: another writer.
pub type Hook = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// One scripted loss: the operation, how, and what runs before the SDK hears of it.
struct Scripted {
    operation: String,
    loss: Loss,
    then: Option<Hook>,
}

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} (hook: {})",
            self.operation,
            self.loss,
            self.then.is_some()
        )
    }
}

/// Which answers to lose.
#[derive(Default, Debug)]
struct Plan {
    /// Losses for the next requests of an operation (`"PutItem"`, ...), in order.
    scripted: VecDeque<Scripted>,
    /// Random losses: probability per write request, and the generator's state.
    random: Option<(f64, u64)>,
    /// The previous answer was lost: the next request (its resend) is answered.
    just_lost: bool,
    /// Every loss injected, by operation.
    injected: Vec<(String, Loss)>,
    /// Refusals by operation.
    refusals: Vec<(String, Refusal)>,
    /// BatchGetItem requests still to answer with every key unprocessed.
    unprocessed: usize,
}

/// The handle a test keeps to script losses and read what was injected.
#[derive(Clone, Debug, Default)]
pub struct Faults(Arc<Mutex<Plan>>);

const WRITES: &[&str] = &["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems"];

impl Faults {
    /// Loses the answer of the next request of `operation`.
    pub fn lose_next(&self, operation: &str, loss: Loss) {
        self.0.lock().unwrap().scripted.push_back(Scripted {
            operation: operation.to_owned(),
            loss,
            then: None,
        });
    }

    /// Loses the answer of the next request of `operation`, after running `then` (another
    /// writer getting in between the lost attempt and its resend).
    pub fn lose_next_then<F>(&self, operation: &str, loss: Loss, then: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.lock().unwrap().scripted.push_back(Scripted {
            operation: operation.to_owned(),
            loss,
            then: Some(Box::new(move || Box::pin(then))),
        });
    }

    /// Loses each write answer with probability `p` (never the resend of a lost one), from a
    /// generator seeded with `seed`.
    pub fn lose_randomly(&self, p: f64, seed: u64) {
        self.0.lock().unwrap().random = Some((p, seed.max(1)));
    }

    /// Answers the next `count` BatchGetItem requests, without sending them, with every key
    /// unprocessed (as DynamoDB does under throttling or past 16 MB).
    pub fn unprocess_next(&self, count: usize) {
        self.0.lock().unwrap().unprocessed += count;
    }

    fn take_unprocessed(&self) -> bool {
        let mut plan = self.0.lock().unwrap();
        let take = plan.unprocessed > 0;
        if take {
            plan.unprocessed -= 1;
            plan.injected
                .push(("BatchGetItem".to_owned(), Loss::ServerError));
        }
        take
    }

    /// Answers requests of `operation` with `refusal` without sending them.
    pub fn refuse(&self, operation: &str, refusal: Refusal) {
        self.0
            .lock()
            .unwrap()
            .refusals
            .push((operation.to_owned(), refusal));
    }

    fn refusal(&self, operation: &str) -> Option<Refusal> {
        let mut plan = self.0.lock().unwrap();
        let at = plan.refusals.iter().position(|(op, _)| op == operation)?;
        let refusal = plan.refusals[at].1.clone();
        if !refusal.always {
            plan.refusals.remove(at);
        }
        Some(refusal)
    }

    /// The losses injected so far.
    pub fn injected(&self) -> Vec<(String, Loss)> {
        self.0.lock().unwrap().injected.clone()
    }

    /// Whether every scripted loss was used.
    pub fn script_done(&self) -> bool {
        self.0.lock().unwrap().scripted.is_empty()
    }

    fn decide(&self, operation: &str) -> (Option<Loss>, Option<Hook>) {
        let mut plan = self.0.lock().unwrap();
        if std::mem::take(&mut plan.just_lost) {
            return (None, None);
        }
        let mut loss = None;
        let mut hook = None;
        if plan
            .scripted
            .front()
            .is_some_and(|s| s.operation == operation)
        {
            let scripted = plan.scripted.pop_front().expect("checked");
            loss = Some(scripted.loss);
            hook = scripted.then;
        } else if let Some((p, state)) = plan.random.as_mut()
            && WRITES.contains(&operation)
        {
            // xorshift64: reproducible from the seed, no dependency.
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            let draw = (*state >> 11) as f64 / (1u64 << 53) as f64;
            if draw < *p {
                loss = Some(if *state & 1 == 0 {
                    Loss::ServerError
                } else {
                    Loss::Dropped
                });
            }
        }
        if let Some(loss) = loss {
            plan.just_lost = true;
            plan.injected.push((operation.to_owned(), loss));
        }
        (loss, hook)
    }

    /// An SDK HTTP client (plain HTTP, for the emulators) that loses answers by this plan.
    pub fn http_client(&self) -> SharedHttpClient {
        SharedHttpClient::new(FaultyClient {
            inner: aws_smithy_http_client::Builder::new().build_http(),
            faults: self.clone(),
        })
    }

    /// Retries for tests that lose many answers: quick, and without the retry quota that
    /// would otherwise run dry (the SDK shares it per partition).
    pub fn retry_config() -> (RetryConfig, RetryPartition) {
        (
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(1)),
            RetryPartition::custom("docstore-faults")
                .token_bucket(TokenBucket::unlimited())
                .build(),
        )
    }
}

#[derive(Debug)]
struct FaultyClient {
    inner: SharedHttpClient,
    faults: Faults,
}

impl HttpClient for FaultyClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(FaultyConnector {
            inner: self.inner.http_connector(settings, components),
            faults: self.faults.clone(),
        })
    }
}

#[derive(Debug)]
struct FaultyConnector {
    inner: SharedHttpConnector,
    faults: Faults,
}

impl HttpConnector for FaultyConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let operation = request
            .headers()
            .get("x-amz-target")
            .and_then(|target| target.rsplit('.').next())
            .unwrap_or_default()
            .to_owned();
        let inner = self.inner.clone();
        let faults = self.faults.clone();
        HttpConnectorFuture::new(async move {
            if operation == "BatchGetItem" && faults.take_unprocessed() {
                let body: serde_json::Value =
                    serde_json::from_slice(request.body().bytes().unwrap_or_default())
                        .expect("a JSON request");
                let answer = serde_json::json!({
                    "Responses": {},
                    "UnprocessedKeys": body["RequestItems"],
                });
                return Ok(HttpResponse::new(
                    StatusCode::try_from(200).expect("valid status"),
                    SdkBody::from(answer.to_string()),
                ));
            }
            if let Some(refusal) = faults.refusal(&operation) {
                return Ok(HttpResponse::new(
                    StatusCode::try_from(refusal.status).expect("valid status"),
                    SdkBody::from(format!(
                        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{}","message":"injected refusal"}}"#,
                        refusal.code
                    )),
                ));
            }
            // Otherwise the request reaches the emulator and is applied there (or refused).
            let response = inner.call(request).await?;
            let (loss, hook) = faults.decide(&operation);
            if let Some(hook) = hook {
                hook().await;
            }
            match loss {
                None => Ok(response),
                Some(Loss::ServerError) => Ok(HttpResponse::new(
                    StatusCode::try_from(500).expect("valid status"),
                    SdkBody::from(
                        r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected: answer lost"}"#,
                    ),
                )),
                Some(Loss::Dropped) => Err(ConnectorError::io(
                    "injected: connection dropped after the request was applied".into(),
                )),
            }
        })
    }
}

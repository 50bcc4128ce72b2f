//! Query status while a question waits: when a question of a known Query is asked, the Query's phase goes
//! to the waiting phase and `waitingFor` is recorded (in Postgres, and in an annotation on the Query); when
//! it is answered, cancelled or expires, the phase goes back to `running` and the annotation goes away.
//!
//! The patches come from an outbox written with the question change (see migration 0006): every replica runs
//! this worker, each patch is claimed by one of them, and failures are retried with backoff. The answer
//! never waits for Kubernetes. Without Kubernetes configuration the worker does not start.

use crate::db::pool::Pool;
mod patch;
pub mod store;

pub use patch::WAITING_FOR_ANNOTATION;

use crate::telemetry::chain;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::{
    patch::{Outcome, QueryPatcher},
    store::{PatchJob, PatchStore},
};
use crate::{
    config::{Config, StatusPatching},
    db::{
        outbox::{self, CLAIM, LEASE_SECONDS, MAX_ATTEMPTS},
        wakeup::Wakeups,
    },
    kubernetes::KubeSetupError,
    questions::store::QuestionStore,
    telemetry::metrics,
};

/// A Kubernetes client per the configuration, or `None` (logged once) when status patching is off.
pub async fn client(config: &Config) -> Option<kube::Client> {
    if config.kube_status_patching == StatusPatching::Off {
        tracing::info!("Query status patching is off (--kube-status-patching=off)");
        return None;
    }
    match crate::kubernetes::client(config.kube_api_url.as_deref()).await {
        Ok(client) => Some(client),
        Err(KubeSetupError::NotFound) => {
            tracing::info!(
                "no Kubernetes configuration found (in-cluster or kubeconfig); Query status patching is off"
            );
            None
        }
        Err(error) => {
            tracing::warn!(error = %chain(&error), "Query status patching is off");
            None
        }
    }
}

/// Starts the worker on this replica.
pub fn spawn(
    client: kube::Client,
    config: &Config,
    pool: Pool,
    wakeups: Wakeups,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let worker = Worker {
        patcher: QueryPatcher::new(client, config.waiting_phase.clone()),
        store: PatchStore::new(pool.clone()),
        questions: QuestionStore::new(pool),
    };
    tokio::spawn(worker.run(wakeups, cancel))
}

struct Worker {
    patcher: QueryPatcher,
    store: PatchStore,
    questions: QuestionStore,
}

impl Worker {
    async fn run(self, wakeups: Wakeups, cancel: CancellationToken) {
        outbox::work_off(wakeups, cancel, || self.drain()).await;
    }

    async fn drain(&self) {
        loop {
            let jobs = match self.store.claim_due(CLAIM, LEASE_SECONDS).await {
                Ok(jobs) if !jobs.is_empty() => jobs,
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(error = %chain(&error), "cannot claim Query status patches");
                    return;
                }
            };
            for job in jobs {
                let outcome = self.attempt(&job).await;
                if let Err(error) = self.settle(&job, outcome).await {
                    tracing::warn!(error = %chain(&error), patch.id = job.id, "cannot record a Query status patch; it will be retried");
                }
            }
        }
    }

    async fn attempt(&self, job: &PatchJob) -> Outcome {
        let (namespace, name) = (&job.query_namespace, &job.query_name);
        let question = match self.questions.waiting_for(&job.question_id).await {
            Ok(Some(question)) => question,
            Ok(None) => return Outcome::Done("skipped: the question is gone".into()),
            Err(error) => return Outcome::Retry(chain(&error).to_string()),
        };
        if job.action == "wait" {
            if !question.pending {
                return Outcome::Done("skipped: the question was already closed".into());
            }
            return self.patcher.wait(namespace, name, &question).await;
        }
        match self.questions.still_waiting(namespace, name, &job.question_id).await {
            Ok(other) => self.patcher.resume(namespace, name, other.as_ref()).await,
            Err(error) => Outcome::Retry(chain(&error).to_string()),
        }
    }

    async fn settle(&self, job: &PatchJob, outcome: Outcome) -> crate::db::StoreResult<()> {
        let query = format!("{}/{}", job.query_namespace, job.query_name);
        match outcome {
            Outcome::Done(result) => {
                tracing::info!(query = %query, question.id = %job.question_id, action = %job.action, %result, "Query status");
                self.store.finish(job.id, &result).await
            }
            Outcome::Retry(error) if job.attempts < MAX_ATTEMPTS => {
                let delay_ms = outbox::backoff_ms(job.attempts);
                tracing::warn!(query = %query, attempts = job.attempts, retry_ms = delay_ms, %error, "Query status patch failed; retrying");
                metrics::outbox_failed(metrics::Outbox::StatusPatches);
                self.store.retry_later(job.id, delay_ms, &error).await
            }
            Outcome::Retry(error) | Outcome::GiveUp(error) => {
                tracing::warn!(query = %query, attempts = job.attempts, %error, "Query status patch given up");
                metrics::outbox_failed(metrics::Outbox::StatusPatches);
                self.store.finish(job.id, &format!("gave up: {error}")).await
            }
        }
    }
}

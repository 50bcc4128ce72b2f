//! The rmcp `ServerHandler`: tools, blocking `ask_question` with progress, and the 2026-07-28 (SEP-2663)
//! task methods. rmcp does the protocol (versions, `server/discover`, headers, framing); this file only
//! maps it onto questions.

use std::borrow::Cow;

use axum::http::request::Parts;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult, GetTaskParams,
        GetTaskResult, Implementation, InputRequiredResult, InputResponses, ListToolsResult, PaginatedRequestParams,
        ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig, UpdateTaskParams,
    },
    service::RequestContext,
};

use serde_json::Value;

use super::{
    caller::{self, Modes, Replied},
    handoff::{Handed, Handoff},
    tasks::{self, Tasks, internal},
    tools::{self, BrokerTool, Caller, NotAsked},
    waiter::{Wait, Waiter, pending_message, shutting_down},
};
use crate::{
    questions::{
        Change,
        model::{Question, QuestionStatus},
        store::QuestionFilter,
    },
    state::AppState,
};

/// The protocol versions served: both task eras and the two before them (blocking calls only).
const VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2026_07_28,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
];

/// The MCP server; cheap to clone (rmcp builds one per request in stateless mode).
#[derive(Debug, Clone)]
pub struct BrokerMcp {
    state: AppState,
    tasks: Tasks,
    /// The conformance suite's fixture tools, in a build and on a replica that serves them.
    #[cfg(feature = "conformance-fixtures")]
    fixtures: Option<super::fixtures::Fixtures>,
}

impl BrokerMcp {
    /// A server over the broker's state.
    pub fn new(state: AppState) -> Self {
        BrokerMcp {
            tasks: Tasks::new(state.clone()),
            #[cfg(feature = "conformance-fixtures")]
            fixtures: super::fixtures::Fixtures::of(&state),
            state,
        }
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        let mut caller =
            context.extensions.get::<Parts>().map(|parts| Caller::from_request(parts, &self.state)).unwrap_or_default();
        // A 2026-07-28 request declares its client's capabilities itself.
        if let Some(capabilities) = context.meta.client_capabilities() {
            caller.elicitation = Modes::of(&serde_json::to_value(capabilities).unwrap_or_default());
        }
        caller
    }

    async fn ask(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context).traced(context.meta.get_traceparent(), &self.state.config);
        if let Some(question_id) = &request.request_state {
            return self.resume(question_id, request.input_responses.as_ref(), &caller, context).await;
        }
        let question = match tools::ask(request.arguments.as_ref(), &caller, &self.state).await {
            Ok(question) => question,
            Err(NotAsked::Invalid(error)) => return Err(error),
            Err(NotAsked::ToolError(result)) => return Ok(CallToolResponse::Complete(*result)),
        };
        if context.client_capabilities().is_some_and(|c| c.supports_tasks()) {
            let question = self.tasks.create(question, None).await?;
            let task = tasks::modern_task(&question, self.tasks.task_poll_interval_ms());
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        let question = self.state.questions.create(&question).await.map_err(internal)?;
        // Asking the caller: the client asks its person and calls again with the answer and this state.
        if let Some(input_requests) = caller::elicitation(&question, &caller.page_base).and_then(caller::input_requests)
        {
            return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                Some(input_requests),
                Some(question.id),
            )));
        }
        self.wait(question, context).await
    }

    /// A call again with the person's reply (`inputResponses`) to the question its `requestState` names:
    /// the reply answers or declines it, and the call returns its outcome, or waits for it as a blocking call
    /// when it is still pending (the person opened its page, or their answer was not taken).
    async fn resume(
        &self,
        question_id: &str,
        responses: Option<&InputResponses>,
        caller: &Caller,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let unknown = || McpError::invalid_params("requestState does not name a question this caller asked", None);
        let question = self.state.questions.get(question_id).await.map_err(internal)?.ok_or_else(unknown)?;
        // The state comes back from the client: it must name a question this caller asked of its client.
        if question.caller_elicitation.is_none() || (caller.owner.is_some() && question.owner != caller.owner) {
            return Err(unknown());
        }
        let question = match responses.and_then(|responses| responses.get(caller::INPUT_KEY)) {
            Some(response) => self.reply(&question.id, caller, response).await?.unwrap_or(question),
            None => question,
        };
        match tools::outcome(&question) {
            Some(result) => Ok(CallToolResponse::Complete(result)),
            None => self.wait(question, context).await,
        }
    }

    /// Applies a reply to the question's elicitation; the question as it now is (`None` when the reply was
    /// not taken: the question waits for its other channels).
    async fn reply(&self, question_id: &str, caller: &Caller, response: &Value) -> Result<Option<Question>, McpError> {
        match caller::apply(&self.state, question_id, caller.principal.as_ref(), Ok(response))
            .await
            .map_err(internal)?
        {
            Replied::Question(question) => Ok(Some(*question)),
            Replied::Refused(why) | Replied::Forbidden(why) => {
                tracing::info!(question.id = %question_id, %why, "the caller's reply was not taken");
                Ok(None)
            }
            Replied::NotFound => Err(McpError::invalid_params("the question is gone", None)),
        }
    }

    /// Waits for `question` to close as a blocking call: handed to the layer in front when it can be.
    async fn wait(
        &self,
        question: Question,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(handoff) = Handoff::of(&context) {
            let token = context.meta.get_progress_token();
            handoff.give(Handed { question_id: question.id, id: context.id.clone(), token });
            // The layer in front waits and replies; this reply is dropped unread.
            return Ok(CallToolResponse::Complete(CallToolResult::success(Vec::new())));
        }
        self.wait_blocking(&question, &context).await.map(CallToolResponse::Complete)
    }

    /// Blocks until the question closes, sending progress while it is pending. A client disconnect or
    /// shutdown ends the wait, never the question. (A blocking call reaching rmcp through the layer in front
    /// is waited for there instead, [`super::handoff`]; this serves one reaching rmcp any other way.)
    async fn wait_blocking(
        &self,
        question: &Question,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let token = context.meta.get_progress_token();
        let mut waiter = Waiter::new(&self.state, &question.id, self.state.config.mcp_progress_interval());
        let mut progress = 0u32;
        loop {
            let next = tokio::select! {
                next = waiter.next() => next.map_err(internal)?,
                _ = context.ct.cancelled() => {
                    tracing::info!(question.id = %question.id, "caller went away; the question stays pending");
                    return Err(McpError::internal_error("request cancelled; the question stays pending", None));
                }
                _ = self.state.shutdown.cancelled() => return Err(shutting_down(&question.id)),
            };
            match next {
                Some(Wait::Closed(closed)) => return Ok(tools::outcome(&closed).expect("a closed question")),
                None => return Err(McpError::internal_error("the question disappeared", None)),
                Some(Wait::Tick) => {
                    self.report(token.as_ref(), &mut progress, pending_message(&question.id), context).await;
                }
                Some(Wait::Delivered(reports)) => {
                    for message in reports {
                        self.report(token.as_ref(), &mut progress, message, context).await;
                    }
                }
            }
        }
    }

    /// Sends one progress notification, when the caller asked for them (a progress token).
    async fn report(
        &self,
        token: Option<&ProgressToken>,
        progress: &mut u32,
        message: String,
        context: &RequestContext<RoleServer>,
    ) {
        let Some(token) = token else { return };
        *progress += 1;
        let update = ProgressNotificationParam::new(token.clone(), f64::from(*progress)).with_message(message);
        // A failed send means the client is gone; the cancellation token will say so.
        let _ = context.peer.notify_progress(update).await;
    }

    async fn list_pending(&self, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context);
        let filter = QuestionFilter {
            status: Some(QuestionStatus::Pending),
            sender: caller.agent,
            owner: caller.owner,
            ..Default::default()
        };
        let (_, pending) = self.state.questions.list(&filter, 0, 1000).await.map_err(internal)?;
        Ok(CallToolResponse::Complete(tools::pending_list(&pending)))
    }
}

impl ServerHandler for BrokerMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("ark-broker", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Ask people questions with ask_question (as a task if you can: any broker replica can report on \
                 it); list what is still unanswered with list_pending_questions.",
            )
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if self.fixtures.is_some() {
            let all = tools::definitions().into_iter().chain(super::fixtures::Fixtures::definitions()).collect();
            return Ok(ListToolsResult::with_all_items(all));
        }
        Ok(ListToolsResult::with_all_items(tools::definitions()))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tool = %request.name))]
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(fixtures) = &self.fixtures
            && let Some(reply) = fixtures.call_tool(&request, &context).await
        {
            return reply;
        }
        match BrokerTool::named(&request.name) {
            Some(BrokerTool::AskQuestion) => self.ask(request, context).await,
            Some(BrokerTool::ListPendingQuestions) => self.list_pending(context).await,
            None => Err(McpError::invalid_params(format!("Unknown tool: {}", request.name), None)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(task.id = %request.task_id))]
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(fixtures) = &self.fixtures
            && super::fixtures::Fixtures::owns(&request.task_id)
        {
            return fixtures.get_task(&request).await;
        }
        let caller = self.caller(&context);
        let question = self.tasks.find(&request.task_id, &caller).await?;
        let poll_interval = self.tasks.task_poll_interval_ms();
        Ok(GetTaskResult::new(tasks::modern_detail(&question, poll_interval, &caller.page_base)))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(task.id = %request.task_id))]
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(fixtures) = &self.fixtures
            && super::fixtures::Fixtures::owns(&request.task_id)
        {
            return fixtures.update_task(&request).await;
        }
        // The only input a task asks for is its caller's answer (`mcp:caller`); other keys are ignored.
        let caller = self.caller(&context);
        let question = self.tasks.find(&request.task_id, &caller).await?;
        if let Some(response) = request.input_responses.get(caller::INPUT_KEY)
            && question.caller_elicitation.is_some()
        {
            self.reply(&question.id, &caller, response).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(task.id = %request.task_id))]
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(fixtures) = &self.fixtures
            && super::fixtures::Fixtures::owns(&request.task_id)
        {
            return fixtures.cancel_task(&request).await;
        }
        let question = self.tasks.find(&request.task_id, &self.caller(&context)).await?;
        // SEP-2663 cancel is an acknowledgement, idempotent even on a terminal task.
        match self.state.questions.cancel(&question.id).await.map_err(internal)? {
            Change::Made(_) | Change::Conflict(_) | Change::NotFound => Ok(()),
        }
    }
}

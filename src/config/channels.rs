//! The credentials and addresses of the channels questions reach besides the page: Slack (a bot token, the
//! signing secret of its requests, an app-level token for Socket Mode) and GitHub (a token, the webhook
//! secret). A kind of channel without its token is refused when a question names it.

use clap::Args;

use super::Secret;

/// Slack's and GitHub's settings, flattened into [`super::Config`].
#[derive(Debug, Clone, Args)]
pub struct ChannelCredentials {
    /// Slack bot token (`xoxb-…`, scope `chat:write`): questions naming `slack:<channel>` are posted there.
    /// Without it, `slack:` channels are refused.
    #[arg(long, env = "ARK_BROKER_SLACK_BOT_TOKEN", hide_env_values = true)]
    pub slack_bot_token: Option<Secret>,

    /// Slack signing secret: requests to `/channels/slack/*` must carry its v0 signature.
    #[arg(long, env = "ARK_BROKER_SLACK_SIGNING_SECRET", hide_env_values = true)]
    pub slack_signing_secret: Option<Secret>,

    /// Slack app-level token (`xapp-…`, scope `connections:write`): each replica takes Slack's interactions and
    /// events over one Socket Mode connection, so Slack needs no public address of the broker. Needs
    /// `--slack-bot-token`.
    #[arg(long, env = "ARK_BROKER_SLACK_APP_TOKEN", hide_env_values = true)]
    pub slack_app_token: Option<Secret>,

    /// Slack Web API base URL (tests point it at a fake).
    #[arg(long, env = "ARK_BROKER_SLACK_API_URL", default_value = "https://slack.com/api")]
    pub slack_api_url: String,

    /// GitHub token (a PAT or an App installation token, `issues: write`): questions naming
    /// `github:<owner>/<repo>#<number>` are commented there. Without it, `github:` channels are refused.
    #[arg(long, env = "ARK_BROKER_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<Secret>,

    /// GitHub webhook secret: deliveries to `/channels/github/webhook` must carry its `X-Hub-Signature-256`.
    #[arg(long, env = "ARK_BROKER_GITHUB_WEBHOOK_SECRET", hide_env_values = true)]
    pub github_webhook_secret: Option<Secret>,

    /// GitHub REST API base URL (GitHub Enterprise: `https://<host>/api/v3`; tests point it at a fake).
    #[arg(long, env = "ARK_BROKER_GITHUB_API_URL", default_value = "https://api.github.com")]
    pub github_api_url: String,
}

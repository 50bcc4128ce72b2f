//! Text as Slack's mrkdwn takes and gives it: escaped so it shows literally, unescaped as the person typed
//! it, and cut to what a block holds. Below both the message's blocks and the form's inputs.

/// Text as mrkdwn shows it literally: Slack reads `&`, `<` and `>` as markup (`<!channel>` would ping).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A message's text as the person typed it: Slack sends `&`, `<` and `>` escaped.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// Text cut to `chars` characters, an ellipsis ending what was cut.
pub fn clip_to(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars.saturating_sub(1)) {
        Some((at, _)) if text.chars().count() > chars => format!("{}…", &text[..at]),
        _ => text.to_owned(),
    }
}

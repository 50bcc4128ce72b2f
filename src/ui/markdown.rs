//! Question content as Markdown, rendered to HTML that is safe to put in the page: pulldown-cmark renders,
//! raw HTML in the content is shown as text (never interpreted), bare web addresses become links, and
//! ammonia then keeps only harmless tags and attributes (links get `rel="noopener nofollow"`).

use std::{collections::HashSet, sync::LazyLock};

use maud::{Markup, PreEscaped};
use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd, TextMergeStream, html};

/// The sanitiser, built once. Images are dropped: the page's Content-Security-Policy would block a remote
/// one anyway, and an agent's content has no business loading a tracking pixel into a person's browser.
static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut cleaner = ammonia::Builder::default();
    cleaner.link_rel(Some("noopener nofollow")).url_schemes(HashSet::from(["http", "https", "mailto"]));
    cleaner.rm_tags(["img"]);
    cleaner
});

/// `markdown` as sanitised HTML.
pub fn render(markdown: &str) -> Markup {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        // Shown as written: an agent's `<b>` or `<script>` is text the person should see, not markup.
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut rendered = String::new();
    // Merged first: the parser may split one run of text (an address with a `_`) into several events.
    html::push_html(&mut rendered, linkify(TextMergeStream::new(events)).into_iter());
    // Defence in depth: whatever the renderer let through, only ammonia's allow-list reaches the page.
    PreEscaped(CLEANER.clean(&rendered).to_string().trim_end().to_owned())
}

/// Turns bare `http(s)://` addresses in text into links (CommonMark only links `<…>` and `[…](…)`, and
/// agents mostly paste plain addresses); text inside links and code blocks is left alone.
fn linkify<'a>(events: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
    let mut out = Vec::new();
    let mut inside = 0usize;
    for event in events {
        match event {
            Event::Start(tag @ (Tag::Link { .. } | Tag::CodeBlock(_))) => {
                inside += 1;
                out.push(Event::Start(tag));
            }
            Event::End(end @ (TagEnd::Link | TagEnd::CodeBlock)) => {
                inside = inside.saturating_sub(1);
                out.push(Event::End(end));
            }
            Event::Text(text) if inside == 0 => split_links(&text, &mut out),
            other => out.push(other),
        }
    }
    out
}

/// Pushes `text` as text and link events.
fn split_links<'a>(text: &str, out: &mut Vec<Event<'a>>) {
    let mut rest = text;
    while let Some(start) = next_address(rest) {
        let candidate = &rest[start..];
        let end = candidate.find(|c: char| c.is_whitespace() || "<>\"".contains(c)).unwrap_or(candidate.len());
        // Sentence punctuation after an address is not part of it.
        let address = candidate[..end].trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '\'']);
        if address.len() <= "https://".len() {
            out.push(Event::Text(CowStr::from(rest[..start + end].to_owned())));
            rest = &rest[start + end..];
            continue;
        }
        if start > 0 {
            out.push(Event::Text(CowStr::from(rest[..start].to_owned())));
        }
        let url = CowStr::from(address.to_owned());
        out.push(Event::Start(Tag::Link {
            link_type: LinkType::Autolink,
            dest_url: url.clone(),
            title: CowStr::from(""),
            id: CowStr::from(""),
        }));
        out.push(Event::Text(url));
        out.push(Event::End(TagEnd::Link));
        rest = &rest[start + address.len()..];
    }
    if !rest.is_empty() {
        out.push(Event::Text(CowStr::from(rest.to_owned())));
    }
}

/// Where the next `http://` or `https://` starts.
fn next_address(text: &str) -> Option<usize> {
    [text.find("https://"), text.find("http://")].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::render;

    fn html(markdown: &str) -> String {
        render(markdown).into_string()
    }

    #[test]
    fn markdown_is_rendered() {
        assert_eq!(html("**Merge** PR `#42`?"), "<p><strong>Merge</strong> PR <code>#42</code>?</p>");
        assert!(html("- a\n- b").contains("<li>a</li>"));
    }

    #[test]
    fn links_are_clickable_and_marked_noopener_nofollow() {
        let rendered = html("See [the PR](https://github.com/o/r/pull/42) or https://example.com/x.");
        assert!(
            rendered.contains(r#"<a href="https://github.com/o/r/pull/42" rel="noopener nofollow">the PR</a>"#),
            "{rendered}"
        );
        assert!(
            rendered.contains(r#"<a href="https://example.com/x" rel="noopener nofollow">https://example.com/x</a>."#),
            "{rendered}"
        );
        assert!(!html("`https://in.code`").contains("<a"), "code stays code");
    }

    #[test]
    fn raw_html_and_scripts_are_shown_as_text_never_run() {
        let rendered = html("Deploy <b>v2</b>?\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>");
        assert!(!rendered.contains("<script") && !rendered.contains("<b>") && !rendered.contains("<img"), "{rendered}");
        assert!(rendered.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{rendered}");
        assert!(rendered.contains("Deploy &lt;b&gt;v2&lt;/b&gt;?"), "{rendered}");
    }

    #[test]
    fn dangerous_links_lose_their_address() {
        for markdown in [
            "[x](javascript:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "![x](https://t.example/p.png)",
        ] {
            let rendered = html(markdown);
            assert!(
                !rendered.contains("javascript:") && !rendered.contains("data:") && !rendered.contains("<img"),
                "{rendered}"
            );
        }
    }
}

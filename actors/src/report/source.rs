//! A Python source as HTML whose colours come from CSS alone (report.html runs no script):
//! each keyword, name of a definition, string, number and comment in a span of its class, from
//! the lexer the duplicate check uses. A source that does not lex is shown plain.

use rustpython_parser::{Mode, Tok, lexer::lex};

use super::svg::escape;

/// The classes report.html's style colours.
pub(super) const STYLE: &str = "\
pre.source { background: #f7f7f7; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; font-size: 0.85em; line-height: 1.35; }
pre.source .kw { color: #8b008b; font-weight: bold; }
pre.source .str { color: #a0522d; }
pre.source .num { color: #1c6b9c; }
pre.source .com { color: #6a737d; font-style: italic; }
";

/// `source` as the inside of a `<pre class="source"><code>`.
pub(super) fn highlighted(source: &str) -> String {
    let mut html = String::new();
    let mut shown = 0;
    for token in lex(source, Mode::Module) {
        let Ok((token, range)) = token else {
            return escape(source);
        };
        let (start, end) = (usize::from(range.start()), usize::from(range.end()));
        if start < shown || end > source.len() {
            continue;
        }
        between_tokens(&source[shown..start], &mut html);
        let text = &source[start..end];
        let class = match token {
            Tok::String { .. } => Some("str"),
            Tok::Int { .. } | Tok::Float { .. } | Tok::Complex { .. } => Some("num"),
            Tok::Name { .. } => None,
            // The lexer's other words are Python's keywords (None, True and False among them).
            _ if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphabetic()) => Some("kw"),
            _ => None,
        };
        match class {
            Some(class) => {
                html.push_str(&format!("<span class=\"{class}\">{}</span>", escape(text)))
            }
            None => html.push_str(&escape(text)),
        }
        shown = end;
    }
    between_tokens(&source[shown..], &mut html);
    html
}

/// What lies between two tokens: spacing, line continuations and comments, where a `#` can
/// only start a comment (a `#` inside a string is part of the string's token).
fn between_tokens(gap: &str, html: &mut String) {
    for line in gap.split_inclusive('\n') {
        match line.find('#') {
            Some(at) => {
                let (before, comment) = line.split_at(at);
                let (comment, newline) = match comment.strip_suffix('\n') {
                    Some(comment) => (comment, "\n"),
                    None => (comment, ""),
                };
                html.push_str(&escape(before));
                html.push_str(&format!(
                    "<span class=\"com\">{}</span>{newline}",
                    escape(comment)
                ));
            }
            None => html.push_str(&escape(line)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_strings_numbers_and_comments_get_their_classes_and_the_text_stays_whole() {
        let source = "import triton  # the compiler\n\n@triton.jit\ndef kernel_function(a, b='#x'):\n    return a * 2.5 if b else None\n";
        let html = highlighted(source);
        for part in [
            "<span class=\"kw\">import</span> triton  <span class=\"com\"># the compiler</span>\n",
            "<span class=\"kw\">def</span> kernel_function(a, b=<span class=\"str\">&#39;#x&#39;</span>):",
            "<span class=\"kw\">return</span> a * <span class=\"num\">2.5</span> <span class=\"kw\">if</span> b <span class=\"kw\">else</span> <span class=\"kw\">None</span>",
        ] {
            assert!(html.contains(part), "{part} in {html}");
        }
        let text = html
            .replace("<span class=\"kw\">", "")
            .replace("<span class=\"str\">", "")
            .replace("<span class=\"num\">", "")
            .replace("<span class=\"com\">", "")
            .replace("</span>", "")
            .replace("&#39;", "'");
        assert_eq!(text, source);
    }

    #[test]
    fn markup_in_a_source_is_escaped_and_a_source_that_does_not_lex_is_plain() {
        assert!(highlighted("s = '<script>'\n").contains("&lt;script&gt;"));
        assert_eq!(
            highlighted("def f(:\n  'open\n"),
            escape("def f(:\n  'open\n")
        );
    }
}

//! report.html: one self-contained page (inline CSS and SVG; no script, no font, nothing fetched,
//! which its Content-Security-Policy also enforces) holding report.md's text and tables with the
//! plots after the header.

use pulldown_cmark::{Event as Markdown, Options, Parser, html::push_html};

use super::RunSummary;
use super::lineage::lineage;
use super::markdown::ratio;
use super::plots::{best_over_time, candidates_by_round};
use super::source::{self, highlighted};
use super::svg::escape;
use super::timeline::device_timelines;

const STYLE: &str = "\
body { font-family: sans-serif; margin: 2em auto; max-width: 1000px; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1.5em 0; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
svg { max-width: 100%; height: auto; background: #fff; }
.answer .figures { display: flex; flex-wrap: wrap; gap: 0.6em; margin: 0.6em 0; }
.answer .figure { border: 1px solid #ccc; border-radius: 4px; padding: 0.4em 0.8em; }
.answer .figure b { font-size: 1.4em; margin-right: 0.2em; }
";

/// The answer first: the best kernel's speedups and share of the speed of light, then its
/// source. The finale's figures (re-timed in one fresh evaluator) where the run had one, the
/// search's otherwise.
fn answer(summary: &RunSummary) -> String {
    let Some(best) = summary.best_figures() else {
        return "<section class=\"answer\"><h2>The answer</h2><p>No kernel was verified.</p></section>\n"
            .into();
    };
    let (best_ms, initial_ms, eager_ms, compile_ms) =
        (best.time_ms, best.start_ms, best.eager_ms, best.compile_ms);
    let timed = if best.retimed {
        "re-timed by the finale"
    } else {
        "as the search timed it"
    };
    let best = best.candidate;
    let figure = |class: &str, value: String, what: &str| {
        format!(
            "<div class=\"figure {class}\"><b>{}</b> {what}</div>",
            escape(&value)
        )
    };
    let start = format!("the {}", summary.start_name());
    let figures = [
        figure("vs-initial", ratio(initial_ms, Some(best_ms)), &start),
        figure("vs-eager", ratio(eager_ms, Some(best_ms)), "PyTorch eager"),
        figure(
            "vs-compile",
            ratio(compile_ms, Some(best_ms)),
            "torch.compile",
        ),
        figure(
            "speed-of-light",
            summary.verification.percent_text(best),
            "of the speed of light",
        ),
    ]
    .join("");
    let source = summary
        .sources
        .get(&best)
        .map(|text| {
            format!(
                "<pre class=\"source\"><code>{}</code></pre>",
                highlighted(text)
            )
        })
        .unwrap_or_default();
    format!(
        "<section class=\"answer\"><h2>The answer</h2>\n<p>Candidate {best}: {best_ms:.4} ms ({timed}), best_kernel.py:</p>\n<div class=\"figures\">{figures}</div>\n{source}</section>\n"
    )
}

/// The plots, each with its caption.
fn plots(summary: &RunSummary) -> String {
    [
        (
            "The best verified time against wall-clock time",
            best_over_time(summary),
        ),
        (
            "Every candidate's time by round: the beam ringed, failures by reason",
            candidates_by_round(summary),
        ),
        (
            "Each device's timeline and busy fraction",
            device_timelines(summary),
        ),
        (
            "Lineage: each candidate from its parent, the bottleneck it addressed, its result",
            lineage(summary),
        ),
    ]
    .into_iter()
    .map(|(caption, svg)| format!("<figure><figcaption>{caption}</figcaption>{svg}</figure>\n"))
    .collect()
}

/// report.md as HTML. Raw HTML in it (a failure's reason quotes whatever a candidate printed) is
/// shown as text, never passed through.
fn markdown_html(markdown: &str) -> String {
    let events = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|event| match event {
        Markdown::Html(text) | Markdown::InlineHtml(text) => Markdown::Text(text),
        other => other,
    });
    let mut html = String::new();
    push_html(&mut html, events);
    html
}

pub(super) fn page(summary: &RunSummary, markdown: &str) -> String {
    let body = markdown_html(markdown);
    // The plots go after the header (title and outcome), before the first section.
    let split = body.find("<h2>").unwrap_or(body.len());
    let (header, sections) = body.split_at(split);
    let title = if summary.strategy.is_empty() {
        "kactors run report".to_string()
    } else {
        format!("kactors run report: {}", summary.strategy)
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}{}</style>\n</head>\n<body>\n{header}{}{}{sections}</body>\n</html>\n",
        escape(&title),
        source::STYLE,
        answer(summary),
        plots(summary)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_in_the_markdown_is_shown_as_text() {
        let html = markdown_html("| a |\n|---|\n| <script>alert(1)</script> <img src=x> |\n");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("<table>"), "{html}");
    }
}

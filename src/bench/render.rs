//! bench.md, bench.json and bench.html: the table of problems and the suite's figures, from
//! the bench's journal and each run's own journal alone.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use super::figures::{Baseline, FAST_P, ProblemResult, SuiteFigures, suite_figures};
use super::record::BenchOutcome;

/// What the bench files are made from.
pub struct BenchSummary<'a> {
    pub strategy: &'a str,
    pub outcome: BenchOutcome,
    pub reason: &'a str,
    /// The bench directory: run directories are shown relative to it.
    pub dir: &'a Path,
    pub results: &'a [ProblemResult],
}

/// The three files' contents.
pub struct BenchFiles {
    pub markdown: String,
    pub json: Value,
    pub html: String,
}

const KERNELBENCH_FASTP: &str =
    "KernelBench's `fastp` (src/score.py of github.com/ScalingIntelligence/KernelBench)";

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |ratio| format!("{ratio:.2}×"))
}

fn share(value: f64) -> String {
    format!("{value:.2}")
}

impl BenchSummary<'_> {
    fn run_dir(&self, result: &ProblemResult) -> String {
        result.run_dir.as_ref().map_or_else(
            || "–".into(),
            |dir| {
                dir.strip_prefix(self.dir)
                    .unwrap_or(dir)
                    .display()
                    .to_string()
            },
        )
    }

    fn outcome_line(&self) -> String {
        let word = match self.outcome {
            BenchOutcome::Completed => "ran",
            BenchOutcome::Interrupted => "was interrupted",
        };
        format!("The bench {word}: {}.", self.reason)
    }

    /// One row per problem: its cells as text.
    fn rows(&self) -> Vec<[String; 8]> {
        self.results
            .iter()
            .map(|result| {
                let figures = result.figures();
                let simulated = if result.simulated() {
                    " (simulated)"
                } else {
                    ""
                };
                [
                    result.name.clone(),
                    // A reason may carry a log's tail: the table keeps its first line, bench.json all.
                    result
                        .ending()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    if result.correct() { "yes" } else { "no" }.into(),
                    figures.map_or_else(|| "–".into(), |f| format!("{:.4}{simulated}", f.time_ms)),
                    ratio(figures.and_then(|f| Baseline::Eager.speedup(f))),
                    ratio(figures.and_then(|f| Baseline::Compile.speedup(f))),
                    figures
                        .and_then(|f| f.speed_of_light_pct)
                        .map_or_else(|| "–".into(), |pct| format!("{pct:.1}%")),
                    self.run_dir(result),
                ]
            })
            .collect()
    }

    pub fn render(&self) -> BenchFiles {
        let figures = suite_figures(self.results);
        BenchFiles {
            markdown: self.markdown(&figures),
            json: self.json(&figures),
            html: self.html(&figures),
        }
    }

    fn markdown(&self, figures: &SuiteFigures) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# kactors bench: `{}`\n", self.strategy);
        let _ = writeln!(
            out,
            "{} {} problem(s), {} correct. Each problem is a run of its own (generation, then the search), in the run directory the table names.\n",
            self.outcome_line(),
            figures.problems,
            figures.correct
        );
        out.push_str("| problem | ended | correct | time (ms) | vs eager | vs torch.compile | speed of light | run |\n");
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        for row in self.rows() {
            let cells: Vec<String> = row.iter().map(|cell| cell.replace('|', "\\|")).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(
            out,
            "\nThe time is the best verified kernel's, re-timed by its run's finale beside PyTorch's references where the run had one; the speedups are the references' times over it.\n"
        );
        let _ = writeln!(out, "## The suite's figures\n");
        let _ = writeln!(
            out,
            "As KernelBench defines them ({KERNELBENCH_FASTP}): fast_p is the share of all {} problems whose kernel is correct and more than p times faster than the baseline; fast_0 is the share correct. A problem not finished counts with what its run verified; one not started as incorrect.\n",
            figures.problems
        );
        let header: Vec<String> = FAST_P.iter().map(|p| format!("fast_{p:.1}")).collect();
        let _ = writeln!(out, "| baseline | fast_0 | {} |", header.join(" | "));
        let _ = writeln!(out, "|---|---|{}", "---|".repeat(FAST_P.len()));
        for (baseline, at) in &figures.fast_p {
            let cells: Vec<String> = at.iter().map(|(_, value)| share(*value)).collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                baseline.label(),
                share(figures.fast_0),
                cells.join(" | ")
            );
        }
        out
    }

    fn json(&self, figures: &SuiteFigures) -> Value {
        let problems: Vec<Value> = self
            .results
            .iter()
            .map(|result| {
                let f = result.figures();
                json!({
                    "name": result.name,
                    "ended": result.ending(),
                    "exit_code": match result.status {
                        super::figures::Status::Ended { exit_code } => Some(exit_code),
                        _ => None,
                    },
                    "finished": matches!(result.status, super::figures::Status::Ended { .. }),
                    "correct": result.correct(),
                    "simulated": result.simulated(),
                    "best_candidate": f.map(|f| f.candidate.0),
                    "time_ms": f.map(|f| f.time_ms),
                    "eager_ms": f.and_then(|f| f.eager_ms),
                    "compile_ms": f.and_then(|f| f.compile_ms),
                    "speedup_over_eager": f.and_then(|f| Baseline::Eager.speedup(f)),
                    "speedup_over_compile": f.and_then(|f| Baseline::Compile.speedup(f)),
                    "speed_of_light_pct": f.and_then(|f| f.speed_of_light_pct),
                    "retimed_by_finale": f.map(|f| f.retimed),
                    "run_dir": result.run_dir,
                })
            })
            .collect();
        let fast_p: serde_json::Map<String, Value> = figures
            .fast_p
            .iter()
            .map(|(baseline, at)| {
                let values: serde_json::Map<String, Value> = at
                    .iter()
                    .map(|(p, value)| (format!("{p:.1}"), json!(value)))
                    .collect();
                (baseline.key().to_string(), Value::Object(values))
            })
            .collect();
        json!({
            "type": "bench",
            "strategy": self.strategy,
            "outcome": match self.outcome {
                BenchOutcome::Completed => "completed",
                BenchOutcome::Interrupted => "interrupted",
            },
            "reason": self.reason,
            "problems": problems,
            "figures": {
                "problems": figures.problems,
                "correct": figures.correct,
                "fast_0": figures.fast_0,
                "fast_p": fast_p,
                "definition": KERNELBENCH_FASTP,
            },
        })
    }

    fn html(&self, figures: &SuiteFigures) -> String {
        let mut rows = String::new();
        for row in self.rows() {
            let cells: String = row
                .iter()
                .map(|cell| format!("<td>{}</td>", escape(cell)))
                .collect();
            let _ = writeln!(rows, "<tr class=\"problem\">{cells}</tr>");
        }
        let mut table = String::new();
        for (baseline, at) in &figures.fast_p {
            let cells: String = at
                .iter()
                .map(|(p, value)| {
                    format!(
                        "<td class=\"fast-p\" data-baseline=\"{}\" data-p=\"{p:.1}\">{}</td>",
                        baseline.key(),
                        share(*value)
                    )
                })
                .collect();
            let _ = writeln!(
                table,
                "<tr><td>{}</td><td>{}</td>{cells}</tr>",
                baseline.label(),
                share(figures.fast_0)
            );
        }
        let header: String = FAST_P
            .iter()
            .map(|p| format!("<th>fast_{p:.1}</th>"))
            .collect();
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n<title>kactors bench: {strategy}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>kactors bench: {strategy}</h1>\n<p>{outcome}</p>\n<figure><figcaption>fast_p against p: the share of all {n} problems correct and more than p times faster than the baseline</figcaption>\n{plot}</figure>\n<table class=\"figures\"><tr><th>baseline</th><th>fast_0</th>{header}</tr>\n{table}</table>\n<p>As KernelBench defines them: {definition}.</p>\n<table class=\"problems\"><tr><th>problem</th><th>ended</th><th>correct</th><th>time (ms)</th><th>vs eager</th><th>vs torch.compile</th><th>speed of light</th><th>run</th></tr>\n{rows}</table>\n</body>\n</html>\n",
            strategy = escape(self.strategy),
            outcome = escape(&self.outcome_line()),
            n = figures.problems,
            plot = self.plot(),
            definition = escape(KERNELBENCH_FASTP),
        )
    }

    /// fast_p as a function of p for both baselines: a step line each, falling at each
    /// correct kernel's speedup; a point at each reported threshold.
    fn plot(&self) -> String {
        const WIDTH: f64 = 640.0;
        const HEIGHT: f64 = 300.0;
        const LEFT: f64 = 50.0;
        const BOTTOM: f64 = 30.0;
        let n = self.results.len().max(1) as f64;
        let speedups = |baseline: Baseline| -> Vec<f64> {
            let mut all: Vec<f64> = self
                .results
                .iter()
                .filter_map(ProblemResult::figures)
                .filter_map(|f| baseline.speedup(f))
                .collect();
            all.sort_by(f64::total_cmp);
            all
        };
        let largest = Baseline::BOTH
            .iter()
            .flat_map(|b| speedups(*b))
            .fold(FAST_P[FAST_P.len() - 1], f64::max);
        let p_max = (largest * 1.1).ceil().min(1000.0);
        let x = |p: f64| LEFT + (p / p_max).min(1.0) * (WIDTH - LEFT - 10.0);
        let y = |share: f64| 10.0 + (1.0 - share) * (HEIGHT - BOTTOM - 10.0);
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\">\n"
        );
        let _ = writeln!(
            svg,
            "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"#444\"/><line class=\"axis\" x1=\"{LEFT}\" y1=\"{y1}\" x2=\"{LEFT}\" y2=\"{y0}\" stroke=\"#444\"/>",
            y0 = y(0.0),
            y1 = y(1.0),
            x1 = x(p_max),
        );
        for tick in [0.0, 0.5, 1.0] {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{tick:.1}</text>",
                LEFT - 4.0,
                y(tick) + 4.0
            );
        }
        for tick in [0.0, 1.0, p_max] {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">p = {tick:.1}</text>",
                x(tick),
                HEIGHT - 8.0
            );
        }
        for (baseline, colour) in [(Baseline::Eager, "#1f77b4"), (Baseline::Compile, "#d62728")] {
            let speeds = speedups(baseline);
            let above = |p: f64| speeds.iter().filter(|s| **s > p).count() as f64 / n;
            // A step down at each speedup: level until it, then what stays above it.
            let mut points = vec![(0.0, above(0.0))];
            for s in &speeds {
                let level = points.last().map_or(0.0, |(_, share)| *share);
                points.push((*s, level));
                points.push((*s, above(*s)));
            }
            points.push((p_max, above(p_max)));
            let path: Vec<String> = points
                .iter()
                .map(|(p, share)| format!("{:.1},{:.1}", x(*p), y(*share)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline class=\"fast-p-curve\" data-baseline=\"{key}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"><title>fast_p against {label}</title></polyline>",
                path.join(" "),
                key = baseline.key(),
                label = baseline.label(),
            );
            for p in FAST_P {
                let value = super::figures::fast_p(self.results, baseline, p);
                let _ = writeln!(
                    svg,
                    "<circle class=\"fast-p\" data-baseline=\"{key}\" data-p=\"{p:.1}\" data-value=\"{value}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\"><title>fast_{p:.1} against {label}: {value:.2}</title></circle>",
                    x(p),
                    y(value),
                    key = baseline.key(),
                    label = baseline.label(),
                );
            }
        }
        svg.push_str("</svg>\n");
        svg
    }
}

const STYLE: &str = "body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; } table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; } th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; } th { background: #f3f3f3; } svg { max-width: 100%; height: auto; }";

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::figures::tests::result;

    #[test]
    fn the_files_hold_a_row_per_problem_and_the_suite_figures() {
        let results = [result("level1/a", Some(0.5)), result("level1/b|x", None)];
        let summary = BenchSummary {
            strategy: "noop",
            outcome: BenchOutcome::Completed,
            reason: "every problem ended",
            dir: Path::new("/b"),
            results: &results,
        };
        let files = summary.render();
        assert!(
            files.markdown.contains("| level1/a | completed: max_rounds (1) reached | yes | 0.5000 | 4.00× | 2.00× | 50.0% | – |"),
            "{}",
            files.markdown
        );
        assert!(
            files.markdown.contains("level1/b\\|x"),
            "{}",
            files.markdown
        );
        assert!(
            files
                .markdown
                .contains("| PyTorch eager | 0.50 | 0.50 | 0.50 | 0.50 |"),
            "{}",
            files.markdown
        );
        assert_eq!(files.json["figures"]["fast_p"]["compile"]["2.0"], 0.0);
        assert_eq!(files.json["figures"]["fast_p"]["eager"]["2.0"], 0.5);
        assert_eq!(files.json["problems"][1]["correct"], false);
        assert_eq!(files.html.matches("<circle class=\"fast-p\"").count(), 6);
        assert_eq!(files.html.matches("<tr class=\"problem\">").count(), 2);
        // Against eager: half the problems above every p up to the one kernel's 4×, then none.
        let eager = files
            .html
            .split("data-baseline=\"eager\"")
            .nth(1)
            .and_then(|rest| rest.split("points=\"").nth(1))
            .and_then(|rest| rest.split('"').next())
            .unwrap();
        let points: Vec<&str> = eager.split(' ').collect();
        assert_eq!(points.len(), 4, "{eager}");
        assert!(points[0].starts_with("50.0,140.0"), "{eager}");
        assert_eq!(points[1].split(',').nth(1), Some("140.0"), "{eager}");
        assert_eq!(points[2].split(',').nth(1), Some("270.0"), "{eager}");
    }

    #[test]
    fn the_table_keeps_a_reasons_first_line_and_bench_json_all_of_it() {
        let mut stopped = result("a", None);
        stopped.status = crate::bench::figures::Status::NotFinished {
            why: "its run exited with 101\nthread main panicked".into(),
        };
        let results = [stopped];
        let files = BenchSummary {
            strategy: "noop",
            outcome: BenchOutcome::Completed,
            reason: "every problem's run ended",
            dir: Path::new("/b"),
            results: &results,
        }
        .render();
        assert!(
            files
                .markdown
                .contains("| a | not finished: its run exited with 101 | no |"),
            "{}",
            files.markdown
        );
        assert!(!files.markdown.contains("panicked"), "{}", files.markdown);
        assert_eq!(
            files.json["problems"][0]["ended"],
            "not finished: its run exited with 101\nthread main panicked"
        );
    }
}

//! report.md's comparison of the models of a run that has several (`models`, issue 22): each
//! model's proposals, how many verified, its best kernel and the dollars its requests cost. A
//! journal without `model` fields (a run of one model, or an older journal) has no such section.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::journal::Event;
use crate::model::CandidateId;

use super::markdown::{ratio, table_cell};

/// What one model did.
#[derive(Clone, Debug, Default)]
struct ModelRow {
    proposals: u32,
    verified: u32,
    best: Option<(f64, CandidateId)>,
    dollars: f64,
    /// Whether any of its requests had a price (a model without one shows a dash).
    priced: bool,
}

/// The models' rows, folded record by record.
#[derive(Clone, Debug, Default)]
pub(super) struct Models {
    /// In the order the journal first names them.
    order: Vec<String>,
    rows: BTreeMap<String, ModelRow>,
    /// Each candidate's model, from `candidate_planned`: its reflexions are its model's too.
    by_candidate: BTreeMap<CandidateId, String>,
    /// Each request's model, from its `*_requested` record.
    by_request: BTreeMap<String, String>,
}

impl Models {
    fn row(&mut self, model: &str) -> &mut ModelRow {
        if !self.rows.contains_key(model) {
            self.order.push(model.to_string());
        }
        self.rows.entry(model.to_string()).or_default()
    }

    fn spent(&mut self, model: Option<String>, cost_usd: Option<f64>) {
        if let Some(model) = model {
            let row = self.row(&model);
            if let Some(cost) = cost_usd {
                row.dollars += cost;
                row.priced = true;
            }
        }
    }

    pub(super) fn observe(&mut self, event: &Event) {
        match event {
            Event::CandidatePlanned {
                candidate,
                model: Some(model),
                ..
            } => {
                self.by_candidate.insert(*candidate, model.clone());
                self.row(model).proposals += 1;
            }
            Event::ProposalRequested {
                request_id,
                model: Some(model),
                ..
            }
            | Event::AnalysisRequested {
                request_id,
                model: Some(model),
                ..
            } => {
                self.by_request.insert(request_id.clone(), model.clone());
            }
            Event::ProposalReceived {
                request_id,
                cost_usd,
                ..
            }
            | Event::AnalysisReceived {
                request_id,
                cost_usd,
                ..
            } => {
                let model = self.by_request.get(request_id).cloned();
                self.spent(model, *cost_usd);
            }
            Event::ReflexionReceived {
                candidate,
                cost_usd,
                ..
            } => {
                let model = self.by_candidate.get(candidate).cloned();
                self.spent(model, *cost_usd);
            }
            Event::CandidateFinished {
                candidate,
                passed: true,
                time_ms: Some(ms),
                ..
            } => {
                let Some(model) = self.by_candidate.get(candidate).cloned() else {
                    return;
                };
                let row = self.row(&model);
                row.verified += 1;
                if row.best.is_none_or(|(best, _)| *ms < best) {
                    row.best = Some((*ms, *candidate));
                }
            }
            _ => {}
        }
    }

    /// The `## Models` section; nothing for a run of one model. `initial_ms` is what the
    /// speedups are over.
    pub(super) fn render(&self, initial_ms: Option<f64>, out: &mut String) {
        if self.order.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\n## Models\n\nThe models shared the proposals by weight; a parent's analysis is the first model's, a refinement and a reflexion the model of the candidate they are about. Dollars are every request's, from the models' prices.\n"
        );
        let _ = writeln!(
            out,
            "| model | proposals | verified | best (ms) | best speedup | dollars |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for model in &self.order {
            let row = &self.rows[model];
            let best = row.best.map_or_else(
                || "–".to_string(),
                |(ms, candidate)| format!("{ms:.4} (candidate {candidate})"),
            );
            let dollars = if row.priced {
                format!("{:.4}", row.dollars)
            } else {
                "–".into()
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {best} | {} | {dollars} |",
                table_cell(model),
                row.proposals,
                row.verified,
                ratio(initial_ms, row.best.map(|(ms, _)| ms))
            );
        }
    }
}

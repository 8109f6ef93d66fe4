//! The prompts, rendered from minijinja templates in templates/. kactors' own templates are
//! compiled in; a configuration's `templates:` replaces them by files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use actors::ports::{PromptBuilder, ProposalContext};
use minijinja::{Environment, context};

const SHIPPED: &[(&str, &str)] = &[
    ("system", include_str!("../templates/system.j2")),
    ("optimization", include_str!("../templates/optimization.j2")),
];

#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("failed to read template `{name}` from {path}: {source}")]
    Read {
        name: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("template `{name}` does not parse: {message}")]
    Syntax { name: String, message: String },
}

pub struct Prompts {
    environment: Environment<'static>,
    platform_name: String,
    simulated: bool,
}

impl Prompts {
    /// The shipped templates, each replaced by the file `overrides` names for it.
    pub fn new(
        overrides: &BTreeMap<String, PathBuf>,
        platform_name: &str,
        simulated: bool,
    ) -> Result<Self, PromptError> {
        let mut environment = Environment::new();
        environment.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        for (name, shipped) in SHIPPED {
            let text = match overrides.get(*name) {
                Some(path) => {
                    std::fs::read_to_string(path).map_err(|source| PromptError::Read {
                        name: name.to_string(),
                        path: path.clone(),
                        source,
                    })?
                }
                None => shipped.to_string(),
            };
            environment
                .add_template_owned(name.to_string(), text)
                .map_err(|error| PromptError::Syntax {
                    name: name.to_string(),
                    message: error.to_string(),
                })?;
        }
        Ok(Prompts {
            environment,
            platform_name: platform_name.to_string(),
            simulated,
        })
    }

    fn render(&self, name: &str, values: minijinja::Value) -> Result<String, String> {
        self.environment
            .get_template(name)
            .and_then(|template| template.render(values))
            .map_err(|error| format!("template `{name}`: {error}"))
    }
}

impl PromptBuilder for Prompts {
    fn optimization(&self, c: &ProposalContext) -> Result<(String, String), String> {
        let profile = c.profile.as_ref().map(
            |p| context! { analysis => p.analysis.clone(), bottleneck => p.bottleneck.clone() },
        );
        let system = self.render(
            "system",
            context! { platform_name => self.platform_name.clone() },
        )?;
        let user = self.render(
            "optimization",
            context! {
                round => c.round,
                proposal_index => c.proposal_index,
                parent => c.parent.0,
                parent_time_ms => c.parent_time_ms,
                best_time_ms => c.best_time_ms,
                initial_time_ms => c.initial_time_ms,
                simulated => self.simulated,
                profile => profile,
                parent_source => c.parent_source.text(),
            },
        )?;
        Ok((system, user))
    }
}

#[cfg(test)]
mod tests {
    use actors::model::{CandidateId, KernelSource};

    use super::*;

    fn context() -> ProposalContext {
        ProposalContext {
            candidate: CandidateId(3),
            round: 2,
            parent: CandidateId(1),
            parent_source: KernelSource::new("def kernel_function(x):\n    return x\n"),
            parent_time_ms: 1.5,
            best_time_ms: 1.25,
            initial_time_ms: 2.0,
            proposal_index: 1,
            profile: None,
        }
    }

    #[test]
    fn the_optimization_prompt_carries_the_kernel_and_its_times() {
        let prompts = Prompts::new(&BTreeMap::new(), "NVIDIA GPUs", false).unwrap();
        let (system, user) = prompts.optimization(&context()).unwrap();
        assert!(system.contains("Triton kernels for NVIDIA GPUs"));
        assert!(user.contains("round 2, proposal 2"));
        assert!(user.contains("This kernel (candidate 1): 1.5000 ms"));
        assert!(user.contains("Best so far: 1.2500 ms"));
        assert!(user.contains("def kernel_function(x):"));
        assert!(user.contains("No profile is available"));
        assert!(!user.contains("simulated"));
    }

    #[test]
    fn a_template_file_replaces_the_shipped_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opt.j2");
        std::fs::write(&path, "parent {{ parent }} at {{ parent_time_ms }}").unwrap();
        let overrides = BTreeMap::from([("optimization".to_string(), path)]);
        let prompts = Prompts::new(&overrides, "x", true).unwrap();
        assert_eq!(
            prompts.optimization(&context()).unwrap().1,
            "parent 1 at 1.5"
        );
    }

    #[test]
    fn an_unknown_variable_in_a_template_is_an_error_not_an_empty_string() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opt.j2");
        std::fs::write(&path, "{{ not_a_variable }}").unwrap();
        let overrides = BTreeMap::from([("optimization".to_string(), path)]);
        let error = Prompts::new(&overrides, "x", true)
            .unwrap()
            .optimization(&context())
            .unwrap_err();
        assert!(error.contains("template `optimization`"), "{error}");
    }
}

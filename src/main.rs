use clap::Parser;

fn main() {
    let code = match kactors::cli::Cli::try_parse() {
        Ok(cli) => kactors::commands::execute(cli),
        Err(error) => kactors::commands::refuse_command_line(error),
    };
    std::process::exit(code);
}

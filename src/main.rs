use clap::Parser;

fn main() {
    kactors::signals::ignore_file_size_limit();
    let code = match kactors::cli::Cli::try_parse() {
        Ok(cli) => kactors::commands::execute(cli),
        Err(error) => kactors::commands::refuse_command_line(error),
    };
    std::process::exit(code);
}

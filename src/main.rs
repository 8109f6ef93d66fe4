use clap::Parser;

fn main() {
    let cli = kactors::cli::Cli::parse();
    std::process::exit(kactors::commands::execute(cli));
}

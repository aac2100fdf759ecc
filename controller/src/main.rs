//! The `steward` binary (see [`steward::cli::entry`]).

fn main() -> std::process::ExitCode {
    steward::cli::entry::main()
}

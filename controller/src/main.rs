//! The `steward` binary (see [`steward::cli`]).

fn main() -> std::process::ExitCode {
    steward::cli::main()
}
